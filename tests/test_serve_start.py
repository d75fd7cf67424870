"""`shdb serve` on a first day (issue 43, item 14): a port in use is said before
anything starts, naming the port and what to do, with the README's exit code for an
error (2); and the curl examples of the README and docs/serve.md work when pasted as
they are, against a live service."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app

from .serve_server import live_server

ROOT = Path(__file__).resolve().parent.parent
SHOWN = "localhost:8080"  # where the pages send their curl examples
BASH = re.compile(r"```bash\n(.*?)\n```", re.S)


def held_port(listening: bool) -> socket.socket:
    """A port taken by another program: listening on it, or only bound."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if listening:
        sock.listen()
    return sock


@pytest.mark.parametrize("listening", [True, False], ids=["listening", "bound"])
@pytest.mark.parametrize("create", [True, False], ids=["create", "existing"])
def test_a_port_in_use_is_an_error_naming_it_before_the_index_is_touched(
    tmp_path: Path, listening: bool, create: bool
) -> None:
    index = tmp_path / "idx"
    if not create:
        runner = CliRunner()
        ingest = ["ingest", str(ROOT / "examples/corpus"), "-i", str(index)]
        assert runner.invoke(app, ingest).exit_code == 0
    before = sorted(p.name for p in index.iterdir()) if index.exists() else None
    with held_port(listening) as other:
        port = other.getsockname()[1]
        args = ["serve", "--index", str(index), "--port", str(port)]
        result = CliRunner().invoke(app, args + (["--create"] if create else []))
    assert result.exit_code == 2, result.output
    assert f"cannot listen on 127.0.0.1:{port}: port {port} is in use" in result.stderr
    assert "give another --port (--port 0 picks a free one)" in result.stderr
    assert "startup complete" not in result.output and "Traceback" not in result.output
    assert "created a new, empty index" not in result.stderr  # nothing made for nothing
    after = sorted(p.name for p in index.iterdir()) if index.exists() else None
    assert after == before


def test_a_host_that_is_not_this_machines_is_an_error_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["serve", "--index", str(tmp_path / "i"), "--create", "--host", "192.0.2.1",
              "--token-file", str(_token(tmp_path)), "--port", "0"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "cannot listen on 192.0.2.1:0" in result.stderr and "--host" in result.stderr
    assert not (tmp_path / "i").exists()


def test_port_0_says_the_port_it_chose(tmp_path: Path) -> None:
    """`--port 0` (the hint of a port in use) picks a free port: stderr names it, and
    it is the port that answers (uvicorn says nothing for a socket it did not bind)."""
    cmd = [sys.executable, "-m", "simhash_hbase", "serve", "-i", str(tmp_path / "i"), "--create"]
    proc = subprocess.Popen([*cmd, "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        said = next(line for line in proc.stderr if "listening on" in line or "complete" in line)
        port = re.search(r"listening on http://127\.0\.0\.1:(\d+)", said)
        assert port is not None and port[1] != "0", said
        assert httpx.get(f"http://127.0.0.1:{port[1]}/healthz", timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(60)


def _token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("a-token-of-twenty-chars\n")
    return path


# -- the pages' curl examples -----------------------------------------------------
def curl_examples() -> Iterator[tuple[str, list[str]]]:
    """(page, lines) of each bash block of the README and serve.md that calls the
    service on this machine, without the line that starts it (the test's does)."""
    for page in ("README.md", "docs/serve.md"):
        for block in BASH.findall((ROOT / page).read_text("utf-8")):
            if SHOWN in block:
                lines = [line for line in block.splitlines() if line.strip()]
                yield page, [line for line in lines if not line.startswith("shdb serve")]


def answers(output: str) -> list[Any]:
    """The JSON values curl printed (one or several, NDJSON too)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(output, at)
        values.append(value)
    return values


def errors(value: Any) -> list[Any]:
    """Every error object in an answer: the request's, or an item's in its slot."""
    if isinstance(value, list):
        return [e for item in value for e in errors(item)]
    return [value["error"]] if isinstance(value, dict) and "error" in value else []


def test_the_pages_show_curl_examples() -> None:
    pages = [page for page, _ in curl_examples()]
    assert pages == ["README.md", "docs/serve.md"]


@pytest.mark.parametrize(("page", "lines"), list(curl_examples()), ids=lambda v: str(v)[:14])
def test_every_curl_example_works_pasted_as_it_is(
    tmp_path: Path, page: str, lines: list[str]
) -> None:
    """Each line in order; a ``# {...}`` line after one claims what it answers (a
    value shown as "…" stands for any)."""
    with live_server(str(tmp_path / "idx"), tmp_path / "serve.log") as server:
        got: list[Any] = []
        for line in lines:
            if line.startswith("# {"):
                claimed = json.loads(line.removeprefix("# "))
                shown = {k: v for k, v in claimed.items() if v != "…"}
                assert {k: got[0].get(k) for k in shown} == shown, f"{page}: {line}"
                assert claimed.keys() <= got[0].keys(), f"{page}: {line}"
                continue
            command = line.replace(SHOWN, server.url.removeprefix("http://"))
            done = subprocess.run(
                ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"{page}: {line}\n{done.stderr}"
            if not line.startswith("curl"):
                continue
            got = answers(done.stdout)
            assert got, f"{page}: {line} answered nothing"
            assert not [e for v in got for e in errors(v)], f"{page}: {line}\n{done.stdout}"
