"""The shdb-serve image (docker/build-serve), run as docker-compose.yml's ``serve``
service runs it, serves the session's HBase: health, readiness and check-and-add
from the host, and a SIGTERM that drains. Host networking (no bridge here), on a
free loopback port.

Runs where a Docker engine answers: always in CI's container pass
(``SHDB_TEST_HBASE=container``, where scripts/test has built the image, so the
build here finds it up to date); elsewhere it is skipped without an engine.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .compose import compose_services
from .conftest import _drop_tables, hbase_address
from .hbase_server import CONTAINER

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "docker" / "build-serve"
TEXT = "今天北京天气晴朗，气温适宜，许多市民走出家门，到公园散步游玩。" * 4
READY_S = 120


def _engine() -> object:
    """A Docker client, or skip (fail in the container pass, which needs one)."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        if os.environ.get("SHDB_TEST_HBASE") == CONTAINER:
            pytest.fail(f"the container pass needs a Docker engine: {exc}")
        pytest.skip(f"no Docker engine answers ({exc})")
    return client


@pytest.fixture(scope="module")
def image() -> str:
    _engine()
    built = subprocess.run([str(BUILD)], capture_output=True, text=True)
    assert built.returncode == 0, f"docker/build-serve failed:\n{built.stderr[-4000:]}"
    return subprocess.run(
        [str(BUILD), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(image: str) -> Iterator[tuple[str, object]]:
    """The image serving a fresh HBase index as compose's ``serve`` service runs it
    (its image, network mode and environment): (base URL, the container)."""
    from testcontainers.core.container import DockerContainer

    port, prefix = _free_port(), "t" + uuid.uuid4().hex[:12]
    thrift_port = hbase_address().rsplit(":", 1)[1]
    service = compose_services(
        "docker-compose.yml",
        {
            "SHDB_HBASE_THRIFT_PORT": thrift_port,
            "SHDB_PREFIX": prefix,
            "SHDB_SERVE_PORT": str(port),
        },
    )["serve"]
    assert service["image"] == image and service["network_mode"] == "host"
    container = DockerContainer(image, name=f"shdb-test-serve-{prefix}", network_mode="host")
    for key, value in service["environment"].items():
        container.with_env(key, str(value))
    container.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, container)
        yield url, container
    finally:
        container.get_wrapped_container().remove(force=True)
        _drop_tables(hbase_address(), prefix)


def _wait_ready(url: str, container: object) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        wrapped = container.get_wrapped_container()  # type: ignore[attr-defined]
        wrapped.reload()
        if wrapped.status == "exited":
            break
        time.sleep(0.5)
    out, err = container.get_logs()  # type: ignore[attr-defined]
    pytest.fail(f"shdb-serve did not get ready:\n{(out + err).decode(errors='replace')[-4000:]}")


@pytest.mark.hbase
def test_the_image_serves_an_hbase_index_and_drains_on_sigterm(
    served: tuple[str, object],
) -> None:
    url, container = served
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    first = httpx.post(f"{url}/v1/check-and-add", json={"id": "a", "text": TEXT}).json()
    second = httpx.post(f"{url}/v1/check-and-add", json={"id": "b", "text": TEXT}).json()
    assert (first["new"], second["new"]) == (True, False)
    assert [m["id"] for m in second["matches"]] == ["a"]
    assert httpx.get(f"{url}/v1/docs/a").json()["fingerprint"] == first["fingerprint"]
    assert "shdb_requests" in httpx.get(f"{url}/metrics").text
    wrapped = container.get_wrapped_container()  # type: ignore[attr-defined]
    wrapped.stop(timeout=45)  # SIGTERM, as docker stop and compose send
    assert wrapped.wait(timeout=60)["StatusCode"] == 0
    logs = wrapped.logs().decode(errors="replace")
    assert "the queue is drained and committed" in logs, logs[-2000:]


def test_compose_serves_the_tag_docker_build_serve_makes() -> None:
    tag = subprocess.run(
        [str(BUILD), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(r"shdb-serve:\d+\.\d+\.\d+", tag)
    assert compose_services("docker-compose.yml", {})["serve"]["image"] == tag
