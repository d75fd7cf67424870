"""`shdb spark verify` and `shdb spark stats`, driver side: `shdb verify` and
`shdb stats` for an index too large for one machine (docs/hbase.md, "verify and
stats at a billion documents").

One task per region of each table (cut finer to give every core a task:
:func:`simhash_hbase.jobs.census.cut`). Nothing is held on the driver but the
counts and the problems found: the check is a join. The cells every document
should have (:meth:`SimhashIndex.cells` of each docs row, the one definition the
writers and the local verify use) are joined, full outer, with the cells the
index holds, on (row key, id): a cell on the left only is missing (its document
is incomplete), one on the right only is stale. ``repair`` writes the fixes from
the executors in batches, the writes `shdb verify --repair` makes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.census import Counts, count_cells, count_documents, cut, extrapolate
from simhash_hbase.jobs.verify import VerifyReport, cells_per_doc
from simhash_hbase.spark.executor import (
    doc_rows,
    expected_cells,
    held_cells,
    per_range,
    write_fixes,
)
from simhash_hbase.spark.jobs import check_hbase_url
from simhash_hbase.store.base import WHOLE, KeyRange

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_EXAMPLES = 5
_KINDS = ("ok", "stale", "missing")
#: What does each job on a local (embedded) index instead.
VERIFY_LOCALLY = "shdb verify --workers N"
STATS_LOCALLY = "shdb stats --workers N"


def _tasks(index: SimhashIndex, table: str, parallelism: int) -> list[KeyRange]:
    """``table``'s regions, each cut so that there are at least ``parallelism`` tasks."""
    ranges = index.key_ranges(table) or [WHOLE]
    pieces = math.ceil(parallelism / len(ranges))
    return [piece for key_range in ranges for piece in cut(key_range, pieces)]


def _open(url: str, local: str, repair: bool = False) -> SimhashIndex:
    check_hbase_url(url, local)
    return SimhashIndex.open(url, create=False, readonly=not repair)


def stats(spark: SparkSession, url: str) -> dict[str, Any]:
    """What `shdb stats --json` prints, documents and index cells counted by one
    task per region (a damaged docs row counts, as there)."""
    sc = spark.sparkContext
    with _open(url, STATS_LOCALLY) as index:
        found = index.stats(counts=False)
        docs = _tasks(index, "docs", sc.defaultParallelism)
        cells = _tasks(index, "index", sc.defaultParallelism)
    by_docs = sc.parallelize(docs, len(docs)).mapPartitions(
        lambda part: per_range(url, part, count_documents)
    )
    by_cells = sc.parallelize(cells, len(cells)).mapPartitions(
        lambda part: per_range(url, part, count_cells)
    )
    counts = Counts(
        extrapolate(by_docs.collect(), len(docs)),
        extrapolate(by_cells.collect(), len(cells)),
        {"docs": (len(docs), len(docs)), "index": (len(cells), len(cells))},
    )
    found.update(counts.to_json(), counted_by="region by region on Spark (shdb spark stats)")
    return found


def verify(
    spark: SparkSession, url: str, *, repair: bool = False, batch_size: int = 10_000
) -> VerifyReport:
    """Check (and with ``repair`` fix) the index at ``url``; the report of
    :func:`simhash_hbase.jobs.verify.verify`, counts and kinds of examples alike."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    with _open(url, VERIFY_LOCALLY, repair) as index:
        docs_tasks = _tasks(index, "docs", sc.defaultParallelism)
        index_tasks = _tasks(index, "index", sc.defaultParallelism)
    # (id, fingerprint, band keys, None) a document, (id, None, None, why) a damaged row
    docs = sc.parallelize(docs_tasks, len(docs_tasks)).mapPartitions(
        lambda part: doc_rows(url, part)
    )
    docs.persist(StorageLevel.MEMORY_AND_DISK)
    good = docs.filter(lambda d: d[3] is None)
    want = spark.createDataFrame(
        good.mapPartitions(lambda part: expected_cells(url, part, batch_size)),
        "row binary, id string",
    ).withColumn("want", F.lit(True))
    held = spark.createDataFrame(
        sc.parallelize(index_tasks, len(index_tasks)).mapPartitions(
            lambda part: held_cells(url, part)
        ),
        "row binary, id string",
    ).withColumn("held", F.lit(True))
    kind = (
        F.when(F.col("held").isNull(), "missing")
        .when(F.col("want").isNull(), "stale")
        .otherwise("ok")
    )
    # Every good cell falls into one group (its row and id dropped, combined before
    # the shuffle): what is kept is the problems and one count.
    problems = (
        want.join(held, ["row", "id"], "full_outer")
        .select(
            kind.alias("kind"),
            F.when(kind != "ok", F.col("row")).alias("row"),
            F.when(kind != "ok", F.col("id")).alias("id"),
        )
        .groupBy("kind", "row", "id")
        .count()
    )
    problems.persist(StorageLevel.MEMORY_AND_DISK)
    by_kind = problems.groupBy("kind").agg(F.sum("count").alias("n")).collect()
    totals = dict.fromkeys(_KINDS, 0) | {r["kind"]: int(r["n"]) for r in by_kind}
    missing = problems.filter(F.col("kind") == "missing")
    stale = problems.filter(F.col("kind") == "stale")
    corrupt = docs.filter(lambda d: d[3] is not None)
    report = VerifyReport(
        documents=good.count(),
        cells=totals["ok"] + totals["stale"],
        stale_cells=totals["stale"],
        incomplete_documents=missing.select("id").distinct().count(),
        missing_cells=totals["missing"],
        corrupt_documents=corrupt.count(),
    )
    report.examples = [str(d[3]) for d in corrupt.take(_EXAMPLES)]
    report.examples += [
        f"stale cell {bytes(r['row']).hex()} -> {r['id']!r}" for r in stale.take(_EXAMPLES)
    ]
    lacking = missing.groupBy("id").count().orderBy("id").take(_EXAMPLES)
    with _open(url, VERIFY_LOCALLY) as index:
        found = index.get_many([r["id"] for r in lacking])
        for r in lacking:
            want_n = cells_per_doc(index, found[r["id"]])
            report.examples.append(
                f"document {r['id']!r} has {want_n - r['count']} of {want_n} cells"
            )
    if repair:
        edits = (
            stale.rdd.map(lambda r: ("delete", (bytes(r["row"]), r["id"])))
            .union(missing.rdd.map(lambda r: ("put", (bytes(r["row"]), r["id"]))))
            .union(corrupt.map(lambda d: ("drop", d[0])))
        )
        edits.foreachPartition(lambda part: write_fixes(url, part, batch_size))
        report.repaired = True
    problems.unpersist()
    docs.unpersist()
    return report
