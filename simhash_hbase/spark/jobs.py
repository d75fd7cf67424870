"""The two Spark jobs that read an input, driver side: `shdb spark dedup` and
`shdb spark ingest` (those that read an index: :mod:`simhash_hbase.spark.verify`).

Outputs are folders of part files, written by the executors: ``NAME.parquet/``
and ``NAME.jsonl/`` (one JSON object a line) side by side, rows in input order.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import FingerprintParams, idf_table
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.manifest import Wanted
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import DEFAULT_LIMIT, BadRecord, Document
from simhash_hbase.spark import inputs
from simhash_hbase.spark.dedup import DedupJob, Doc, run
from simhash_hbase.spark.executor import (
    FAULT_ENV,
    DocItem,
    Done,
    Fingerprinting,
    Reporting,
    bulk_cells,
    forget_saved,
    parse_fault,
    split_held,
    write_partition,
)
from simhash_hbase.spark.hfiles import Loader, Target, stamp_now, write_hfiles
from simhash_hbase.store import open_store
from simhash_hbase.text.readers import SourceOptions

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Reading:
    """What to read and how to cut it into tasks."""

    paths: Sequence[str]
    fmt: str = "auto"
    opts: SourceOptions = field(default_factory=SourceOptions)
    split_bytes: int = inputs.DEFAULT_SPLIT_BYTES


@dataclass
class Summary:
    records: int = 0  # read, good and bad
    documents: int = 0  # fingerprinted (dedup) or written (ingest)
    rejected: int = 0
    pairs: int = 0  # dedup: near-duplicate pairs (counted); ingest: report rows
    with_near_copies: int = 0  # dedup: documents with earlier near-copies (lines written)
    clusters: int | None = None
    seconds: float = 0.0
    rejects_path: str | None = None
    created: bool = False  # ingest: the index was new (created on purpose)
    lsh: MinHashParams | None = None  # ingest: the index's MinHash net (None: SimHash only)


def write_both(df: DataFrame, folder: str, name: str) -> None:
    """``folder/name.parquet`` and ``folder/name.jsonl`` (replaced if present; a
    null is written as null, as `shdb` prints it)."""
    df.write.mode("overwrite").parquet(f"{folder}/{name}.parquet")
    df.write.mode("overwrite").option("ignoreNullFields", "false").json(f"{folder}/{name}.jsonl")


def remove_outputs(spark: SparkSession, paths: list[str]) -> None:
    """Delete earlier runs' outputs this run does not write (a reused output folder
    must not mix a new run's pairs with an old run's clusters or rejects); on any
    file system Hadoop knows (local, HDFS, S3)."""
    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for path in paths:
        target = jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
        target.getFileSystem(hadoop).delete(target, True)


def _idf_bytes(params: FingerprintParams) -> bytes | None:
    return None if params.idf is None else idf_table(params.idf).raw


def _documents(
    spark: SparkSession, reading: Reading, fingerprinting: Fingerprinting
) -> RDD[DocItem]:
    from pyspark import StorageLevel

    items = inputs.records(
        spark, reading.paths, reading.fmt, reading.opts, reading.split_bytes
    ).mapPartitions(fingerprinting.documents)
    items.persist(StorageLevel.MEMORY_AND_DISK)
    return items


def _dedup_items(
    spark: SparkSession, reading: Reading, fingerprinting: Fingerprinting
) -> RDD[tuple[int, BadRecord | Doc]]:
    """What dedup keeps of each record, held between its two passes (rejects, then
    the graph): a bad record, or a plain tuple (position, id, fp, sketch, bands)
    that pickles several times faster than a Document."""
    from pyspark import StorageLevel

    items = inputs.records(
        spark, reading.paths, reading.fmt, reading.opts, reading.split_bytes
    ).mapPartitions(lambda part: map(_compact, fingerprinting.documents(part)))
    items.persist(StorageLevel.MEMORY_AND_DISK)
    return items


def _compact(item: DocItem) -> tuple[int, BadRecord | Doc]:
    pos, record = item
    return (pos, record) if isinstance(record, BadRecord) else (pos, _doc(item))  # type: ignore[arg-type]


def _good(item: tuple[int, BadRecord | Doc]) -> list[Doc]:
    return [] if isinstance(item[1], BadRecord) else [item[1]]


def _rejected(item: tuple[int, Any]) -> list[tuple[int, str, str, str]]:
    pos, record = item
    if isinstance(record, BadRecord):
        return [(pos, record.where, record.reason, record.problem.value)]
    return []


def _accepted(item: DocItem) -> list[tuple[int, Document]]:
    pos, record = item
    return [(pos, record)] if isinstance(record, Document) else []


def _write_rejects(spark: SparkSession, items: RDD[tuple[int, Any]], path: str) -> int:
    """Bad records with their source (file:line) and reason, in input order."""
    rows = spark.createDataFrame(
        items.flatMap(_rejected), "pos long, source string, reason string, problem string"
    )
    rows.persist()
    count = rows.count()
    if count:
        rows.orderBy("pos").drop("pos").write.mode("overwrite").json(path)
    else:
        remove_outputs(spark, [path])
    rows.unpersist()
    return count


def _doc(item: tuple[int, Document]) -> Doc:
    pos, doc = item
    return pos, doc.doc_id, doc.fingerprint, doc.sketch, doc.bands


def dedup(
    spark: SparkSession,
    reading: Reading,
    output: str,
    *,
    scheme: Scheme,
    k: int,
    params: FingerprintParams,
    with_clusters: bool = False,
    limit: int = DEFAULT_LIMIT,
    partitions: int | None = None,
    lsh: MinHashParams | None = None,
) -> Summary:
    """Each document's nearest earlier near-copies by both nets (``matches``, the
    lines of `shdb dedup`) and the clusters, written under ``output``; ``lsh``: the
    judge's settings (default ``MinHashParams()``; ``--similarity``: ``at_similarity``)."""
    from pyspark.sql import functions as F

    scheme.check_k(k)
    started = time.perf_counter()
    lsh = lsh or MinHashParams()
    items = _dedup_items(spark, reading, Fingerprinting(params, _idf_bytes(params), lsh=lsh))
    rejects = f"{output}/rejects.jsonl"
    summary = Summary(rejects_path=rejects, rejected=_write_rejects(spark, items, rejects))
    good = items.flatMap(_good)
    job = DedupJob(scheme, k, lsh, limit, partitions)
    result = run(spark, good, job, with_clusters=with_clusters)
    result.matches.persist()
    write_both(result.matches, output, "matches")
    (lines, pairs), *_ = result.matches.agg(F.count("*"), F.sum("total")).collect()
    summary.with_near_copies, summary.pairs = int(lines), int(pairs or 0)
    if result.clusters is not None:
        result.clusters.persist()
        write_both(result.clusters, output, "clusters")
        summary.clusters = result.clusters.count()
    else:
        remove_outputs(spark, [f"{output}/clusters.parquet", f"{output}/clusters.jsonl"])
    summary.documents = result.documents
    summary.records = summary.documents + summary.rejected
    summary.seconds = time.perf_counter() - started
    return summary


def check_hbase_url(url: str, local: str = "shdb ingest --workers N") -> None:
    """Spark jobs reach an index through HBase's gateway; ``local``: the command
    that does the job on a local (embedded) index instead."""
    if urlsplit(url).scheme.lower() != "hbase":
        raise InvalidInput(
            f"{url!r} is not an HBase index URL: Spark executors read and write HBase "
            f"(hbase://HOST:PORT?prefix=NAME); for a local index use `{local}`"
        )


def check_bulk_report(report: str | None, bulk: Target | None) -> None:
    """A report needs the lookups each batch is written with, in the write section;
    a bulk load's HFiles land outside any batch (docs/spark.md, "Concurrent writers")."""
    if report is not None and bulk is not None:
        raise InvalidInput(
            "--report with --bulk-load: a bulk load has no batches to look up in, so it "
            "cannot report near-copies exactly beside other writers; drop --bulk-load for "
            "a report, or bulk load without --report (`shdb spark dedup` gives the pairs "
            "within the input)"
        )


def ingest(
    spark: SparkSession,
    reading: Reading,
    url: str,
    *,
    scheme: str | None = None,
    params: Wanted = None,
    store_text: bool = False,
    report: str | None = None,
    k: int = 3,
    rejects: str = "shdb-spark-rejects",
    batch_size: int = 1000,
    partitions: int | None = None,
    bulk: Target | None = None,
    create: bool = False,
) -> Summary:
    """Backfill: fingerprint and write the input into the HBase index at ``url``,
    which must exist unless ``create`` (a mistyped prefix never starts an empty one).

    With ``bulk``, the documents whose ids the index does not hold yet are
    written as HFiles and bulk loaded (:mod:`simhash_hbase.spark.hfiles`); the
    others, and everything without ``bulk``, through the Thrift gateway.

    The manifest is created (or checked against ``scheme``/``params``) here, on
    the driver, before any executor writes. The same id twice: the last one in
    input order wins, as with `shdb ingest`. With ``report``, each executor batch's
    near-copies among the documents committed before it (this job's and every
    other writer's) and the earlier ones of the batch, looked up in the write
    section it is written in (:func:`~simhash_hbase.spark.executor.write_reported`):
    the lines `shdb ingest --report` would write, as rows there.
    """
    check_hbase_url(url)
    check_bulk_report(report, bulk)
    if report is not None and spark.sparkContext.getConf().get("spark.speculation") == "true":
        raise InvalidInput(
            "--report with spark.speculation=true: two attempts of one write task at once "
            "would split a batch's report between them; turn speculation off for this job"
        )
    started = time.perf_counter()
    parts = partitions or spark.sparkContext.defaultParallelism
    key = _job_key(reading, store_text, k, batch_size, parts)
    # The driver holds its job's run lock (a lease it renews, store.lock): the same job
    # twice at once would share saved report lines; every other writer writes at once,
    # batch by batch in the write section (docs/spark.md, "Concurrent writers").
    with (
        SimhashIndex.open(url, scheme=scheme, params=params, create=create) as index,
        index.sole_writer("shdb spark ingest", key=key),
    ):
        created = index.created
        index.scheme.check_k(k)
        held_params, held_lsh = index.params, index.lsh
        index.fingerprinter  # noqa: B018  (loads the index's own IDF table, if any)
        fingerprinting = Fingerprinting(held_params, _idf_bytes(held_params), store_text, held_lsh)
        items = _documents(spark, reading, fingerprinting)
        summary = Summary(
            rejects_path=rejects,
            rejected=_write_rejects(spark, items, rejects),
            created=created,
            lsh=held_lsh,
        )
        # One version per id (the last in input order), spread evenly over the tasks.
        docs = (
            items.flatMap(_accepted)
            .map(lambda item: (item[1].doc_id, item))
            .reduceByKey(lambda a, b: a if a[0] > b[0] else b, parts)
            .values()
        )
        summary.records = items.count()
        if bulk is not None:
            summary.documents = _bulk_write(spark, index, docs, url, bulk, batch_size)
        else:
            reporting = None if report is None else Reporting(k, f"spark/{key}")
            summary.documents, summary.pairs = _thrift_write(
                spark, docs, url, batch_size, reporting, report
            )
    summary.seconds = time.perf_counter() - started
    return summary


def _job_key(reading: Reading, store_text: bool, k: int, batch_size: int, parts: int) -> str:
    """The job's name among the index's run locks and saved report lines: its input
    and every option that makes its batches, so that the same command run again
    after a failure finds what it saved (each batch checks it is the same batch)."""
    what = [list(reading.paths), reading.fmt, repr(reading.opts), store_text, k, batch_size, parts]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:32]


def _thrift_write(
    spark: SparkSession,
    docs: RDD[tuple[int, Document]],
    url: str,
    batch_size: int,
    reporting: Reporting | None = None,
    folder: str | None = None,
) -> tuple[int, int]:
    """Documents written through the Thrift gateway and, with ``reporting``, report
    rows written under ``folder``: ``duplicates.{parquet,jsonl}``, (id, near_id,
    distance, similarity), ``id`` the new document, a row a match its batch's
    lookups listed. The batches' saved lines are dropped once the rows are written."""
    from pyspark import StorageLevel

    fault = parse_fault(os.environ.get(FAULT_ENV))
    done: RDD[Done] = docs.mapPartitionsWithIndex(
        lambda part, items: write_partition(url, part, items, batch_size, reporting, fault)
    )
    done.persist(StorageLevel.MEMORY_AND_DISK)
    written = int(done.map(lambda batch: batch[0]).sum())
    pairs = 0
    if reporting is not None and folder is not None:
        rows = spark.createDataFrame(
            done.flatMap(lambda batch: [row for line in batch[1] for row in _rows(line)]),
            "id string, near_id string, distance int, similarity double",
        )
        write_both(rows, folder, "duplicates")
        pairs = rows.count()
        done.foreachPartition(lambda batches: forget_saved(url, batches))
    done.unpersist()
    return written, pairs


def _rows(line: str) -> list[tuple[str, str, int, float | None]]:
    found = json.loads(line)
    return [(found["id"], m["id"], m["distance"], m["similarity"]) for m in found["matches"]]


def _bulk_write(
    spark: SparkSession,
    index: SimhashIndex,
    docs: RDD[tuple[int, Document]],
    url: str,
    bulk: Target,
    batch_size: int,
) -> int:
    """Ids new to the index as HFiles, bulk loaded: the index cells first, then
    the docs rows (a docs row never lands before its cells; the bucket layout the
    other way round: no cell lands before its docs row), both loads in one write
    section, so that every other writer's batch (its lookups and its write) comes
    wholly before or wholly after them; ids the index holds through the Thrift path.
    The staging folder is removed after the load."""
    from pyspark import StorageLevel

    sc = spark.sparkContext
    loader = Loader(sc, bulk)
    try:
        marked = docs.mapPartitions(lambda part: split_held(url, part, batch_size))
        marked.persist(StorageLevel.MEMORY_AND_DISK)
        held: RDD[tuple[int, Document]] = marked.filter(lambda m: m[0]).values()  # type: ignore[assignment]
        fresh = marked.filter(lambda m: not m[0]).values()
        stamp = stamp_now()
        run_dir = f"{bulk.staging.rstrip('/')}/{bulk.prefix}-{stamp}"
        with open_store(url, create=False) as store:
            order = ("docs", "index") if store.index_follows_docs else ("index", "docs")
        for table in order:
            write_hfiles(
                fresh.mapPartitions(
                    lambda part, t=table: bulk_cells(url, t, part, batch_size)  # type: ignore[misc]
                ),
                loader.start_keys(table),
                f"{run_dir}/{table}",
                loader.format_conf(table),
                stamp,
            )
        with index.write_section():
            for table in order:
                loader.load(table, f"{run_dir}/{table}")
        remove_outputs(spark, [run_dir])
        written = fresh.count()
        written += _thrift_write(spark, held, url, batch_size)[0]
        marked.unpersist()
        return written
    finally:
        loader.close()
