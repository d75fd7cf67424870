"""Certificates for TLS tests, made with the openssl command: a CA, a server
certificate it signed for 127.0.0.1 and localhost, the PKCS12 keystore an HBase
gateway reads, and a second CA that signed nothing the server holds."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = "shdb-test"


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate (PEM) that signed the server's
    other_ca: Path  # a CA certificate that did not
    server_cert: Path
    server_key: Path
    keystore: Path  # PKCS12: the server's key and certificate, PASSWORD


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(folder: Path) -> Certs:
    """Everything in ``folder`` (world-readable: a container's gateway reads it)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ca", "other"):
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN=shdb test {name} CA", "-keyout", f"{name}.key", "-out", f"{name}.pem",
            cwd=folder,
        )  # fmt: skip
    (folder / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr", cwd=folder,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=folder,
    )  # fmt: skip
    _openssl(
        "pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key", "-name", "gateway",
        "-passout", f"pass:{PASSWORD}", "-out", "server.p12", cwd=folder,
    )  # fmt: skip
    for path in folder.iterdir():
        path.chmod(0o644)
    return Certs(
        folder / "ca.pem",
        folder / "other.pem",
        folder / "server.pem",
        folder / "server.key",
        folder / "server.p12",
    )
