"""Building the SparkSession: local mode from the CLI, the cluster's under spark-submit.

``shdb spark … --master local[*]`` (the default) starts an in-process local
cluster. Under ``spark-submit`` the master comes from spark-submit and is never
overridden here, so the same job code runs both ways.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from simhash_hbase.errors import InvalidInput, ShdbError

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "shdb"

# Local mode serves one machine: no web UI, nothing listening beyond loopback.
_LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.showConsoleProgress": "false",
}


def _local_python(base: SparkConf) -> None:
    """Local mode's Python workers run this very interpreter (the driver's), not
    whatever ``python3`` is first on PATH, which from a virtualenv that is not
    activated lacks this package's dependencies; unless ``$PYSPARK_PYTHON`` or
    ``spark.pyspark.python`` says otherwise. (PySpark reads the variable when the
    context starts; the setting alone reaches only spark-submit.)"""
    python = base.get("spark.pyspark.python", None) or sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", python)


def _launch_args(
    master: str | None, conf: Mapping[str, str], jars: Sequence[str] = ()
) -> str | None:
    """The driver's heap is fixed when its JVM starts, so ``spark.driver.memory``
    set on the builder afterwards is ignored: pass it to the launch instead
    (``$PYSPARK_SUBMIT_ARGS``), unless spark-submit already started the JVM or the
    variable is set. Local mode runs every task in that one JVM, and Spark's 1 GB
    default ran out of heap at 1 M documents, so local mode gets a quarter of the
    machine's memory (1-8 GB) unless told otherwise. ``jars`` (the bulk load's
    HBase classes) go on the driver's class path there too, and to the executors.
    None: nothing to add to the launch."""
    if "PYSPARK_GATEWAY_PORT" in os.environ or "PYSPARK_SUBMIT_ARGS" in os.environ:
        return None
    memory = conf.get("spark.driver.memory")
    if memory is None and (master is None or master.startswith("local")):
        memory = f"{local_driver_memory_mb()}m"
    args = [] if memory is None else ["--driver-memory", memory]
    if jars:
        args += ["--jars", ",".join(jars), "--driver-class-path", os.pathsep.join(jars)]
    return shlex.join([*args, "pyspark-shell"]) if args else None


@contextmanager
def _launch_env(submit_args: str | None) -> Iterator[None]:
    """``$PYSPARK_SUBMIT_ARGS`` for this process's JVM launch only. Left set, it
    would reach every child process, which then takes it for the user's and
    launches its own JVM with this one's heap and without its own jars (a later
    ``shdb spark ingest --bulk-load`` started from a process that ran a job lost
    the HBase classes)."""
    if submit_args is None:
        yield
        return
    os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_SUBMIT_ARGS", None)


def local_driver_memory_mb() -> int:
    """A quarter of physical memory, at least 1 GB and at most 8 GB: the heap is a
    ceiling the JVM grows into, not an allocation."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return max(1024, min(total // 4, 8192))


# The last Python exception in an executor's traceback, as Spark relays it.
_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Unavailable)): (.+)$", re.M)


class SparkJobFailed(ShdbError):
    """A Spark job failed (a task failed more often than it may be retried)."""


@contextmanager
def job_errors() -> Iterator[None]:
    """A failed job as one :class:`SparkJobFailed` naming the executor's error,
    instead of a JVM stack trace."""
    require_pyspark()  # entered before the session is built: the extra is named first
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    try:
        yield
    except (Py4JJavaError, PySparkException) as exc:
        text = str(exc)
        found = _PYTHON_ERROR.findall(text)
        what = f"{found[-1][0].rsplit('.', 1)[-1]}: {found[-1][1]}" if found else text[:500]
        raise SparkJobFailed(f"the Spark job failed: {what}") from None


def require_pyspark() -> None:
    """A clear error (not an ImportError trace) when the `spark` extra is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise InvalidInput(
            "Spark jobs need PySpark 4 and Java 17+: pip install 'simhash-hbase[spark]'"
        ) from None


def parse_conf(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--conf``) as a dict; anything else is a clear error."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def get_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jars: Sequence[str] = (),
) -> SparkSession:
    """The active session, or a new one.

    ``master`` None: spark-submit's master when launched by it, else ``local[*]``.
    An explicit ``master`` always wins. ``jars`` are put on the class path of a
    JVM this call starts (under spark-submit, its --jars do that).
    """
    require_pyspark()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    with _launch_env(_launch_args(master, conf or {}, jars)):
        SparkContext._ensure_initialized()  # the JVM; under spark-submit it holds its settings
    base = SparkConf()
    if master is None:
        master = base.get("spark.master", DEFAULT_MASTER)
    name = base.get("spark.app.name", APP_NAME)
    if name == "pyspark-shell":  # the name PySpark gives a JVM it launched itself
        name = APP_NAME
    builder = SparkSession.builder.appName(name).master(master)
    settings = dict(_LOCAL_CONF) if master.startswith("local") else {}
    if master.startswith("local"):
        _local_python(base)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
