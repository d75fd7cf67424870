"""The bench's own standalone HBase, on ports of its own.

The test suite uses the default instance (Thrift 9090, ZooKeeper 2181,
~/.cache/shdb-hbase) and may run at the same time, so the bench starts a separate
one through scripts/hbase with other ports (``SHDB_BENCH_HBASE_PORT``,
``SHDB_BENCH_ZK_PORT``) and another home (``SHDB_BENCH_HBASE_HOME``), and always
stops it.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import Any

from .common import CACHE_DIR, ROOT, log


@functools.cache
def thrift2_types() -> Any:
    """The store's Thrift2 IDL (package data), loaded under the bench's own module name
    for the structs (TGet, TPut) of the raw baseline calls."""
    import thriftpy2

    idl = resources.files("simhash_hbase.store.hbase").joinpath("thrift2.thrift")
    return thriftpy2.load(str(idl), module_name="shdb_bench_hbase2_thrift")


#: Thrift1 port; scripts/hbase serves Thrift2 on THRIFT_PORT + 1.
THRIFT_PORT = int(os.environ.get("SHDB_BENCH_HBASE_PORT", "19090"))
ZK_PORT = int(os.environ.get("SHDB_BENCH_ZK_PORT", "12181"))
HOME = Path(os.environ.get("SHDB_BENCH_HBASE_HOME", Path.home() / ".cache" / "shdb-hbase-bench"))
_ADMIN_TOOL = Path(__file__).with_name("HBaseAdminTool.java")


class BenchHBase:
    """Start/stop/inspect the bench instance; ``start`` may run in the background.

    With ``address`` (``host:port`` of a running Thrift1 gateway, e.g. the test
    suite's) nothing is started or stopped: the tables get a prefix of their own and
    are dropped at the end, and what needs the instance's files or processes (the
    storage figures, server CPU time) is skipped.
    """

    def __init__(self, address: str | None = None) -> None:
        self.external = address is not None
        host, _, port = (address or f"127.0.0.1:{THRIFT_PORT}").rpartition(":")
        self.host, self.port = host, int(port)
        self.tag = f"b{os.getpid()}_" if self.external else ""
        self.home = HOME
        self.env = {
            **os.environ,
            "SHDB_HBASE_HOME": str(HOME),
            "SHDB_HBASE_THRIFT_PORT": str(THRIFT_PORT),
            "SHDB_HBASE_ZK_PORT": str(ZK_PORT),
            # The query section loads 1 M documents (10 M index cells): with the script's
            # 1 GB default, memstores and block cache filled the region server's heap and
            # full GCs outlasted its ZooKeeper session (it aborted, 2026-11-25).
            "SHDB_HBASE_MASTER_HEAP": os.environ.get("SHDB_HBASE_MASTER_HEAP", "2g"),
        }
        self._starting: subprocess.Popen[bytes] | None = None
        self.started = False

    @property
    def url_base(self) -> str:
        return f"hbase://{self.host}:{self.port}"

    @property
    def thrift2_port(self) -> int:
        """scripts/hbase (and the Docker image) serve Thrift2 on the Thrift1 port + 1."""
        return self.port + 1

    @property
    def thrift2_url(self) -> str:
        """The production path: the store over the Thrift2 gateway."""
        return f"hbase://{self.host}:{self.thrift2_port}"

    @property
    def zookeeper(self) -> str:
        """The ZooKeeper quorum: the bench's own instance listens on ``SHDB_BENCH_ZK_PORT``;
        a running one (``--hbase``) on the port its environment gave scripts/hbase or the
        image (``SHDB_BENCH_ZK_PORT``, else ``SHDB_HBASE_ZK_PORT``, else their 2181)."""
        if not self.external:
            return f"{self.host}:{ZK_PORT}"
        port = os.environ.get("SHDB_BENCH_ZK_PORT") or os.environ.get("SHDB_HBASE_ZK_PORT")
        return f"{self.host}:{port or 2181}"

    def prefix(self, name: str) -> str:
        """The table prefix for ``name`` in this run (unique on a shared instance)."""
        return f"{self.tag}{name}"

    @property
    def data_dir(self) -> Path:
        return HOME / "data" / "hbase" / "data" / "default"

    def _script(self, *args: str) -> list[str]:
        return [str(ROOT / "scripts" / "hbase"), *args]

    def start_background(self, fresh: bool = True) -> None:
        """Begin `scripts/hbase start`; jars come from Maven Central on the first run."""
        if self.external:
            log(f"using the running HBase at {self.host}:{self.port} (tables {self.tag}*)")
            return
        log(f"starting the bench HBase (thrift 127.0.0.1:{THRIFT_PORT}, home {HOME})")
        args = ["start", "--fresh"] if fresh else ["start"]
        self._starting = subprocess.Popen(
            self._script(*args), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.started = True

    def wait(self) -> None:
        if self._starting is None:
            return
        out, _ = self._starting.communicate()
        code, self._starting = self._starting.returncode, None
        if code != 0:
            raise RuntimeError(f"scripts/hbase start failed:\n{out.decode(errors='replace')}")
        log("bench HBase is ready")

    def start(self, fresh: bool = True) -> None:
        self.start_background(fresh)
        self.wait()

    def stop(self) -> None:
        """Clean shutdown: it flushes the memstores, which the storage figures rely on.

        A running instance that is not ours keeps running; our tables are dropped."""
        if self.external:
            self._drop_own_tables()
            return
        if self._starting is not None:
            self._starting.wait()
            self._starting = None
        if not self.started:
            return
        subprocess.run(self._script("stop"), env=self.env, check=False, capture_output=True)
        self.started = False
        log("bench HBase stopped")

    def _drop_own_tables(self) -> None:
        self.drop_tables(self.tag)

    def drop_tables(self, *prefixes: str) -> None:
        """Drop every table whose name starts with one of ``prefixes``."""
        conn = self.connection()
        try:
            for name in conn.tables():
                if name.decode().startswith(prefixes):
                    conn.delete_table(name, disable=True)
        finally:
            conn.close()

    def version(self) -> str:
        if self.external:
            return f"running instance at {self.host}:{self.port}"
        jars = sorted((HOME / "lib").glob("hbase-server-*.jar"))
        match = re.match(r"hbase-server-(.+)\.jar", jars[0].name) if jars else None
        thrift = sorted((HOME / "lib").glob("hbase-thrift-*.jar"))
        gateway = (
            thrift[0].name.removeprefix("hbase-thrift-").removesuffix(".jar") if thrift else "?"
        )
        return f"{match.group(1) if match else '?'} (thrift gateway {gateway}, standalone)"

    def connection(self) -> Any:
        import happybase

        return happybase.Connection(self.host, self.port, timeout=120_000)

    def thrift2_client(self) -> Any:
        """A raw thriftpy2 client of the Thrift2 gateway (the store's own IDL), for
        baselines: the calls the store makes, without the store."""
        from simhash_hbase.store.hbase import thrift2 as hbase_thrift2

        return hbase_thrift2.open_client(self.host, self.thrift2_port, 120_000)

    def _admin_classes(self) -> Path:
        """HBaseAdminTool compiled once per source change (javac: ~5 s, run: ~2 s)."""
        out = CACHE_DIR / "admin-tool"
        stamp = out / "HBaseAdminTool.class"
        if not stamp.exists() or stamp.stat().st_mtime < _ADMIN_TOOL.stat().st_mtime:
            out.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["javac", "-nowarn", "-d", str(out), "-cp", f"{HOME / 'lib'}/*", str(_ADMIN_TOOL)],
                check=True,
                capture_output=True,
            )
        return out

    @property
    def can_admin(self) -> bool:
        """Whether :meth:`admin` can run: the instance's jars and conf are at hand
        (a running instance: ``SHDB_BENCH_HBASE_HOME`` names its home)."""
        return (HOME / "lib").is_dir() and (HOME / "conf" / "hbase-site.xml").is_file()

    def admin(self, *args: str) -> str:
        """Run HBaseAdminTool (Admin API calls Thrift1 lacks) against this instance."""
        classpath = f"{HOME / 'conf'}:{HOME / 'lib'}/*:{self._admin_classes()}"
        result = subprocess.run(
            [
                "java",
                # conf/log4j2.properties logs to ${hbase.log.dir}/${hbase.log.file}
                f"-Dhbase.log.dir={HOME / 'logs'}",
                "-Dhbase.log.file=admin-tool.log",
                "-cp",
                classpath,
                "HBaseAdminTool",
                *args,
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            raise RuntimeError(f"HBaseAdminTool {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def jvm_cpu_seconds(self) -> float:
        """CPU time used so far by the master (region server) and both Thrift JVMs
        (the store speaks Thrift2; the raw Thrift1 baselines go through the other)."""
        total = 0.0
        for role in ("master", "thrift", "thrift2"):
            try:
                pid = (HOME / "run" / f"{role}.pid").read_text().strip()
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def server_cpu_seconds(self) -> float:
        """CPU time used so far by this instance's JVMs (master with region server and
        ZooKeeper, both Thrift gateways): what HBase spends on a load. The bench's own
        instance by its pid files; a running one (``--hbase``) by the JVMs that listen
        on its Thrift and ZooKeeper ports, so other HBases of the machine (a shared
        one, a test container) do not count. When no JVM listens there (a container
        behind a port proxy), every HBase JVM of the machine counts."""
        import psutil

        if not self.external:
            return self.jvm_cpu_seconds()
        ports = {self.port, self.thrift2_port, int(self.zookeeper.rpartition(":")[2])}
        listeners = {
            c.pid
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port in ports and c.pid
        }
        jvms: dict[int, float] = {}  # every HBase JVM of the machine: CPU seconds
        for proc in psutil.process_iter(["pid", "name", "cmdline", "cpu_times"]):
            cmd = proc.info["cmdline"] or []
            if proc.info["name"] == "java" and any("org.apache.hadoop.hbase." in c for c in cmd):
                times = proc.info["cpu_times"]
                jvms[proc.info["pid"]] = times.user + times.system
        mine = [cpu for pid, cpu in jvms.items() if pid in listeners]
        return sum(mine or jvms.values())

    # -- table files ------------------------------------------------------------
    def store_files(self, table: str) -> dict[Path, list[Path]]:
        """HFiles per store directory (region/family) of ``table``."""
        stores: dict[Path, list[Path]] = {}
        root = self.data_dir / table
        for region in root.iterdir() if root.exists() else []:
            if not region.is_dir() or region.name.startswith("."):
                continue
            for family in region.iterdir():
                if (
                    family.is_dir()
                    and not family.name.startswith(".")
                    and family.name != ("recovered.edits")
                ):
                    stores[family] = [f for f in family.iterdir() if f.is_file()]
        return stores

    def table_bytes(self, table: str) -> int:
        """Bytes of every HFile of the table (after a flush, all of them are live)."""
        return sum(f.stat().st_size for files in self.store_files(table).values() for f in files)

    def live_bytes_after_major(self, table: str) -> int:
        """Bytes of the newest HFile per store: the output of a major compaction.

        The compacted-away inputs stay in the store directory until HBase's
        discharger archives them (every 2 minutes by default), so a plain directory
        total would count the table twice.
        """
        return sum(
            max(files, key=lambda f: f.stat().st_mtime).stat().st_size
            for files in self.store_files(table).values()
            if files
        )

    def wait_compacted(self, table: str, since: float, timeout: float = 600) -> None:
        """Until every store has a file newer than ``since`` and sizes stop changing."""
        deadline = time.time() + timeout
        last = -1
        while time.time() < deadline:
            stores = self.store_files(table)
            tmp_busy = any(  # a compaction writes into region/.tmp/FAMILY/ first
                f.is_file() for store in stores for f in (store.parent / ".tmp").rglob("*")
            )
            fresh = all(
                files and max(f.stat().st_mtime for f in files) >= since - 1
                for files in stores.values()
            )
            size = self.live_bytes_after_major(table)
            if fresh and not tmp_busy and size == last:
                return
            last = size
            time.sleep(2)
        raise RuntimeError(f"major compaction of {table} did not settle in {timeout:.0f} s")
