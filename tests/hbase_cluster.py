"""The multi-server HBase of the ``cluster`` tests: ``scripts/hbase cluster`` (ZooKeeper,
an HMaster, three region servers and both Thrift gateways, each its own JVM on this
machine), chosen by ``SHDB_TEST_CLUSTER``:

- ``start``: started fresh for the session (``scripts/hbase cluster start --fresh``) and
  stopped at its end (``scripts/test`` sets this);
- ``running``: one already running (``scripts/hbase cluster start``), left running.

Its settings are scripts/hbase's (``SHDB_HBASE_HOME``, ``SHDB_HBASE_CLUSTER_DIR``,
``SHDB_HBASE_CLUSTER_THRIFT_PORT``; hbase.d/cluster.sh). Region servers are killed
(SIGKILL) and started by number, and regions listed, moved and split through the Admin
API (``scripts/hbase cluster admin``, hbase.d/ClusterAdmin.java).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "hbase"
MODES = ("start", "running")
LOG_TAIL_LINES = 80


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


class ClusterHBase:
    """The session's cluster."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ClusterUnavailable(f"SHDB_TEST_CLUSTER must be one of {MODES}, not {mode!r}")
        self.mode = mode
        home = Path(os.environ.get("SHDB_HBASE_HOME", Path.home() / ".cache" / "shdb-hbase"))
        self.dir = Path(os.environ.get("SHDB_HBASE_CLUSTER_DIR", home / "cluster"))
        self.thrift_port = int(os.environ.get("SHDB_HBASE_CLUSTER_THRIFT_PORT", "9790"))
        self.base_port = int(os.environ.get("SHDB_HBASE_CLUSTER_BASE_PORT", "17100"))
        self.servers = int(os.environ.get("SHDB_HBASE_CLUSTER_SERVERS", "3"))
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

    def _script(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(SCRIPT), "cluster", *args], capture_output=True, text=True, cwd=ROOT
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

    def kill_rs(self, n: int) -> None:
        """SIGKILL region server ``n`` (what a crashed machine does)."""
        self._script("kill-rs", str(n))

    def start_rs(self, n: int) -> None:
        """Start region server ``n`` again; returns once it serves (holding no region
        until the balancer or a move gives it some)."""
        self._script("start-rs", str(n))

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
        status = self._script("status", check=False).stdout
        down = [n for n in range(1, self.servers + 1) if f"rs{n}=down" in status]
        for n in down:
            self.start_rs(n)
        if down:
            self.admin("balance")

    def diagnostics(self) -> str:
        parts = []
        for name in ("cluster-master.log", *(f"cluster-rs{n}.log" for n in (1, 2, 3))):
            path = self.dir / "logs" / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                parts.append(f"----- {path} (tail) -----\n" + "\n".join(tail))
        return "\n".join(parts)

    def close(self) -> None:
        if self.mode == "start":  # its data is of no more use: no flush, a kill
            self._script("kill", check=False)
        else:  # someone else's: left as found
            self.restore()
