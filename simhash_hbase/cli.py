"""`shdb`: a thin command line over the library. Parse, call one function, print.

Exit codes: 0 success (for `query`: matches found), 1 `query` found nothing or
`remove` missed an id, 2 error (bad usage, bad input with --on-error fail, store
down), 3 `ingest` finished but skipped records (listed in the summary).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from typer.core import TyperGroup

from . import codec, schema
from .dedup import clusters
from .errors import ShdbError
from .fingerprint import (
    DEFAULT_NGRAM,
    DEFAULT_TOP_N,
    Fingerprinter,
    FingerprintParams,
    build_idf,
    write_idf,
)
from .index import DEFAULT_K, Duplicate, IngestSummary, Record, SimhashIndex
from .ingest import (
    DEFAULT_MAX_BYTES,
    SourceOptions,
    find_duplicates,
    ingest,
    read_sources,
    read_text_file,
    total_bytes,
)
from .records import Match
from .scheme import DEFAULT_SCHEME, get_scheme
from .verify import verify

EXIT_NO_MATCH = 1
EXIT_SKIPPED = 3
_SHOWN_SKIPS = 20


class _Group(TyperGroup):
    """The one place where library errors become a message and an exit code."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (vendored by newer typer)
        try:
            return super().invoke(ctx)
        except ShdbError as exc:
            typer.echo(f"shdb: error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Near-duplicate text index: 64-bit SimHash, pigeonhole index on LMDB or HBase.",
)
err = Console(stderr=True, soft_wrap=True)

IndexOpt = Annotated[
    str | None,
    typer.Option(
        "--index",
        "-i",
        help="Index URL: a directory (embedded) or hbase://HOST:PORT?prefix=NAME. "
        "Default: $SHDB_INDEX, then ./shdb-index.",
        show_default=False,
    ),
]
KOpt = Annotated[int, typer.Option("-k", help="Largest Hamming distance that counts as a match.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TopNOpt = Annotated[
    int, typer.Option("--top-n", help="Terms per fingerprint (used when an index is created).")
]
IdfOpt = Annotated[
    str | None,
    typer.Option("--idf", help="IDF table ('term idf' lines) instead of jieba's bundled one."),
]
FeaturesOpt = Annotated[
    str,
    typer.Option(
        help="words: jieba TF-IDF terms (long texts); chars: character n-grams "
        "(short texts). Used when an index is created."
    ),
]
NgramOpt = Annotated[int, typer.Option(help="n-gram length with --features chars.")]
PathsArg = Annotated[list[str], typer.Argument(help="Files, folders, or - for stdin.")]
FormatOpt = Annotated[
    str, typer.Option("--format", help="auto|text|jsonl|csv (auto: by file suffix).")
]
IdFieldOpt = Annotated[str, typer.Option(help="JSONL/CSV field holding the id.")]
TextFieldOpt = Annotated[str, typer.Option(help="JSONL/CSV field holding the text.")]
WorkersOpt = Annotated[int, typer.Option(help="Fingerprinting processes.")]
FingerprintsOpt = Annotated[
    bool, typer.Option(help="Input lines are HEX or ID<TAB>HEX fingerprints, not documents.")
]
TextArg = Annotated[str | None, typer.Argument(help="The text.")]
FileOpt = Annotated[str | None, typer.Option("--file", "-f", help="Read the text from FILE.")]


def _params(top_n: int, idf: str | None, features: str, ngram: int) -> FingerprintParams:
    return FingerprintParams(top_n=top_n, idf_path=idf, features=features, ngram=ngram)


@contextmanager
def _open_output(path: str | None) -> Iterator[TextIO | None]:
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout
    else:
        with open(path, "w", encoding="utf-8") as f:
            yield f


def _progress(total: int | None) -> Progress:
    columns = [TextColumn("[bold]ingest"), BarColumn(), DownloadColumn()] if total else []
    columns += [
        TextColumn("{task.fields[docs]} docs, {task.fields[rate]:.0f} docs/s"),
        TimeElapsedColumn(),
    ]
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)


def _print_summary(summary: IngestSummary, k: int | None) -> None:
    if summary.resumed_after:
        err.print(f"resumed: {summary.resumed_after} records were done by an earlier run")
    found = f", {summary.duplicates} near-duplicates (k<={k})" if k is not None else ""
    err.print(
        f"added {summary.added} documents{found}, skipped {len(summary.skipped)}, "
        f"{summary.bytes_read / 1e6:.1f} MB in {summary.seconds:.1f} s "
        f"({summary.docs_per_second:.0f} docs/s)",
        highlight=False,
    )
    _print_skips(summary.skipped)


def _print_skips(skipped: list[tuple[str, str]]) -> None:
    for where, reason in skipped[:_SHOWN_SKIPS]:
        err.print(f"  skipped {where}: {reason}", highlight=False, markup=False)
    if len(skipped) > _SHOWN_SKIPS:
        err.print(f"  ... and {len(skipped) - _SHOWN_SKIPS} more skipped records")


@app.command("ingest")
def ingest_cmd(
    paths: PathsArg,
    index: IndexOpt = None,
    fmt: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    workers: WorkersOpt = 1,
    store_text: Annotated[bool, typer.Option(help="Keep the text in the docs table.")] = False,
    report: Annotated[
        str | None,
        typer.Option(help="Write one JSON line per near-duplicate found to FILE (- = stdout)."),
    ] = None,
    k: KOpt = DEFAULT_K,
    on_error: Annotated[
        str, typer.Option(help="skip: log bad records and go on; fail: stop at the first.")
    ] = "skip",
    max_bytes: Annotated[
        int, typer.Option(help="Largest document (or JSONL line) accepted, in bytes.")
    ] = DEFAULT_MAX_BYTES,
    scheme: Annotated[
        str | None, typer.Option(help=f"5x10 or 4x4, for a new index (default {DEFAULT_SCHEME}).")
    ] = None,
    top_n: TopNOpt = DEFAULT_TOP_N,
    idf: IdfOpt = None,
    features: FeaturesOpt = "words",
    ngram: NgramOpt = DEFAULT_NGRAM,
    batch_size: Annotated[int, typer.Option(help="Documents per write batch.")] = 1000,
    resume: Annotated[
        bool, typer.Option(help="Skip the records an interrupted run of this input finished.")
    ] = True,
    fingerprints: FingerprintsOpt = False,
    dedup: Annotated[
        bool,
        typer.Option(
            help="Look up every new document before adding it (10 scans each); "
            "--no-dedup for a faster bulk load."
        ),
    ] = True,
) -> None:
    """Index documents, reporting near-copies of documents already held."""
    opts = SourceOptions(fmt, id_field, text_field, max_bytes)
    total = None if fingerprints else total_bytes(paths)
    with (
        SimhashIndex.open(
            index, scheme=scheme, params=_params(top_n, idf, features, ngram), batch_size=batch_size
        ) as ix,
        _open_output(report) as out,
        _progress(total) as bar,
    ):
        task = bar.add_task("ingest", total=total, docs=0, rate=0.0)

        def on_duplicate(dup: Duplicate) -> None:
            if out is not None:
                out.write(json.dumps(dup._asdict(), ensure_ascii=False) + "\n")

        def on_progress(s: IngestSummary) -> None:
            bar.update(task, completed=s.bytes_read, docs=s.added, rate=s.docs_per_second)

        summary = ingest(
            ix,
            paths,
            opts,
            workers=workers,
            store_text=store_text,
            find_k=k if dedup else None,
            on_error=on_error,
            resume=resume,
            fingerprints=fingerprints,
            on_duplicate=on_duplicate,
            on_progress=on_progress,
        )
    _print_summary(summary, k if dedup else None)
    if summary.skipped:
        raise typer.Exit(EXIT_SKIPPED)


def _text_from(text: str | None, file: str | None) -> str:
    if file is not None and text is None:
        return read_text_file(file)
    if text is not None and file is None:
        return text
    raise typer.BadParameter("give exactly one of TEXT or --file (- reads stdin)")


def _print_matches(matches: list[Match], as_json: bool) -> None:
    if as_json:
        rows = [
            {
                "id": m.doc_id,
                "fingerprint": codec.fingerprint_to_hex(m.fingerprint),
                "distance": m.distance,
            }
            for m in matches
        ]
        typer.echo(json.dumps(rows, ensure_ascii=False))
        return
    for m in matches:
        typer.echo(f"{m.distance}\t{codec.fingerprint_to_hex(m.fingerprint)}\t{m.doc_id}")


@app.command("query")
def query_cmd(
    text: TextArg = None,
    file: FileOpt = None,
    fingerprint: Annotated[
        str | None, typer.Option(help="Look up a 64-bit hex fingerprint instead of text.")
    ] = None,
    k: KOpt = DEFAULT_K,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    idf: IdfOpt = None,
) -> None:
    """Print near-copies held in the index: distance, fingerprint, id. Exit 1 if none."""
    if fingerprint is not None and (text, file) != (None, None):
        raise typer.BadParameter("give exactly one of TEXT, --file or --fingerprint")
    with SimhashIndex.open(index, readonly=True, idf_path=idf) as ix:
        if fingerprint is not None:
            matches = ix.query_fingerprint(codec.parse_fingerprint_hex(fingerprint), k)
        else:
            matches = ix.query(_text_from(text, file), k)
    _print_matches(matches, as_json)
    if not matches:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("fingerprint")
def fingerprint_cmd(
    text: TextArg = None,
    file: FileOpt = None,
    terms: Annotated[bool, typer.Option(help="Also print the weighted terms used.")] = False,
    top_n: TopNOpt = DEFAULT_TOP_N,
    idf: IdfOpt = None,
    features: FeaturesOpt = "words",
    ngram: NgramOpt = DEFAULT_NGRAM,
) -> None:
    """Print the 64-bit SimHash of a text, as 16 hex digits."""
    body = _text_from(text, file)
    fp = Fingerprinter(_params(top_n, idf, features, ngram))
    typer.echo(codec.fingerprint_to_hex(fp.fingerprint(body)))
    if terms:
        for term, weight in fp.weighted_terms(body):
            typer.echo(f"{weight:10.3f}  {term}")


@app.command("stats")
def stats_cmd(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Documents, index cells, disk use and the manifest of an index."""
    with SimhashIndex.open(index, readonly=True) as ix:
        stats = ix.stats()
    if as_json:
        typer.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    for key, value in stats.items():
        typer.echo(f"{key}: {json.dumps(value, ensure_ascii=False)}")


@app.command("get")
def get_cmd(doc_ids: list[str], index: IndexOpt = None) -> None:
    """Print stored documents as JSON lines. Exit 1 if an id is missing."""
    missing = 0
    with SimhashIndex.open(index, readonly=True) as ix:
        for doc_id in doc_ids:
            doc = ix.get(doc_id)
            if doc is None:
                err.print(f"not found: {doc_id}", markup=False, highlight=False)
                missing += 1
                continue
            row = {
                "id": doc.doc_id,
                "fingerprint": codec.fingerprint_to_hex(doc.fingerprint),
                "text": doc.text,
                "meta": doc.meta,
            }
            typer.echo(json.dumps(row, ensure_ascii=False))
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("remove")
def remove_cmd(doc_ids: list[str], index: IndexOpt = None) -> None:
    """Delete documents and all their index rows. Exit 1 if an id was not there."""
    with SimhashIndex.open(index, create=False) as ix:
        missing = [doc_id for doc_id in doc_ids if not ix.remove(doc_id)]
    for doc_id in missing:
        err.print(f"not found: {doc_id}", markup=False, highlight=False)
    err.print(f"removed {len(doc_ids) - len(missing)} of {len(doc_ids)}", highlight=False)
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("verify")
def verify_cmd(
    index: IndexOpt = None,
    repair: Annotated[bool, typer.Option(help="Fix what is found and report counts.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check that every document has all its index rows and no row is stale.

    Exit 0 when clean (or repaired), 1 when problems were found and left alone.
    """
    with SimhashIndex.open(index, readonly=not repair) as ix:
        report = verify(ix, repair=repair)
    fields = {k: v for k, v in dataclasses.asdict(report).items() if k != "examples"}
    if as_json:
        typer.echo(json.dumps({**fields, "clean": report.clean, "examples": report.examples}))
    else:
        typer.echo(" ".join(f"{k}={v}" for k, v in fields.items()))
        for example in report.examples:
            typer.echo(f"  {example}")
    if not report.clean and not report.repaired:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("dedup")
def dedup_cmd(
    paths: PathsArg,
    fingerprints: FingerprintsOpt = False,
    k: KOpt = DEFAULT_K,
    as_clusters: Annotated[
        bool, typer.Option("--clusters", help="Print groups of near-copies, not pairs.")
    ] = False,
    output: Annotated[str, typer.Option("--output", "-o", help="FILE, or - for stdout.")] = "-",
    fmt: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    workers: WorkersOpt = 1,
    scheme: Annotated[str, typer.Option(help="5x10 or 4x4.")] = DEFAULT_SCHEME,
    top_n: TopNOpt = DEFAULT_TOP_N,
    idf: IdfOpt = None,
    features: FeaturesOpt = "words",
    ngram: NgramOpt = DEFAULT_NGRAM,
) -> None:
    """All near-duplicate pairs (or clusters) within the input, in memory, no index."""
    result = find_duplicates(
        paths,
        SourceOptions(fmt, id_field, text_field),
        k=k,
        scheme=get_scheme(scheme),
        params=_params(top_n, idf, features, ngram),
        workers=workers,
        fingerprints=fingerprints,
    )
    ids = result.ids
    with _open_output(output) as out:
        assert out is not None
        if as_clusters:
            for group in clusters(result.pairs, len(ids)):
                out.write(json.dumps([ids[i] for i in group], ensure_ascii=False) + "\n")
        else:
            for i, j, dist in result.pairs:
                row = {"a": ids[i], "b": ids[j], "distance": dist}
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    err.print(
        f"{len(ids)} inputs, {len(result.pairs)} near-duplicate pairs (k<={k}), "
        f"skipped {len(result.skipped)}",
        highlight=False,
    )
    _print_skips(result.skipped)
    if result.skipped:
        raise typer.Exit(EXIT_SKIPPED)


idf_app = typer.Typer(cls=_Group, no_args_is_help=True, help="IDF tables for your own domain.")
app.add_typer(idf_app, name="idf")


@idf_app.command("build")
def idf_build_cmd(
    paths: Annotated[list[str], typer.Argument(help="Corpus: files, folders, or - for stdin.")],
    output: Annotated[str, typer.Option("--output", "-o", help="Where to write the table.")],
    fmt: FormatOpt = "auto",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = "id",
) -> None:
    """Build an IDF table (ln N/df over jieba terms); use it with `ingest --idf`."""
    docs = (
        r.text
        for r in read_sources(paths, SourceOptions(fmt, id_field, text_field))
        if isinstance(r, Record)
    )
    table = build_idf(docs, Fingerprinter())
    write_idf(table, output)
    err.print(f"wrote {len(table)} terms to {output}", highlight=False)


@app.command("schema")
def schema_cmd(
    prefix: Annotated[str, typer.Option(help="Table name prefix.")] = "shdb",
) -> None:
    """Print the hbase shell script that creates the tables exactly as schema/ defines."""
    typer.echo(schema.shell_script(prefix), nl=False)


@app.callback()
def _root() -> None:
    """Near-duplicate text index (see `shdb COMMAND --help`)."""


def main() -> None:
    app()
