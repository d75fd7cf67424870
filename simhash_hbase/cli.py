"""`shdb`: the command line over the library. Parse, call one function, print.

This module owns every flag name, every hint and every exit code; the library
below it speaks neutrally and carries structured details in its exceptions.

Exit codes: 0 success (for `query`: matches found), 1 `query` found nothing,
`get`/`remove` missed an id, or `verify` found problems, 2 error (bad usage,
bad input with --on-error fail, store down), 3 finished but skipped records
(listed), 130 interrupted (Ctrl-C).
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

from . import codec
from .errors import (
    IndexNotFound,
    InvalidQuery,
    InvalidSetting,
    ManifestMismatch,
    ShdbError,
    StoreError,
    StoreUnavailable,
)
from .fingerprint import (
    DEFAULT_VERSION,
    Fingerprinter,
    FingerprintParams,
    build_idf,
    load_idf_file,
    write_idf,
)
from .index import DEFAULT_K, SimhashIndex
from .ingest import IngestOptions, find_duplicates, ingest
from .manifest import ENVIRONMENT
from .records import BadRecord, Duplicate, IngestSummary, Match, OnError, Problem, Record
from .scheme import DEFAULT_SCHEME, get_scheme
from .sources import DEFAULT_MAX_BYTES, SourceOptions, read_sources, read_text_file, total_bytes
from .store.hbase_tables import shell_script
from .verify import verify

EXIT_NO_MATCH = 1
EXIT_SKIPPED = 3
EXIT_INTERRUPTED = 130
_SHOWN_SKIPS = 20

#: Library setting names -> the flag that sets them.
FLAGS = {
    "scheme": "--scheme",
    "top_n": "--top-n",
    "idf": "--idf",
    "features": "--features",
    "ngram": "--ngram",
    "seed": "--seed",
    "format": "--format",
    "max_bytes": "--max-bytes",
    "batch_size": "--batch-size",
    "workers": "--workers",
}

#: What to do about a skipped record, by kind.
PROBLEM_HINTS = {
    Problem.TOO_LARGE: "raise --max-bytes or split the document",
    Problem.NOT_UTF8: "re-encode it as UTF-8 (from GBK: iconv -f GB18030 -t UTF-8)",
    Problem.MISSING_FIELD: "set --id-field/--text-field",
    Problem.WRONG_TYPE: "make it a JSON string",
    Problem.MALFORMED: "fix or remove the record",
    Problem.BAD_ID: "ids are 1 to 1024 bytes of UTF-8 (hash longer ones, e.g. URLs)",
    Problem.UNREADABLE: "check its permissions",
}


def _hint(exc: ShdbError) -> str | None:
    if isinstance(exc, IndexNotFound):
        return f"create it with `shdb ingest --index {exc.url} PATH...`"
    if isinstance(exc, StoreUnavailable):
        return "is HBase running? (`scripts/hbase start`, see README); check the host and port"
    if isinstance(exc, ManifestMismatch):
        given = [FLAGS[n] for n, _, _ in exc.differences if n in FLAGS]
        if given:
            return (
                f"leave out {', '.join(given)} to use the index's own settings, "
                "or write to a new index"
            )
        if any(n in ENVIRONMENT for n, _, _ in exc.differences):
            return "the index was built by another version of shdb or jieba; rebuild it"
        return None
    if isinstance(exc, InvalidQuery) and exc.max_k is not None:
        return f"give -k between 0 and {exc.max_k}"
    if isinstance(exc, StoreError) and "corrupt" in str(exc):
        return "`shdb verify --repair` may fix it"
    return None


def _message(exc: ShdbError) -> str:
    if isinstance(exc, InvalidSetting) and exc.setting in FLAGS:
        return f"{FLAGS[exc.setting]}: {exc}"
    return str(exc)


# click's exception classes, reached through typer's public ones (newer typer
# vendors click, so `import click` would be another copy).
_UsageError: type[Exception] = typer.BadParameter.__mro__[1]
_ClickException: type[Exception] = typer.BadParameter.__mro__[2]


def _error(message: str, hint: str | None = None) -> None:
    typer.echo(f"shdb: error: {message}", err=True)
    if hint:
        typer.echo(f"hint: {hint}", err=True)


class _Group(TyperGroup):
    """The one place where errors become a message, a hint and an exit code."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (vendored by newer typer)
        try:
            return super().invoke(ctx)
        except ShdbError as exc:
            _error(_message(exc), _hint(exc))
            raise typer.Exit(exc.exit_code) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Usage errors in the same voice as the rest: ``shdb: error: ...``."""
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except _ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                typer.echo(ctx.get_help())
                code = 0
            else:
                hint = f"see `{ctx.command_path} --help`" if ctx is not None else None
                _error(exc.format_message(), hint if isinstance(exc, _UsageError) else None)  # type: ignore[attr-defined]
                code = exc.exit_code  # type: ignore[attr-defined]
        except typer.Abort:
            _error("interrupted")
            code = EXIT_INTERRUPTED
        if not standalone:
            return code
        sys.exit(code or 0)


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Near-duplicate text index: 64-bit SimHash, pigeonhole index on LMDB or HBase.",
)
err = Console(stderr=True, soft_wrap=True)

AS_BUILT = "Default: what the index was built with (a new index: {})."
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
SchemeOpt = Annotated[
    str | None,
    typer.Option(help="5x10 or 4x4. " + AS_BUILT.format(DEFAULT_SCHEME), show_default=False),
]
TopNOpt = Annotated[
    int | None,
    typer.Option("--top-n", help="Terms per fingerprint. " + AS_BUILT.format(16)),
]
IdfOpt = Annotated[
    str | None,
    typer.Option(
        "--idf",
        help="IDF table ('term idf' lines) instead of jieba's; kept inside the index. "
        + AS_BUILT.format("jieba's"),
    ),
]
FeaturesOpt = Annotated[
    str | None,
    typer.Option(
        help="words: jieba TF-IDF terms (long texts); chars: character n-grams "
        "(short texts). " + AS_BUILT.format("words"),
        show_default=False,
    ),
]
NgramOpt = Annotated[
    int | None, typer.Option(help="n-gram length with --features chars. " + AS_BUILT.format(2))
]
VersionOpt = Annotated[
    int | None,
    typer.Option(
        "--fingerprint-version",
        help="1: the original recipe; 2: NFKC text, no pure numbers or 1-letter ASCII "
        "terms (docs/quality.md). " + AS_BUILT.format(DEFAULT_VERSION),
        show_default=False,
    ),
]
FoldOpt = Annotated[
    str | None,
    typer.Option(
        help="t2s: fold Traditional to Simplified Chinese first (version 2, OpenCC). "
        + AS_BUILT.format("none"),
        show_default=False,
    ),
]
ProbesOpt = Annotated[
    int,
    typer.Option(
        help="Multi-probe: also search the text's fingerprint with its weakest bits "
        "flipped, this many flip sets (0..64; docs/quality.md). Needs text, not fingerprints.",
    ),
]
PathsArg = Annotated[list[str], typer.Argument(help="Files, folders, or - for stdin.")]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        help="auto|text|jsonl|csv|html (auto: by file suffix; a text file that starts "
        "like an HTML page is read as HTML: its visible text, no markup or navigation).",
    ),
]
IdFieldOpt = Annotated[str, typer.Option(help="JSONL/CSV field holding the id.")]
TextFieldOpt = Annotated[str, typer.Option(help="JSONL/CSV field holding the text.")]
MaxBytesOpt = Annotated[
    int, typer.Option(help="Largest document (JSONL line, CSV record, file) accepted, in bytes.")
]
WorkersOpt = Annotated[int, typer.Option(help="Fingerprinting processes.")]
FingerprintsOpt = Annotated[
    bool, typer.Option(help="Input lines are HEX or ID<TAB>HEX fingerprints, not documents.")
]
TextArg = Annotated[str | None, typer.Argument(help="The text.", show_default=False)]
FileOpt = Annotated[str | None, typer.Option("--file", "-f", help="Read the text from FILE.")]


def _wanted(
    top_n: int | None,
    idf: str | None,
    features: str | None,
    ngram: int | None,
    version: int | None = None,
    fold: str | None = None,
) -> dict[str, Any]:
    """The fingerprint settings given on the command line, and only those."""
    wanted: dict[str, Any] = {
        "top_n": top_n,
        "features": features,
        "ngram": ngram,
        "version": version,
        "fold": fold,
    }
    if idf is not None:
        wanted["idf"] = load_idf_file(idf).digest
    return {k: v for k, v in wanted.items() if v is not None}


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


def _print_skips(skipped: list[BadRecord]) -> None:
    for bad in skipped[:_SHOWN_SKIPS]:
        hint = PROBLEM_HINTS.get(bad.problem)
        line = f"  skipped {bad.where}: {bad.reason}" + (f"; {hint}" if hint else "")
        err.print(line, highlight=False, markup=False)
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
        OnError, typer.Option(help="skip: list bad records and go on; fail: stop at the first.")
    ] = OnError.SKIP,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    scheme: SchemeOpt = None,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
    probes: ProbesOpt = 0,
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
    if probes and fingerprints:
        raise typer.BadParameter(
            "--probes needs documents: the weak bits come from the text, and "
            "--fingerprints input has none"
        )
    options = IngestOptions(
        workers, store_text, k if dedup else None, on_error, batch_size, probes=probes
    )
    wanted = _wanted(top_n, idf, features, ngram, fingerprint_version, fold)
    total = None if fingerprints else total_bytes(paths)
    with (
        SimhashIndex.open(index, scheme=scheme, params=wanted) as ix,
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
            options,
            resume=resume,
            fingerprints=fingerprints,
            on_duplicate=on_duplicate,
            on_progress=on_progress,
        )
    _print_summary(summary, options.find_k)
    if summary.skipped:
        raise typer.Exit(EXIT_SKIPPED)


def _text_from(text: str | None, file: str | None, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    if file is not None and text is None:
        return read_text_file(file, max_bytes)
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
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    probes: ProbesOpt = 0,
) -> None:
    """Print near-copies held in the index: distance, fingerprint, id. Exit 1 if none."""
    if fingerprint is not None and (text, file) != (None, None):
        raise typer.BadParameter("give exactly one of TEXT, --file or --fingerprint")
    if fingerprint is not None and probes:
        raise typer.BadParameter(
            "--fingerprint cannot be probed: which bits are weak comes from the text's "
            "term weights; query with TEXT or --file to use --probes"
        )
    wanted = _wanted(top_n, idf, features, ngram)
    with SimhashIndex.open(index, create=False, params=wanted) as ix:
        if fingerprint is not None:
            matches = ix.query_fingerprint(codec.parse_fingerprint_hex(fingerprint), k)
        else:
            matches = ix.query(_text_from(text, file, max_bytes), k, probes=probes)
    _print_matches(matches, as_json)
    if not matches:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("fingerprint")
def fingerprint_cmd(
    text: TextArg = None,
    file: FileOpt = None,
    terms: Annotated[bool, typer.Option(help="Also print the weighted terms used.")] = False,
    index: Annotated[
        str | None,
        typer.Option("--index", "-i", help="Use this index's settings.", show_default=False),
    ] = None,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
) -> None:
    """Print the 64-bit SimHash of a text, as 16 hex digits."""
    wanted = _wanted(top_n, idf, features, ngram, fingerprint_version, fold)
    body = _text_from(text, file, max_bytes)
    if index is not None:
        with SimhashIndex.open(index, create=False, params=wanted) as ix:
            fp = ix.fingerprinter
    else:
        fp = Fingerprinter(FingerprintParams(**wanted))
    typer.echo(codec.fingerprint_to_hex(fp.fingerprint(body)))
    if terms:
        for term, weight in fp.weighted_terms(body):
            typer.echo(f"{weight:10.3f}  {term}")


@app.command("stats")
def stats_cmd(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Documents, index cells, disk use and the manifest of an index."""
    with SimhashIndex.open(index, create=False) as ix:
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
    with SimhashIndex.open(index, create=False) as ix:
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
    with SimhashIndex.open(index, create=False) as ix:
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
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    workers: WorkersOpt = 1,
    scheme: Annotated[str, typer.Option(help="5x10 or 4x4.")] = DEFAULT_SCHEME,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
) -> None:
    """All near-duplicate pairs (or clusters) within the input, in memory, no index."""
    from .dedup import clusters

    result = find_duplicates(
        paths,
        SourceOptions(fmt, id_field, text_field, max_bytes),
        k=k,
        scheme=get_scheme(scheme),
        params=FingerprintParams(**_wanted(top_n, idf, features, ngram, fingerprint_version, fold)),
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
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
) -> None:
    """Build an IDF table (ln N/df over jieba terms); use it with `ingest --idf`."""
    skipped: list[BadRecord] = []

    def texts() -> Iterator[str]:
        for r in read_sources(paths, SourceOptions(fmt, id_field, text_field, max_bytes)):
            if isinstance(r, Record):
                yield r.text
            else:
                skipped.append(r)

    table = build_idf(texts(), Fingerprinter())
    write_idf(table, output)
    err.print(f"wrote {len(table)} terms to {output}, skipped {len(skipped)}", highlight=False)
    _print_skips(skipped)
    if skipped:
        raise typer.Exit(EXIT_SKIPPED)


@app.command("schema")
def schema_cmd(
    prefix: Annotated[str, typer.Option(help="Table name prefix.")] = "shdb",
) -> None:
    """Print the hbase shell script that creates the tables exactly as schema/ defines."""
    typer.echo(shell_script(prefix), nl=False)


@app.callback()
def _root() -> None:
    """Near-duplicate text index (see `shdb COMMAND --help`)."""


def main() -> None:
    app()
