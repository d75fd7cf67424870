"""`shdb spark dedup|ingest|verify|stats`: the Spark jobs from the command line.

``--master local[*]`` is the default; under ``spark-submit`` (see
:mod:`simhash_hbase.cli.spark_submit`) the cluster's master is used. PySpark is
imported when a command runs, so ``shdb --help`` stays fast without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from simhash_hbase.cli.options import (
    BatchSchemeOpt,
    CreateOpt,
    IdFieldOpt,
    IndexOpt,
    JsonOpt,
    KOpt,
    LimitOpt,
    MaxBytesOpt,
    RepairOpt,
    SchemeOpt,
    SimilarityOpt,
    StoreTextOpt,
    TextFieldOpt,
    fingerprint_settings,
    uses,
)
from simhash_hbase.cli.render import (
    EXIT_SKIPPED,
    echo_json,
    error,
    group,
    hint,
    message,
    new_index,
    note,
    predicate,
    stats_report,
    verify_report,
)
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme
from simhash_hbase.records import DEFAULT_LIMIT, check_limit
from simhash_hbase.spark import inputs
from simhash_hbase.store import resolve_url
from simhash_hbase.store.hbase.settings import parse_url
from simhash_hbase.text.readers import DEFAULT_MAX_BYTES, SourceOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from simhash_hbase.spark.hfiles import Target as BulkTarget
    from simhash_hbase.spark.jobs import Reading, Summary

spark_app = group(
    "Jobs on Apache Spark: corpus-wide dedup; backfill, verify and stats of an HBase index."
)

InputsArg = Annotated[
    list[str],
    typer.Argument(help="Files, folders, Parquet files or datasets (*.parquet, or any URL)."),
]
SparkFormatOpt = Annotated[
    str,
    typer.Option(
        "--format", help="auto|text|jsonl|csv|parquet (auto: by suffix; *.parquet is Parquet)."
    ),
]
MasterOpt = Annotated[
    str | None,
    typer.Option(
        help="Spark master. Default: spark-submit's when launched by it, else local[*].",
        show_default=False,
    ),
]
ConfOpt = Annotated[
    list[str] | None, typer.Option("--conf", help="Spark setting KEY=VALUE (repeatable).")
]
SplitOpt = Annotated[
    int,
    typer.Option(
        "--split-mb", help="JSONL files are cut into ranges of at most this many MiB (2 a core)."
    ),
]
PartitionsOpt = Annotated[
    int | None,
    typer.Option(help="Shuffle partitions. Default: Spark's default parallelism."),
]
DedupOutputOpt = Annotated[
    str, typer.Option("--output", "-o", help="Folder for matches.{parquet,jsonl}/ and more.")
]
SparkClustersOpt = Annotated[
    bool, typer.Option("--clusters", help="Also write clusters.{parquet,jsonl}/.")
]
ReportOpt = Annotated[
    str | None,
    typer.Option(
        help="Folder for duplicates.{parquet,jsonl}/: near-copies found (each batch's "
        "lookups, as `shdb ingest --report`); not with --bulk-load."
    ),
]
RejectsOpt = Annotated[
    str, typer.Option(help="Folder for the bad records (JSONL: source, reason).")
]
BatchOpt = Annotated[int, typer.Option(help="Documents per write batch.")]
BulkLoadOpt = Annotated[
    str | None,
    typer.Option(
        "--bulk-load",
        help="Write new ids as HFiles in this staging folder (a URL the region servers "
        "can read: hdfs://... on a cluster) and bulk load them; needs --zookeeper.",
        show_default=False,
    ),
]
ZookeeperOpt = Annotated[
    str | None,
    typer.Option(
        help="With --bulk-load: the HBase cluster's ZooKeeper quorum, HOST:PORT[,HOST:PORT].",
        show_default=False,
    ),
]


def reading(
    paths: InputsArg,
    fmt: SparkFormatOpt = "auto",
    id_field: IdFieldOpt = None,
    text_field: TextFieldOpt = None,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    split_mb: SplitOpt = inputs.DEFAULT_SPLIT_BYTES >> 20,
) -> Reading:
    """The option group of what a Spark job reads and how it cuts it."""
    from simhash_hbase.spark.jobs import Reading

    if fmt not in inputs.FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; one of: {', '.join(inputs.FORMATS)}")
    fmt_read = "auto" if fmt == inputs.PARQUET else fmt
    opts = SourceOptions(fmt_read, id_field or "id", text_field or "text", max_bytes)
    return Reading(paths, fmt, opts, split_mb << 20)


def session(master: MasterOpt = None, conf: ConfOpt = None) -> Callable[..., SparkSession]:
    """The option group of the Spark session: started by the job, under its error
    translation (PySpark is imported only then), with extra ``jars`` if given."""

    def start(jars: Sequence[str] = ()) -> SparkSession:
        from simhash_hbase.spark.session import get_session, parse_conf

        return get_session(master, parse_conf(conf or []), jars)

    return start


def _job_errors() -> AbstractContextManager[None]:
    from simhash_hbase.spark.session import job_errors

    return job_errors()


@contextmanager
def _writes_kept() -> Iterator[None]:
    """A Spark ingest that failed midway (exit 2) says what is kept and what a re-run
    does: its finished tasks' writes stay (by id), and writing one again is harmless."""
    from simhash_hbase.spark.session import SparkJobFailed

    try:
        yield
    except SparkJobFailed as exc:
        error(message(exc), hint(exc))
        note(
            "the documents its finished tasks wrote are saved; the same command again "
            "writes every document, those already held unchanged"
        )
        raise typer.Exit(exc.exit_code) from None


def _finish(summary: Summary, what: str, as_json: bool) -> None:
    if as_json:
        echo_json(dataclasses.asdict(summary))
    else:
        note(what)
    if summary.rejected:
        note(f"  {summary.rejected} bad records (source and reason) in {summary.rejects_path}")
        raise typer.Exit(EXIT_SKIPPED)


@spark_app.command("dedup")
@uses(source=reading, wanted=fingerprint_settings, spark=session)
def dedup_cmd(
    source: Reading,
    *,
    output: DedupOutputOpt,
    as_clusters: SparkClustersOpt = False,
    k: KOpt = DEFAULT_K,
    scheme: BatchSchemeOpt = DEFAULT_SCHEME,
    wanted: dict[str, Any],
    spark: Callable[[], SparkSession],
    limit: LimitOpt = DEFAULT_LIMIT,
    partitions: PartitionsOpt = None,
    similarity: SimilarityOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Near-duplicates of the input by both nets, as `shdb dedup` finds them, on
    Spark: matches.{parquet,jsonl}/ holds one row per input that has near-copies
    before it, {"id", "matches" (its --limit nearest earlier inputs), "total",
    "total_exact"}, in input order (--clusters: also clusters.{parquet,jsonl}/)."""
    from simhash_hbase.spark.jobs import dedup

    check_limit(limit)
    lsh = MinHashParams() if similarity is None else MinHashParams().at_similarity(similarity)
    with _job_errors():
        summary = dedup(
            spark(),
            source,
            output,
            scheme=get_scheme(scheme),
            k=k,
            params=FingerprintParams(**wanted),
            with_clusters=as_clusters,
            limit=limit,
            partitions=partitions,
            lsh=lsh,
        )
    clusters = "" if summary.clusters is None else f", {summary.clusters} clusters"
    _finish(
        summary,
        f"{summary.documents} inputs, {summary.with_near_copies} of them with earlier "
        f"near-copies, {summary.pairs} near-duplicate pairs ({predicate(k, lsh)})"
        f"{clusters}, "
        f"skipped {summary.rejected} in {summary.seconds:.1f} s; written to {output}",
        as_json,
    )


@spark_app.command("ingest")
@uses(source=reading, wanted=fingerprint_settings, spark=session)
def ingest_cmd(
    source: Reading,
    *,
    index: IndexOpt = None,
    create: CreateOpt = False,
    report: ReportOpt = None,
    rejects: RejectsOpt = "shdb-spark-rejects",
    k: KOpt = DEFAULT_K,
    store_text: StoreTextOpt = False,
    scheme: SchemeOpt = None,
    wanted: dict[str, Any],
    batch_size: BatchOpt = 1000,
    spark: Callable[..., SparkSession],
    partitions: PartitionsOpt = None,
    bulk_load: BulkLoadOpt = None,
    zookeeper: ZookeeperOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Backfill an HBase index from Spark executors (same tables as `shdb ingest`):
    through the Thrift gateway in batches, or (--bulk-load) as HFiles handed to
    HBase's bulk load, the same cells. The index must exist, or --create it."""
    from simhash_hbase.spark.jobs import check_bulk_report, ingest

    url = resolve_url(index)
    bulk = _bulk_target(url, bulk_load, zookeeper)
    check_bulk_report(report, bulk)
    jars: list[str] = []
    if bulk is not None:
        from simhash_hbase.spark.hfiles import bulkload_jars

        jars = bulkload_jars()
    with _writes_kept(), _job_errors():
        summary = ingest(
            spark(jars),
            source,
            url,
            scheme=scheme,
            params=wanted,
            store_text=store_text,
            report=report,
            k=k,
            rejects=rejects,
            batch_size=batch_size,
            partitions=partitions,
            bulk=bulk,
            create=create,
        )
    if summary.created:
        new_index(url)
    found = "" if report is None else f", {summary.pairs} near-duplicates in {report}"
    rate = summary.documents / summary.seconds if summary.seconds else 0.0
    _finish(
        summary,
        f"added {summary.documents} documents{found}, skipped {summary.rejected}, "
        f"{summary.records} records in {summary.seconds:.1f} s ({rate:.0f} docs/s)"
        + ("" if report is None else f"; {predicate(k, summary.lsh)}"),
        as_json,
    )


@spark_app.command("verify")
@uses(spark=session)
def verify_cmd(
    *,
    index: IndexOpt = None,
    repair: RepairOpt = False,
    spark: Callable[..., SparkSession],
    as_json: JsonOpt = False,
) -> None:
    """`shdb verify` of an HBase index on Spark, for one too large to check on one
    machine: one task per region, the check a join (docs/spark.md). The same report
    and exit codes: 0 clean (or repaired), 1 problems found and left alone."""
    from simhash_hbase.spark.jobs import check_hbase_url
    from simhash_hbase.spark.verify import VERIFY_LOCALLY, verify

    url = resolve_url(index)
    check_hbase_url(url, VERIFY_LOCALLY)  # before Spark starts
    with _job_errors():
        report = verify(spark(), url, repair=repair)
    verify_report(report, as_json)


@spark_app.command("stats")
@uses(spark=session)
def stats_cmd(
    *, index: IndexOpt = None, spark: Callable[..., SparkSession], as_json: JsonOpt = False
) -> None:
    """`shdb stats` of an HBase index, documents and index cells counted on Spark,
    one task per region."""
    from simhash_hbase.spark.jobs import check_hbase_url
    from simhash_hbase.spark.verify import STATS_LOCALLY, stats

    url = resolve_url(index)
    check_hbase_url(url, STATS_LOCALLY)  # before Spark starts
    with _job_errors():
        found = stats(spark(), url)
    stats_report(found, as_json)


def _bulk_target(url: str, staging: str | None, zookeeper: str | None) -> BulkTarget | None:
    from simhash_hbase.spark.hfiles import Target
    from simhash_hbase.spark.jobs import check_hbase_url

    if staging is None:
        if zookeeper is not None:
            raise InvalidInput("--zookeeper is for --bulk-load STAGING_DIR")
        return None
    check_hbase_url(url)
    if not zookeeper:
        raise InvalidInput(
            "--bulk-load needs --zookeeper HOST:PORT, the ZooKeeper quorum of the HBase "
            "cluster behind --index (hbase.zookeeper.quorum in its hbase-site.xml)"
        )
    return Target(zookeeper, parse_url(url)["prefix"], staging)
