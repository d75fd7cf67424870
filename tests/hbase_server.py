"""The HBase the test suites run against, chosen by ``SHDB_TEST_HBASE``.

- ``container``: the project's image (``docker/build``), started once per test
  session through testcontainers with host networking, Thrift1 on
  ``$SHDB_HBASE_THRIFT_PORT`` (9090) and Thrift2 on the next port, ZooKeeper on
  ``$SHDB_HBASE_ZK_PORT`` (2181), data in a fresh named volume. It is removed,
  volume included, at the end of the session (Ryuk, testcontainers' reaper, is
  off: its image cannot be pulled where no registry is reachable).
- ``host:port``: an HBase already running there (e.g. ``scripts/hbase start``).

Gateway tests start more Thrift gateways beside it, set their own way
(:meth:`HBaseServer.gateway`: ``scripts/hbase gateway``, or the image's
``entrypoint gateway`` through docker exec).

Fault tests kill and restart it through :class:`HBaseServer`: for the container,
``docker kill`` and a new container on the same data volume; for an external
HBase, ``scripts/hbase kill`` and ``scripts/hbase start`` (with the caller's
``SHDB_HBASE_*`` settings).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

    from docker import DockerClient

ROOT = Path(__file__).resolve().parents[1]
CONTAINER = "container"
READY_LINE = r"shdb-hbase: ready: "
LOG_TAIL_LINES = 200


class HBaseUnavailable(RuntimeError):
    """The chosen HBase could not be started or reached; the message says why."""


class HBaseServer(ABC):
    """An HBase reachable at ``address`` (Thrift1; Thrift2 is at port+1)."""

    address: str

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the whole HBase (what a crashed machine does)."""

    @abstractmethod
    def restart(self) -> None:
        """Start it again on the same data after :meth:`kill` and wait until usable."""

    def diagnostics(self) -> str:
        """Logs worth showing when tests failed (empty when there is nothing)."""
        return ""

    def shared_dir(self, tmp_path: Path) -> Path:
        """A folder that this machine and the HBase servers both see at the same path
        (where a bulk load stages its HFiles: HDFS on a cluster)."""
        return tmp_path

    @abstractmethod
    def gateway(self, *args: str) -> None:
        """``hbase.d/gateway`` beside this HBase: ``start NAME PORT API [KEY=VALUE...]``
        (returns once it listens), ``stop NAME`` or ``kill NAME``."""

    @abstractmethod
    def close(self) -> None:
        """Release what this object started."""


class ExternalHBase(HBaseServer):
    """An HBase someone else started, normally with ``scripts/hbase``."""

    def __init__(self, address: str) -> None:
        self.address = address

    def kill(self) -> None:
        self._check_it_is_scripts_hbase()
        subprocess.run([str(ROOT / "scripts" / "hbase"), "kill"], check=True)

    def _check_it_is_scripts_hbase(self) -> None:
        """``scripts/hbase kill/start`` act on the instance its environment names; an
        external HBase at another port is someone else's, never to be killed (nor a
        second one started beside it)."""
        port = self.address.rpartition(":")[2]
        ours = os.environ.get("SHDB_HBASE_THRIFT_PORT", "9090")
        if port != ours:
            raise HBaseUnavailable(
                f"this test kills and restarts HBase, but SHDB_TEST_HBASE={self.address} is "
                f"not the scripts/hbase instance of this environment (Thrift port {ours}): "
                "set SHDB_HBASE_HOME and SHDB_HBASE_THRIFT_PORT to that instance's, "
                "or use SHDB_TEST_HBASE=container"
            )

    def restart(self) -> None:
        subprocess.run([str(ROOT / "scripts" / "hbase"), "start"], check=True)

    def gateway(self, *args: str) -> None:
        self._check_it_is_scripts_hbase()
        result = subprocess.run(
            [str(ROOT / "scripts" / "hbase"), "gateway", *args], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise HBaseUnavailable(f"scripts/hbase gateway {' '.join(args)}: {result.stderr}")

    def close(self) -> None:
        """Nothing to release: whoever started this HBase stops it."""


def _env_port(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    if not value.isdigit():
        raise HBaseUnavailable(f"{name} must be a port number, not {value!r}")
    return int(value)


def docker_client() -> DockerClient:
    """The Docker engine's client (testcontainers' reaper off: its image cannot be pulled
    where no registry is reachable)."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise HBaseUnavailable(
            f"the tests run HBase from the project's image, but no Docker engine answers "
            f"({exc}); start dockerd (scripts/test does) or use SHDB_TEST_HBASE=host"
        ) from exc
    return client


def build_image() -> str:
    """The project's image (docker/build), built if anything it is made of changed
    (seconds when not): its tag."""
    build = ROOT / "docker" / "build"
    result = subprocess.run([str(build)], capture_output=True, text=True)
    if result.returncode != 0:
        raise HBaseUnavailable(f"docker/build failed:\n{result.stderr[-4000:]}")
    tag = subprocess.run([str(build), "--print-tag"], capture_output=True, text=True, check=True)
    return tag.stdout.strip()


def probe(thrift_port: int, timeout_s: float) -> None:
    """Retry the readiness probe of scripts/hbase until it passes: a table can be
    created, written and read through Thrift1 (``thrift_port``), read through Thrift2
    (the next port), and dropped."""
    command = [sys.executable, str(ROOT / "scripts" / "hbase.d" / "probe.py")]
    command += ["--host", "127.0.0.1", "--port", str(thrift_port)]
    command += ["--thrift2-port", str(thrift_port + 1)]
    deadline = time.monotonic() + timeout_s
    while True:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise HBaseUnavailable(f"probe failed: {result.stderr.strip()}")
        time.sleep(2)


class ContainerHBase(HBaseServer):
    """The project's image, run by testcontainers with host networking."""

    def __init__(self) -> None:
        self.thrift_port = _env_port("SHDB_HBASE_THRIFT_PORT", 9090)
        self.zk_port = _env_port("SHDB_HBASE_ZK_PORT", 2181)
        self.address = f"127.0.0.1:{self.thrift_port}"
        self.timeout_s = _env_port("SHDB_HBASE_WAIT_TIMEOUT", 300)
        self._client = docker_client()
        self.image = build_image()
        run_id = uuid.uuid4().hex[:8]
        self.volume = self._client.volumes.create(f"shdb-test-hbase-{run_id}").name
        # Mounted at its own path: the container's region server reads bulk loads there.
        self.shared = Path(tempfile.mkdtemp(prefix=f"shdb-test-shared-{run_id}-"))
        self.shared.chmod(0o755)  # the image's hbase user (uid 10001) walks into it
        self.name = f"shdb-test-hbase-{run_id}"
        self._container: DockerContainer | None = None
        self._logs = ""  # earlier containers' logs (before a restart)
        self._start()

    def _start(self) -> None:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        container = (
            DockerContainer(self.image, name=self.name, network_mode="host")
            .with_env("SHDB_HBASE_THRIFT_PORT", str(self.thrift_port))
            .with_env("SHDB_HBASE_ZK_PORT", str(self.zk_port))
            .with_env("SHDB_HBASE_WAIT_TIMEOUT", str(self.timeout_s))
            .with_volume_mapping(self.volume, "/data", "rw")
            .with_volume_mapping(str(self.shared), str(self.shared), "rw")
            .waiting_for(
                LogMessageWaitStrategy(READY_LINE).with_startup_timeout(self.timeout_s + 30)
            )
        )
        self._container = container
        try:
            container.start()
            probe(self.thrift_port, self.timeout_s)
        except (TimeoutError, RuntimeError, HBaseUnavailable) as exc:
            logs = self._container_logs()
            self._remove()
            raise HBaseUnavailable(
                f"HBase container {self.image} did not become usable: {exc}\n{logs}"
            ) from exc

    def _container_logs(self) -> str:
        if self._container is None:
            return ""
        from docker.errors import DockerException

        try:
            out, err = self._container.get_logs()
        except DockerException as exc:  # gone already: logs are best effort
            return f"(no container logs: {exc})"
        text = (out + err).decode(errors="replace")
        return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])

    def _remove(self) -> None:
        if self._container is not None:
            # Removes the container only: the named volume is ours to keep or drop.
            self._container.get_wrapped_container().remove(force=True)
            self._container = None

    def kill(self) -> None:
        assert self._container is not None
        self._container.get_wrapped_container().kill()  # docker kill: SIGKILL to every JVM
        self._logs += f"----- {self.name} (killed) -----\n{self._container_logs()}\n"
        self._remove()

    def restart(self) -> None:
        self._start()

    def gateway(self, *args: str) -> None:
        assert self._container is not None
        result = self._container.exec(["/opt/shdb/entrypoint", "gateway", *args])
        if result.exit_code != 0:
            raise HBaseUnavailable(f"entrypoint gateway {' '.join(args)}: {result.output.decode()}")

    def diagnostics(self) -> str:
        current = self._container_logs()
        if current:
            current = f"----- {self.name} -----\n{current}\n"
        tail = ""
        if self._container is not None:
            result = self._container.exec(["tail", "-n", "80", "/data/logs/master.log"])
            tail = f"----- /data/logs/master.log (tail) -----\n{result.output.decode()}"
        return self._logs + current + tail

    def shared_dir(self, tmp_path: Path) -> Path:
        folder = self.shared / tmp_path.name
        folder.mkdir(exist_ok=True)
        return folder

    def close(self) -> None:
        self._remove()
        self._client.volumes.get(self.volume).remove(force=True)
        self._client.close()
        shutil.rmtree(self.shared, ignore_errors=True)


def open_server(spec: str) -> HBaseServer:
    """The HBase named by a ``SHDB_TEST_HBASE`` value."""
    if spec == CONTAINER:
        return ContainerHBase()
    host, sep, port = spec.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise HBaseUnavailable(f"SHDB_TEST_HBASE must be 'container' or host:port, not {spec!r}")
    return ExternalHBase(spec)
