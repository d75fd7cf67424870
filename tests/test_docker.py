"""The Docker image's files agree with scripts/hbase and with each other, and its
health check speaks Thrift correctly (run against the session's HBase)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from .conftest import hbase_address

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


def test_entrypoint_renders_every_placeholder_of_the_template() -> None:
    template = (ROOT / "scripts" / "hbase.d" / "hbase-site.xml.in").read_text()
    template = re.sub(r"<!--.*?-->", "", template, flags=re.DOTALL)
    entrypoint = (DOCKER / "entrypoint").read_text()
    placeholders = set(re.findall(r"@[A-Z0-9_]+@", template))
    assert placeholders, "the template has no placeholders"
    missing = {p for p in placeholders if f"s|{p}|" not in entrypoint}
    assert not missing, f"docker/entrypoint does not substitute {sorted(missing)}"


def test_compose_uses_the_tag_docker_build_makes() -> None:
    tag = subprocess.run(
        [str(DOCKER / "build"), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    compose = (DOCKER / "docker-compose.yml").read_text()
    assert re.fullmatch(r"shdb-hbase:\d+\.\d+\.\d+", tag)
    assert f"image: ${{SHDB_HBASE_IMAGE:-{tag}}}" in compose


def _healthcheck(port: int, marker: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SHDB_HBASE_THRIFT_PORT": str(port),
        "SHDB_HBASE_BIND": "127.0.0.1",
        "SHDB_HBASE_INIT_MARKER": str(marker),
    }
    return subprocess.run(
        [str(DOCKER / "healthcheck")], capture_output=True, text=True, env=env, timeout=60
    )


def _free_port_pair() -> int:
    """A port P with P and P+1 both closed (nothing listens there)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port + 1)) != 0:
                return port
    raise AssertionError("no free port pair found")


@pytest.mark.hbase
def test_healthcheck_passes_only_when_both_gateways_answer(tmp_path: Path) -> None:
    port = int(hbase_address().rsplit(":", 1)[1])
    marker = tmp_path / "initialised"
    result = _healthcheck(port, marker)
    assert result.returncode == 1 and "not initialised" in result.stdout
    marker.touch()
    result = _healthcheck(port, marker)
    assert result.returncode == 0, result.stdout + result.stderr
    closed = _healthcheck(_free_port_pair(), marker)
    assert closed.returncode == 1 and "thrift1" in closed.stdout


def test_healthcheck_fails_on_an_open_port_that_is_not_thrift(tmp_path: Path) -> None:
    """A listening socket is not enough: the check needs a Thrift reply."""
    marker = tmp_path / "initialised"
    marker.touch()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = int(server.getsockname()[1])
        stop = threading.Event()

        def answer_garbage() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.recv(256)
                    conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n" + bytes(64))

        thread = threading.Thread(target=answer_garbage)
        thread.start()
        try:
            result = _healthcheck(port, marker)
        finally:
            stop.set()
            thread.join()
    assert result.returncode == 1 and "thrift1" in result.stdout
