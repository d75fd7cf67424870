"""The multi-server HBase of the ``cluster`` tests: ZooKeeper, an HMaster, three region
servers and both Thrift gateways, each its own JVM on this machine, with the settings of
``scripts/hbase cluster`` (hbase.d/cluster.sh, hbase.d/hbase-cluster-site.xml.in: ports
3181, 17100-17145, 9790/9791). ``SHDB_TEST_CLUSTER`` says whose it is:

- ``start``: started fresh for the session and removed at its end (``scripts/test`` sets
  this). Where the suite runs HBase from the project's image (``SHDB_TEST_HBASE`` unset
  or ``container``), each JVM is a container of the image's cluster mode, started by
  testcontainers (:class:`ContainerCluster`); with ``SHDB_TEST_HBASE=host`` (or an
  address) they are JVMs of ``scripts/hbase cluster start --fresh`` (:class:`HostCluster`);
- ``running``: one already running (``scripts/hbase cluster start``), left running.

Region servers are killed (SIGKILL) and started by number, and regions listed, moved and
split through the Admin API (``scripts/hbase cluster admin``, hbase.d/ClusterAdmin.java,
on this machine's JDK against the cluster's conf in its shared dir).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .compose import compose_services
from .hbase_server import CONTAINER, HBaseUnavailable, build_image, docker_client, probe

if TYPE_CHECKING:
    from docker.models.containers import Container
    from testcontainers.core.container import DockerContainer

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "hbase"
MODES = ("start", "running")
LOG_TAIL_LINES = 80
#: The image's hbase user, who writes the shared dir from every container.
IMAGE_UID = 10001
#: Every container of a session carries this label (scripts/test removes what is left).
LABEL = "shdb.test.cluster"
#: The environment of scripts/hbase cluster each container gets from this one: every
#: SHDB_HBASE_CLUSTER_* (ports, servers, JVM flags) and these.
PREFIX = "SHDB_HBASE_CLUSTER_"
SETTINGS = frozenset(
    f"SHDB_HBASE_{name}"
    for name in ("RS_HEAP", "MASTER_HEAP", "THRIFT_HEAP", "THRIFT_READ_TIMEOUT_MS")
)


class ClusterUnavailable(RuntimeError):
    """The cluster could not be started or reached; the message says why."""


@dataclass(frozen=True)
class Region:
    """One region of a table: its encoded name, key range ([start, end), b"" = open) and
    region server (its RPC port names it: region server n listens on 17110 + 10 n)."""

    name: str
    start: bytes
    end: bytes
    server: str  # host,port,startcode

    def holds(self, key: bytes) -> bool:
        return self.start <= key and (not self.end or key < self.end)

    @property
    def port(self) -> int:
        return int(self.server.split(",")[1])


def _key(text: str) -> bytes:
    return b"" if text == "-" else bytes.fromhex(text)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    if not value.isdigit():
        raise ClusterUnavailable(f"{name} must be a number, not {value!r}")
    return int(value)


class ClusterHBase(ABC):
    """The session's cluster: what the tests ask of it, whoever launched it."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder  # conf/, logs/ and data/, as scripts/hbase cluster lays them out
        self.thrift_port = _env_int("SHDB_HBASE_CLUSTER_THRIFT_PORT", 9790)
        self.zk_port = _env_int("SHDB_HBASE_CLUSTER_ZK_PORT", 3181)
        self.base_port = _env_int("SHDB_HBASE_CLUSTER_BASE_PORT", 17100)
        self.servers = _env_int("SHDB_HBASE_CLUSTER_SERVERS", 3)

    def _script(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SHDB_HBASE_CLUSTER_DIR": str(self.dir)}
        result = subprocess.run(
            [str(SCRIPT), "cluster", *args], capture_output=True, text=True, cwd=ROOT, env=env
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"scripts/hbase cluster {' '.join(args)} failed:\n{result.stderr[-4000:]}"
            )
        return result

    def url(self, prefix: str, *, api: str = "thrift2", **params: object) -> str:
        """The index URL of ``prefix`` on the cluster's Thrift2 (or Thrift1) gateway."""
        port = self.thrift_port + (api == "thrift2")
        query = "".join(f"&{k}={v}" for k, v in params.items())
        return f"hbase://127.0.0.1:{port}?prefix={prefix}{query}"

    def rs_port(self, n: int) -> int:
        return self.base_port + 10 + 10 * n

    def rs_number(self, region: Region) -> int:
        return (region.port - self.base_port - 10) // 10

    @abstractmethod
    def kill_rs(self, n: int) -> None:
        """SIGKILL region server ``n`` (what a crashed machine does)."""

    @abstractmethod
    def start_rs(self, n: int) -> None:
        """Start region server ``n`` again; returns once it serves (holding no region
        until the balancer or a move gives it some)."""

    @abstractmethod
    def down(self) -> list[int]:
        """The region servers not running."""

    @abstractmethod
    def close(self) -> None:
        """Release what this object started."""

    def admin(self, *args: str) -> list[Region]:
        """Run an admin command (regions, move, split, balance); the regions it lists."""
        out = self._script("admin", *args).stdout
        regions = []
        for line in out.splitlines():
            if line.startswith("REGION "):
                _, name, start, end, server = line.split()
                regions.append(Region(name, _key(start), _key(end), server))
        return regions

    def regions(self, table: str) -> list[Region]:
        return self.admin("regions", table)

    def rs_log(self, n: int) -> Path:
        return self.dir / "logs" / f"cluster-rs{n}.log"

    def observer_calls(self) -> dict[int, int]:
        """Multi-row gets the observer answered so far, per region server (it logs each
        at DEBUG in the cluster's log configuration)."""
        calls = {}
        for n in range(1, self.servers + 1):
            path = self.rs_log(n)
            text = path.read_text(errors="replace") if path.exists() else ""
            calls[n] = text.count("shdb.rows get of ")
        return calls

    def restore(self) -> None:
        """Every region server running, regions spread over them (after a kill)."""
        down = self.down()
        for n in down:
            self.start_rs(n)
        if down:
            self.admin("balance")

    def diagnostics(self) -> str:
        parts = []
        names = ("cluster-master.log", *(f"cluster-rs{n}.log" for n in range(1, self.servers + 1)))
        for name in names:
            path = self.dir / "logs" / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                parts.append(f"----- {path} (tail) -----\n" + "\n".join(tail))
        return "\n".join(parts)


class HostCluster(ClusterHBase):
    """JVMs on this machine: ``scripts/hbase cluster`` (its settings: ``SHDB_HBASE_HOME``,
    ``SHDB_HBASE_CLUSTER_DIR``, ...)."""

    def __init__(self, mode: str) -> None:
        home = Path(os.environ.get("SHDB_HBASE_HOME", Path.home() / ".cache" / "shdb-hbase"))
        super().__init__(Path(os.environ.get("SHDB_HBASE_CLUSTER_DIR", home / "cluster")))
        self.mode = mode
        if mode == "start":
            result = self._script("start", "--fresh", check=False)
            if result.returncode != 0:
                raise ClusterUnavailable(
                    f"scripts/hbase cluster start failed:\n{result.stderr[-6000:]}"
                )
        elif self._script("status", check=False).returncode != 0:
            raise ClusterUnavailable(
                "SHDB_TEST_CLUSTER=running, but scripts/hbase cluster status says it is not: "
                "start it with scripts/hbase cluster start"
            )

    def kill_rs(self, n: int) -> None:
        self._script("kill-rs", str(n))

    def start_rs(self, n: int) -> None:
        self._script("start-rs", str(n))

    def down(self) -> list[int]:
        status = self._script("status", check=False).stdout
        return [n for n in range(1, self.servers + 1) if f"rs{n}=down" in status]

    def close(self) -> None:
        if self.mode == "start":  # its data is of no more use: no flush, a kill
            self._script("kill", check=False)
        else:  # someone else's: left as found
            self.restore()


class ContainerCluster(ClusterHBase):
    """The project's image in its cluster mode (``docker/entrypoint cluster ROLE``: one
    JVM per container, ``scripts/hbase cluster run``), started by testcontainers with host
    networking; every container mounts one fresh folder of this machine at its own path
    (the cluster dir: conf, logs, the shared rootdir), so its logs are read here and the
    admin commands run here against its conf."""

    def __init__(self) -> None:
        self.timeout_s = _env_int("SHDB_HBASE_WAIT_TIMEOUT", 180)
        super().__init__(Path(tempfile.mkdtemp(prefix="shdb-cluster-")))
        self.run_id = uuid.uuid4().hex[:8]
        self.containers: dict[str, DockerContainer] = {}
        self._gone_logs = ""  # stdout of the containers killed so far
        try:
            self._client = docker_client()
            self.image = build_image()
        except HBaseUnavailable as exc:
            raise ClusterUnavailable(str(exc)) from exc
        # The image's hbase user writes the shared dir; this (root) process reads it.
        if os.geteuid() == 0:
            os.chown(self.dir, IMAGE_UID, IMAGE_UID)
        else:
            self.dir.chmod(0o777)
        # the services of docker/cluster-compose.yml, with this cluster dir and image
        self.services = compose_services(
            "cluster-compose.yml",
            {"SHDB_HBASE_CLUSTER_DIR": str(self.dir), "SHDB_HBASE_IMAGE": self.image},
        )
        missing = {f"rs{n}" for n in range(1, self.servers + 1)} - set(self.services)
        if missing:
            raise ClusterUnavailable(f"docker/cluster-compose.yml has no {sorted(missing)}")
        # the cluster's settings (hbase.d/cluster.sh) in this environment go to each
        self.settings = {k: v for k, v in os.environ.items() if k in SETTINGS}
        self.settings |= {k: v for k, v in os.environ.items() if k.startswith(PREFIX)}
        self.settings.pop("SHDB_HBASE_CLUSTER_DIR", None)  # this one's, from compose
        try:
            self._start()
        except BaseException as exc:  # nothing left running, whatever stopped the start
            diagnostics = self.diagnostics()
            self.close()
            if isinstance(exc, ClusterUnavailable):
                raise ClusterUnavailable(f"{exc}\n{diagnostics}") from exc
            raise

    def _start(self) -> None:
        """What ``scripts/hbase cluster start`` does, a container per JVM: ZooKeeper
        first, then the master, the region servers and the gateways at once, ready when
        every region server serves and the probe passes through both gateways."""
        ports = [self.zk_port, self.thrift_port, self.thrift_port + 1, self.base_port]
        ports += [self.rs_port(n) for n in range(1, self.servers + 1)]
        busy = [p for p in ports if _listening(p)]
        if busy:
            raise ClusterUnavailable(f"ports {busy} of the cluster are in use on this machine")
        t0 = time.monotonic()
        self._run("zookeeper")
        self._wait("ZooKeeper", lambda: _listening(self.zk_port), ["zookeeper"], 60)
        self._run("master")
        for n in range(1, self.servers + 1):
            self._run(f"rs{n}")
        self._run("thrift")
        self._run("thrift2")
        for n in range(1, self.servers + 1):
            self._wait_rs(n, None)
        try:
            probe(self.thrift_port, self.timeout_s)
        except HBaseUnavailable as exc:
            raise ClusterUnavailable(f"the cluster's gateways do not answer: {exc}") from exc
        print(f"cluster of containers ready after {time.monotonic() - t0:.0f} s")

    def _run(self, name: str) -> None:
        """Start a container as cluster-compose.yml's service ``name`` (no wait)."""
        from docker.errors import DockerException
        from testcontainers.core.container import DockerContainer

        service = self.services[name]
        container = DockerContainer(
            service["image"],
            name=f"shdb-cluster-{self.run_id}-{name}",
            network_mode=service["network_mode"],
            labels={LABEL: self.run_id},
            healthcheck={"test": ["NONE"]},  # the tests wait their own way; spare the cores
        )
        container.with_command(service["command"])
        for volume in service["volumes"]:
            host, _, inside = volume.partition(":")
            container.with_volume_mapping(host, inside, "rw")
        for key, value in {**service["environment"], **self.settings}.items():
            container.with_env(key, str(value))
        try:
            container.start()
        except DockerException as exc:
            raise ClusterUnavailable(f"container {name} did not start: {exc}") from exc
        self.containers[name] = container

    def _running(self, name: str) -> bool:
        container = self.containers.get(name)
        if container is None:
            return False
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        return bool(wrapped.status == "running")

    def _wait(self, what: str, ready: Callable[[], bool], names: list[str], secs: float) -> None:
        deadline = time.monotonic() + secs
        while not ready():
            for name in names:
                if not self._running(name):
                    raise ClusterUnavailable(f"{what}: container {name} exited")
            if time.monotonic() > deadline:
                raise ClusterUnavailable(f"{what}: not ready within {secs:.0f} s")
            time.sleep(0.5)

    def _wait_rs(self, n: int, old: int | None) -> None:
        """Until region server ``n`` told the master it serves (its log, a new one if the
        inode of the old was ``old``, says "Serving as")."""
        log = self.rs_log(n)

        def serving() -> bool:
            try:
                if log.stat().st_ino == old:
                    return False
                return "Serving as " in log.read_text(errors="replace")
            except FileNotFoundError:
                return False

        self._wait(f"region server {n}", serving, [f"rs{n}", "master"], self.timeout_s)

    def kill_rs(self, n: int) -> None:
        """``docker kill --signal KILL``: the JVM is the container's process 1."""
        container = self.containers.pop(f"rs{n}")
        wrapped = container.get_wrapped_container()
        wrapped.kill(signal="SIGKILL")
        self._gone_logs += _tail(wrapped, f"rs{n} (killed)")
        wrapped.remove(force=True)

    def start_rs(self, n: int) -> None:
        """A new container for region server ``n`` (in place of one that exited: a region
        server starved out of its ZooKeeper session while starting aborts)."""
        exited = self.containers.pop(f"rs{n}", None)
        if exited is not None:
            wrapped = exited.get_wrapped_container()
            self._gone_logs += _tail(wrapped, f"rs{n} (exited)")
            wrapped.remove(force=True)
        log = self.rs_log(n)
        old = log.stat().st_ino if log.exists() else None
        self._run(f"rs{n}")
        self._wait_rs(n, old)

    def down(self) -> list[int]:
        return [n for n in range(1, self.servers + 1) if not self._running(f"rs{n}")]

    def diagnostics(self) -> str:
        exited = [
            _tail(c.get_wrapped_container(), name)
            for name, c in self.containers.items()
            if not self._running(name)
        ]
        return self._gone_logs + "".join(exited) + super().diagnostics()

    def close(self) -> None:
        """Every container removed (SIGKILL: the data is of no more use), and the dir."""
        from docker.errors import DockerException

        for container in self.containers.values():
            with contextlib.suppress(DockerException):  # gone already
                container.get_wrapped_container().remove(force=True)
        self.containers.clear()
        self._client.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tail(wrapped: Container, name: str) -> str:
    from docker.errors import DockerException

    try:
        text = wrapped.logs().decode(errors="replace")
    except DockerException as exc:
        return f"----- container {name}: no logs ({exc}) -----\n"
    tail = "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
    return f"----- container {name} (stdout, tail) -----\n{tail}\n"


def open_cluster(mode: str) -> ClusterHBase:
    """The cluster of ``SHDB_TEST_CLUSTER`` = ``mode``: from the image where the suite
    runs HBase from it (``SHDB_TEST_HBASE`` unset or ``container``), else host JVMs."""
    if mode not in MODES:
        raise ClusterUnavailable(f"SHDB_TEST_CLUSTER must be one of {MODES}, not {mode!r}")
    if mode == "start" and os.environ.get("SHDB_TEST_HBASE", CONTAINER) == CONTAINER:
        return ContainerCluster()
    return HostCluster(mode)
