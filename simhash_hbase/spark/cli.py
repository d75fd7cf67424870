"""`shdb spark dedup|ingest`: the Spark jobs from the command line.

Mounted by :mod:`simhash_hbase.cli.app` (it reuses that module's options, so it is
imported from there, last). ``--master local[*]`` is the default; under
``spark-submit`` (see :mod:`simhash_hbase.spark.launcher`) the cluster's master is used.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated

import typer

from simhash_hbase.cli.app import (
    EXIT_SKIPPED,
    FeaturesOpt,
    IdFieldOpt,
    IdfOpt,
    IndexOpt,
    KOpt,
    MaxBytesOpt,
    NgramOpt,
    SchemeOpt,
    TextFieldOpt,
    TopNOpt,
    _Group,
    _wanted,
    err,
)
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme
from simhash_hbase.spark import DEFAULT_TILE, inputs
from simhash_hbase.store import resolve_url
from simhash_hbase.text.readers import DEFAULT_MAX_BYTES, SourceOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from simhash_hbase.spark.jobs import Reading, Summary

spark_app: typer.Typer = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    help="Jobs on Apache Spark: corpus-wide dedup, and backfill of an HBase index.",
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
    int, typer.Option("--split-mb", help="JSONL files are cut into ranges of this many MiB.")
]
PartitionsOpt = Annotated[
    int | None,
    typer.Option(help="Shuffle partitions. Default: Spark's default parallelism."),
]


def _session(master: str | None, conf: list[str] | None) -> SparkSession:
    from simhash_hbase.spark.session import get_session, parse_conf

    return get_session(master, parse_conf(conf or []))


def _job_errors() -> AbstractContextManager[None]:
    from simhash_hbase.spark.session import job_errors

    return job_errors()


def _reading(
    paths: list[str], fmt: str, id_field: str, text_field: str, max_bytes: int, split_mb: int
) -> Reading:
    from simhash_hbase.spark.jobs import Reading

    if fmt not in inputs.FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; one of: {', '.join(inputs.FORMATS)}")
    opts = SourceOptions("auto" if fmt == inputs.PARQUET else fmt, id_field, text_field, max_bytes)
    return Reading(paths, fmt, opts, split_mb << 20)


def _finish(summary: Summary, what: str) -> None:
    err.print(what, highlight=False)
    if summary.rejected:
        err.print(
            f"  {summary.rejected} bad records (source and reason) in {summary.rejects_path}",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(EXIT_SKIPPED)


@spark_app.command("dedup")
def dedup_cmd(
    paths: InputsArg,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Folder for pairs.{parquet,jsonl}/ and more.")
    ],
    as_clusters: Annotated[
        bool, typer.Option("--clusters", help="Also write clusters.{parquet,jsonl}/.")
    ] = False,
    k: KOpt = DEFAULT_K,
    fmt: SparkFormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    scheme: Annotated[str, typer.Option(help="5x10 or 4x4.")] = DEFAULT_SCHEME,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    split_mb: SplitOpt = inputs.DEFAULT_SPLIT_BYTES >> 20,
    partitions: PartitionsOpt = None,
    tile: Annotated[
        int, typer.Option(help="Largest block compared by one unit of work (skew control).")
    ] = DEFAULT_TILE,
) -> None:
    """All near-duplicate pairs of the input, as `shdb dedup` finds them, on Spark."""
    from simhash_hbase.spark.jobs import dedup

    reading = _reading(paths, fmt, id_field, text_field, max_bytes, split_mb)
    params = FingerprintParams(**_wanted(top_n, idf, features, ngram))
    with _job_errors():
        summary = dedup(
            _session(master, conf),
            reading,
            output,
            scheme=get_scheme(scheme),
            k=k,
            params=params,
            with_clusters=as_clusters,
            tile=tile,
            partitions=partitions,
        )
    clusters = "" if summary.clusters is None else f", {summary.clusters} clusters"
    _finish(
        summary,
        f"{summary.documents} inputs, {summary.pairs} near-duplicate pairs (k<={k}){clusters}, "
        f"skipped {summary.rejected} in {summary.seconds:.1f} s; written to {output}",
    )


@spark_app.command("ingest")
def ingest_cmd(
    paths: InputsArg,
    index: IndexOpt = None,
    report: Annotated[
        str | None,
        typer.Option(help="Folder for duplicates.{parquet,jsonl}/: near-copies found."),
    ] = None,
    rejects: Annotated[
        str, typer.Option(help="Folder for the bad records (JSONL: source, reason).")
    ] = "shdb-spark-rejects",
    k: KOpt = DEFAULT_K,
    fmt: SparkFormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    store_text: Annotated[bool, typer.Option(help="Keep the text in the docs table.")] = False,
    scheme: SchemeOpt = None,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    batch_size: Annotated[int, typer.Option(help="Documents per write batch.")] = 1000,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    split_mb: SplitOpt = inputs.DEFAULT_SPLIT_BYTES >> 20,
    partitions: PartitionsOpt = None,
) -> None:
    """Backfill an HBase index from Spark executors (same tables as `shdb ingest`)."""
    from simhash_hbase.spark.jobs import ingest

    reading = _reading(paths, fmt, id_field, text_field, max_bytes, split_mb)
    with _job_errors():
        summary = ingest(
            _session(master, conf),
            reading,
            resolve_url(index),
            scheme=scheme,
            params=_wanted(top_n, idf, features, ngram),
            store_text=store_text,
            report=report,
            k=k,
            rejects=rejects,
            batch_size=batch_size,
            partitions=partitions,
        )
    found = "" if report is None else f", {summary.pairs} near-duplicates (k<={k}) in {report}"
    rate = summary.documents / summary.seconds if summary.seconds else 0.0
    _finish(
        summary,
        f"added {summary.documents} documents{found}, skipped {summary.rejected}, "
        f"{summary.records} records in {summary.seconds:.1f} s ({rate:.0f} docs/s)",
    )
