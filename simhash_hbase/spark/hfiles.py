"""HBase bulk load for `shdb spark ingest --bulk-load DIR`: sorted HFiles, then BulkLoad.

The cells are exactly those the Thrift path writes (:meth:`SimhashIndex.cells`
for the index, :func:`codec.doc_to_columns` for the docs rows: docs/SPEC.md),
all with one timestamp, the job's start. Python builds them on the executors
and Spark sorts them into one partition per region (the table's region start
keys, read on the driver); on the JVM side HBase's own ``HFileOutputFormat2``
writes each partition as an HFile with the family's compression, encoding and
bloom filter, and ``BulkLoadHFilesTool`` hands the files to the region servers
(the crash-safe order: the index's files first, then the docs rows'; the other
way round for the bucket layout, docs/SPEC.md "Write order"). The
only JVM code of this project is the two converters from a pickled Python
tuple to a ``KeyValue`` (``bulkload/*.java``); every other class comes from
Maven Central (``bulkload/pom.xml``), fetched with ``mvn`` once into a cache.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhash_hbase.errors import IndexNotFound, InvalidInput, StoreUnavailable
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.hbase import tables as hbase_tables

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

#: Where the fetched jars are kept (one folder per version of pom + converters).
CACHE_ENV = "SHDB_SPARK_JARS_CACHE"
_CONVERTERS = ("ToCell", "ToRowKey")
_PACKAGE = "shdb.bulkload"
_CELL = "org.apache.hadoop.hbase.KeyValue"
_ROW = "org.apache.hadoop.hbase.io.ImmutableBytesWritable"
_FORMAT = "org.apache.hadoop.hbase.mapreduce.HFileOutputFormat2"
# The per-family settings HFileOutputFormat2.configureIncrementalLoadMap derives
# from the table (compression, bloom type and parameter, block size, encoding).
_FORMAT_KEYS = ("hbase.hfileoutputformat.", "hbase.mapreduce.hfileoutputformat.")
Cell = tuple[bytes, bytes, bytes, bytes]  # row, family, qualifier, value


# -- the JVM classpath ------------------------------------------------------------


def _sources() -> Path:
    return Path(str(resources.files("simhash_hbase.spark"))) / "bulkload"


def _cache_root() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shdb-spark-bulkload"
    )
    return Path(base)


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _artifact(jar: str) -> str:
    """``netty-codec-4.1.105.Final.jar`` -> ``netty-codec``: the name without version."""
    parts = jar.removesuffix(".jar").split("-")
    return "-".join(parts[: next((i for i, p in enumerate(parts) if p[:1].isdigit()), len(parts))])


def bulkload_jars() -> list[str]:
    """The jars ``--bulk-load`` needs on Spark's classpath (driver and executors):
    hbase-mapreduce 2.6 and its dependencies less those Spark already ships, and
    the converters' jar. Fetched with Maven and compiled with javac on first use,
    then cached (``$SHDB_SPARK_JARS_CACHE``, default ~/.cache/shdb-spark-bulkload)."""
    src = _sources()
    digest = hashlib.sha256()
    for name in ("pom.xml", *(f"{c}.java" for c in _CONVERTERS)):
        digest.update((src / name).read_bytes())
    folder = _cache_root() / digest.hexdigest()[:16]
    done = folder / "classpath.txt"
    if not done.exists():
        _build(src, folder)
    return done.read_text().split()


def _run(cmd: list[str], what: str) -> None:
    tool = shutil.which(cmd[0])
    if tool is None:
        raise InvalidInput(
            f"--bulk-load needs {cmd[0]!r} ({what}) on PATH: install a JDK 17+ and Maven, "
            "or give the jars yourself (--conf spark.jars=..., see docs/spark.md)"
        )
    done = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise InvalidInput(
            f"--bulk-load: {what} failed ({' '.join(cmd[:2])} ...):\n  "
            + "\n  ".join(tail)
            + "\nThe jars come from Maven Central: check that mvn reaches it (proxy "
            "settings in ~/.m2/settings.xml), then run the job again."
        )


def _build(src: Path, folder: Path) -> None:
    """Fetch the jars (mvn) and compile the converters (javac) into ``folder``;
    written under a temporary name and renamed, so a half-built cache never counts."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    jars = work / "jars"
    _run(
        [
            "mvn", "-B", "-q", "-f", str(src / "pom.xml"),
            "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={jars}",
        ],
        "fetching hbase-mapreduce 2.6 and its dependencies from Maven Central",
    )  # fmt: skip
    spark = {_artifact(j.name) for j in _spark_jars().glob("*.jar")}
    for jar in list(jars.glob("*.jar")):
        if _artifact(jar.name) in spark:  # Spark's own copy wins: one per class
            jar.unlink()
    classes = work / "classes"
    classpath = os.pathsep.join([str(_spark_jars() / "*"), str(jars / "*")])
    _run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", classpath,
         *(str(src / f"{c}.java") for c in _CONVERTERS)],
        "compiling the HFile converters",
    )  # fmt: skip
    _run(["jar", "cf", str(jars / "shdb-bulkload.jar"), "-C", str(classes), "."], "jar")
    shutil.rmtree(classes)
    final = sorted(str(folder / "jars" / j.name) for j in jars.glob("*.jar"))
    (work / "classpath.txt").write_text("\n".join(final) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)


def check_classpath(sc: SparkContext) -> None:
    """The driver JVM must see HBase's classes (under spark-submit: --jars and
    --driver-class-path); a clear error naming the fix if not."""
    try:
        sc._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            f"{_PACKAGE}.ToCell",
            True,
            sc._jvm.Thread.currentThread().getContextClassLoader(),  # type: ignore[union-attr]
        )
        sc._jvm.java.lang.Class.forName(_FORMAT)  # type: ignore[union-attr]
    except _java_errors() as exc:
        raise InvalidInput(
            "--bulk-load: the HBase classes are not on Spark's classpath. Under "
            'spark-submit pass --jars "$(python -m simhash_hbase.cli.spark_submit '
            "--bulkload-jars)\" and --driver-class-path with the same jars ':'-separated "
            f"(docs/spark.md); {str(exc).splitlines()[0][:200]}"
        ) from None


# -- the driver's HBase connection -------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the HFiles go: the ZooKeeper quorum of the HBase cluster, the table
    prefix, and the staging folder (any Hadoop URL the region servers can read)."""

    zookeeper: str
    prefix: str
    staging: str

    def table(self, name: str) -> str:
        return hbase_tables.table_name(self.prefix, name)


def hbase_conf(sc: SparkContext, zookeeper: str) -> Any:
    """An HBase client configuration for ``HOST[:PORT][,HOST[:PORT]...]``, failing
    in seconds, not minutes, when the quorum does not answer."""
    jvm = sc._jvm
    conf = jvm.org.apache.hadoop.hbase.HBaseConfiguration.create(  # type: ignore[union-attr]
        sc._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    )
    conf.set("hbase.zookeeper.quorum", zookeeper)
    conf.set("hbase.client.retries.number", "5")
    conf.set("zookeeper.recovery.retry", "1")
    return conf


class Loader:
    """The driver's side: region boundaries, HFile settings, and the bulk load."""

    def __init__(self, sc: SparkContext, target: Target) -> None:
        check_classpath(sc)
        self.sc, self.target = sc, target
        self._jvm = sc._jvm
        self.conf = hbase_conf(sc, target.zookeeper)
        hb = self._jvm.org.apache.hadoop.hbase  # type: ignore[union-attr]
        # First contact on a connection of its own that gives up after one try:
        # the load's connection retries (regions move), which makes a wrong
        # quorum take 80 s to say so instead of 15.
        probe_conf = hb.HBaseConfiguration.create(self.conf)
        probe_conf.set("hbase.client.retries.number", "1")
        try:
            probe = hb.client.ConnectionFactory.createConnection(probe_conf)
            try:
                admin = probe.getAdmin()
                missing = [
                    t for t in ("index", "docs")
                    if not admin.tableExists(hb.TableName.valueOf(target.table(t)))
                ]  # fmt: skip
                admin.close()
            finally:
                probe.close()
            self._conn = hb.client.ConnectionFactory.createConnection(self.conf)
        except _java_errors() as exc:
            raise StoreUnavailable(
                f"--bulk-load: HBase through ZooKeeper {target.zookeeper} did not answer "
                f"({_java_message(exc)}); check --zookeeper (the quorum of the cluster "
                "the Thrift gateway serves, hbase.zookeeper.quorum) and that HBase is up"
            ) from None
        if missing:
            raise IndexNotFound(
                f"--bulk-load: table {target.table(missing[0])} does not exist in the HBase "
                f"at ZooKeeper {target.zookeeper}: is --zookeeper the cluster of --index? "
                "(the job creates the tables through the Thrift gateway of --index)"
            )

    def close(self) -> None:
        self._conn.close()

    def start_keys(self, table: str) -> list[bytes]:
        """The table's region start keys, sorted (the first is b"")."""
        name = self._jvm.org.apache.hadoop.hbase.TableName.valueOf(self.target.table(table))  # type: ignore[union-attr]
        locator = self._conn.getRegionLocator(name)
        try:
            return sorted(bytes(k) for k in locator.getStartKeys())
        finally:
            locator.close()

    def format_conf(self, table: str) -> dict[str, str]:
        """HFileOutputFormat2's settings for ``table``: each family's compression,
        bloom filter (and its prefix length), block size and encoding, read from
        the table itself, so the HFiles are what the region server would write."""
        jvm = self._jvm
        hb = jvm.org.apache.hadoop.hbase  # type: ignore[union-attr]
        name = hb.TableName.valueOf(self.target.table(table))
        descriptor = self._conn.getTable(name).getDescriptor()
        job = jvm.org.apache.hadoop.mapreduce.Job.getInstance(self.conf)  # type: ignore[union-attr]
        hb.mapreduce.HFileOutputFormat2.configureIncrementalLoadMap(job, descriptor)
        out = {}
        for entry in job.getConfiguration().iterator():
            key = entry.getKey()
            if key.startswith(_FORMAT_KEYS):
                out[key] = entry.getValue()
        # Locality hints would make every task open an HBase connection; the
        # region servers read the files wherever they are.
        out["hbase.bulkload.locality.sensitive.enabled"] = "false"
        return out

    def load(self, table: str, folder: str) -> None:
        """Hand the HFiles under ``folder`` (one subfolder per family) to ``table``."""
        jvm = self._jvm
        hb = jvm.org.apache.hadoop.hbase  # type: ignore[union-attr]
        tool = hb.tool.BulkLoadHFiles.create(self.conf)
        path = jvm.org.apache.hadoop.fs.Path(folder)  # type: ignore[union-attr]
        _open_to_region_servers(folder)
        try:
            tool.bulkLoad(hb.TableName.valueOf(self.target.table(table)), path)
        except _java_errors() as exc:
            raise StoreUnavailable(
                f"--bulk-load: loading {folder} into {self.target.table(table)} failed: "
                f"{_java_message(exc)}. The region servers must be able to read and "
                "move the staging folder (on HDFS: the hbase user needs write access to it)"
            ) from None


def _open_to_region_servers(folder: str) -> None:
    """HBase's bulk load moves the files as the region servers' user: a local staging
    tree written by this user is opened to it (folders writable, files readable), as
    HBase's docs ask of an HDFS staging folder. Other filesystems are left alone."""
    if "://" in folder and not folder.startswith("file:"):
        return
    root = folder.removeprefix("file://").removeprefix("file:")
    for parent, _, files in os.walk(root):
        os.chmod(parent, 0o777)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o666)


def _java_errors() -> tuple[type[Exception], ...]:
    """What a failing Java call raises through py4j."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]

    return (Py4JError,)


def _java_message(exc: Exception) -> str:
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    caused = [ln for ln in lines if ln.startswith("Caused by:")]
    return (caused[-1] if caused else lines[0] if lines else type(exc).__name__)[:300]


# -- the executors' side -------------------------------------------------------------


def index_cells(index_cells_of: Any, docs: Sequence[Document], buckets: bool) -> Iterator[Cell]:
    """The index cells of ``docs`` as (row, family, qualifier, value), exactly
    those the Thrift path puts: family ``d``, empty value; the qualifier is the id
    (rows layout), or the row its 5-byte prefix and the qualifier the fingerprint
    then the id (bucket layout)."""
    for row, doc_id in index_cells_of(docs):
        if buckets:
            bucket, qualifier = codec.bucket_cell(row, doc_id)
            yield bucket, b"d", qualifier, b""
        else:
            yield row, b"d", codec.encode_doc_id(doc_id), b""


def docs_cells(docs: Iterable[Document]) -> Iterator[Cell]:
    """The docs row cells of ``docs``, as the Thrift path puts them."""
    for doc in docs:
        key = codec.encode_doc_id(doc.doc_id)
        for column, value in codec.doc_to_columns(doc).items():
            family, _, qualifier = column.partition(b":")
            yield key, family, qualifier, value


def region_of(starts: list[bytes]) -> Any:
    """The partition function: the region a (row, family, qualifier) key falls in."""

    def part(key: tuple[bytes, bytes, bytes]) -> int:
        return bisect.bisect_right(starts, key[0]) - 1

    return part


def write_hfiles(
    cells: RDD[Cell], starts: list[bytes], folder: str, conf: dict[str, str], stamp: int
) -> None:
    """Sort ``cells`` into one partition per region (HBase's key order: row,
    family, qualifier, all unsigned bytes, as Python compares bytes) and write
    them as HFiles under ``folder/<family>/``. A cell given twice is written once."""
    keyed = cells.map(lambda c: ((c[0], c[1], c[2]), c[3]))
    ordered = keyed.repartitionAndSortWithinPartitions(
        len(starts), region_of(starts), keyfunc=lambda k: k
    )
    pairs = ordered.mapPartitions(_distinct_sorted).map(
        lambda kv: (kv[0][0], (kv[0][0], kv[0][1], kv[0][2], kv[1], stamp))
    )
    pairs.saveAsNewAPIHadoopFile(
        folder,
        _FORMAT,
        keyClass=_ROW,
        valueClass=_CELL,
        keyConverter=f"{_PACKAGE}.ToRowKey",
        valueConverter=f"{_PACKAGE}.ToCell",
        conf=conf,
    )


def _distinct_sorted(
    items: Iterable[tuple[tuple[bytes, bytes, bytes], bytes]],
) -> Iterator[tuple[tuple[bytes, bytes, bytes], bytes]]:
    last = None
    for key, value in items:
        if key != last:
            yield key, value
            last = key


def stamp_now() -> int:
    """The cells' timestamp: the job's start in milliseconds (above every earlier
    write of this index, which used the wall clock too)."""
    return int(time.time() * 1000)
