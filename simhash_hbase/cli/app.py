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
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.console import Console
from typer.core import TyperGroup

if TYPE_CHECKING:
    from rich.progress import Progress

from simhash_hbase.errors import (
    IndexNotFound,
    InvalidInput,
    InvalidQuery,
    InvalidSetting,
    ManifestMismatch,
    RejectedRecord,
    ShdbError,
    StoreError,
    StoreUnavailable,
)
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES, bound
from simhash_hbase.fingerprint.simhash import (
    DEFAULT_VERSION,
    Fingerprinter,
    FingerprintParams,
    build_idf,
    load_idf_file,
    write_idf,
)
from simhash_hbase.index.client import DEFAULT_K, SimhashIndex
from simhash_hbase.index.manifest import ENVIRONMENT
from simhash_hbase.jobs.ingest import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FINGERPRINT_BATCH,
    MAX_BATCH_SIZE,
    IngestOptions,
    check_output,
    find_duplicates,
    ingest,
)
from simhash_hbase.jobs.verify import verify
from simhash_hbase.layout.pairs import clusters_of, nearest_earlier
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadRecord,
    Document,
    IngestSummary,
    Lookup,
    Match,
    Matches,
    OnError,
    Problem,
    Record,
    check_limit,
    fingerprint_to_hex,
    parse_fingerprint_hex,
)
from simhash_hbase.store import local_path
from simhash_hbase.store.hbase_tables import shell_script
from simhash_hbase.text.readers import (
    DEFAULT_MAX_BYTES,
    MAX_MAX_BYTES,
    STDIN,
    SourceOptions,
    check_paths,
    read_sources,
    read_text_file,
    total_bytes,
)
from simhash_hbase.version import __version__

EXIT_NO_MATCH = 1
EXIT_SKIPPED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
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
    if isinstance(exc, RejectedRecord):
        hint = PROBLEM_HINTS.get(Problem(exc.problem))
        return f"{hint}; or --on-error skip to go on" if hint else "--on-error skip to go on"
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
        except BrokenPipeError:  # e.g. `shdb ... | head -1`: say so where it can be read
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the flush at exit must not fail
            _error("the output was closed before shdb finished (broken pipe)")
            raise typer.Exit(EXIT_BROKEN_PIPE) from None

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
    rich_markup_mode=None,  # plain help: no type noise, no boxes
    help="Near-duplicate text index: 64-bit SimHash, pigeonhole index on LMDB or HBase.",
)
err = Console(stderr=True, soft_wrap=True)

AS_BUILT = "Default: what the index was built with (a new index: {})."
IndexOpt = Annotated[
    str | None,
    typer.Option(
        "--index",
        "-i",
        metavar="URL",
        help="Index: a folder (embedded; file://FOLDER too) or hbase://HOST:PORT?prefix=NAME. "
        "Default: $SHDB_INDEX, then ./shdb-index.",
        show_default=False,
    ),
]
KOpt = Annotated[
    int, typer.Option("-k", metavar="K", help="Largest Hamming distance that counts as a match.")
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON instead of a table.")]
SchemeOpt = Annotated[
    str | None,
    typer.Option(
        metavar="5x10|4x4",
        help="Index scheme. " + AS_BUILT.format(DEFAULT_SCHEME),
        show_default=False,
    ),
]
TopNOpt = Annotated[
    int | None,
    typer.Option("--top-n", metavar="N", help="Terms per fingerprint. " + AS_BUILT.format(16)),
]
IdfOpt = Annotated[
    str | None,
    typer.Option(
        "--idf",
        metavar="FILE",
        help="IDF table ('term idf' lines) instead of jieba's; kept inside the index. "
        + AS_BUILT.format("jieba's"),
    ),
]
FeaturesOpt = Annotated[
    str | None,
    typer.Option(
        metavar="words|chars",
        help="words: jieba TF-IDF terms; chars: character n-grams by count, which "
        "recalled less than words on short texts too (docs/quality.md). "
        + AS_BUILT.format("words"),
        show_default=False,
    ),
]
NgramOpt = Annotated[
    int | None,
    typer.Option(metavar="N", help="n-gram length with --features chars. " + AS_BUILT.format(2)),
]
VersionOpt = Annotated[
    int | None,
    typer.Option(
        "--fingerprint-version",
        metavar="1|2",
        help="1: the original recipe; 2: NFKC text, no pure numbers or 1-letter ASCII "
        "terms, weights count^1.75 x IDF capped at a fifth of the total (docs/quality.md). "
        + AS_BUILT.format(DEFAULT_VERSION),
        show_default=False,
    ),
]
FoldOpt = Annotated[
    str | None,
    typer.Option(
        metavar="none|t2s",
        help="t2s: fold Traditional to Simplified Chinese first (version 2, OpenCC). "
        + AS_BUILT.format("none"),
        show_default=False,
    ),
]
ProbesOpt = Annotated[
    int,
    typer.Option(
        metavar="P",
        help="Multi-probe: also search the text's fingerprint with its weakest bits "
        "flipped, P flip sets (0..64; docs/quality.md). Needs text, not fingerprints.",
    ),
]
LimitOpt = Annotated[
    int,
    typer.Option(
        "--limit",
        metavar="N",
        help=f"Matches shown per document (1..{MAX_LIMIT:,}), nearest first; all are counted "
        "(exactly, or as a lower bound said as '>= N' when a hot index row was read "
        "only as far as the shown matches needed).",
    ),
]
QueryProbesOpt = Annotated[
    int | None,
    typer.Option(
        metavar="P",
        help=f"Multi-probe: also search the text's fingerprint with its weakest bits "
        f"flipped, P flip sets (0..64; default {DEFAULT_QUERY_PROBES} for text, the most "
        "recall within 4x the scans in docs/quality.md; hits then lie within k+3). "
        "0 is the exact k-search; --fingerprint cannot probe.",
    ),
]
PathsArg = Annotated[list[str], typer.Argument(metavar="PATH", hidden=True)]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="auto|text|jsonl|csv|html (auto: by file suffix; a text file that starts "
        "like an HTML page is read as HTML: its visible text, no markup or navigation).",
    ),
]
IdFieldOpt = Annotated[str, typer.Option(metavar="NAME", help="JSONL/CSV field holding the id.")]
TextFieldOpt = Annotated[
    str, typer.Option(metavar="NAME", help="JSONL/CSV field holding the text.")
]
MaxBytesOpt = Annotated[
    int,
    typer.Option(
        metavar="BYTES",
        help=f"Largest document (JSONL line, CSV record, file) accepted (at most {MAX_MAX_BYTES}).",
    ),
]
WorkersOpt = Annotated[int, typer.Option(metavar="N", help="Fingerprinting processes.")]
FingerprintsOpt = Annotated[
    bool,
    typer.Option(metavar="", help="Input lines are HEX or ID<TAB>HEX fingerprints, not documents."),
]
TextArg = Annotated[str | None, typer.Argument(metavar="TEXT", hidden=True)]
FileOpt = Annotated[
    str | None,
    typer.Option("--file", "-f", metavar="FILE", help="Read the text from FILE (- = stdin)."),
]


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


def _check_output(flag: str, path: str | None, inputs: Sequence[str] = ()) -> None:
    """Before any work: an output is a file (or -) in an existing folder, never an input."""
    if path is not None:
        check_output(flag, path, inputs)


@contextmanager
def _open_output(path: str) -> Iterator[TextIO]:
    if path == "-":
        yield sys.stdout
    else:
        with open(path, "w", encoding="utf-8") as f:
            yield f


def _predicate(k: int, lsh: MinHashParams | None, probes: int = 0) -> str:
    """The match rule in words, for summaries (layout.nets.is_match; docs/nets.md)."""
    near = f"k<={k}"
    if probes:
        near = f"k<={k}, or distance<={bound(k, probes)} with one of {probes} probes within {k}"
    if lsh is None:
        return near
    return f"{near} (and similarity>={lsh.floor}), or similarity>={lsh.threshold}"


class _JsonlReport:
    """``ingest --report``: JSON lines, appended and synced after each batch's commit."""

    def __init__(self, path: str) -> None:
        self._stdout = path == "-"
        self._file: IO[bytes] = sys.stdout.buffer if self._stdout else open(path, "ab")  # noqa: SIM115

    def line(self, found: Lookup) -> str:
        """One line per new document that has near-copies: its nearest (bounded) and count."""
        return json.dumps({"id": found.doc_id, **found.matches.to_json()}, ensure_ascii=False)

    def append(self, lines: Sequence[str]) -> int:
        if lines:
            self._file.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
            self._file.flush()
            if not self._stdout:
                os.fsync(self._file.fileno())
        return self.size()

    def size(self) -> int:
        return 0 if self._stdout else self._file.seek(0, os.SEEK_END)

    def truncate(self, size: int) -> None:
        if not self._stdout and size <= self.size():
            self._file.truncate(size)

    def close(self) -> None:
        if self._stdout:
            self._file.flush()
        else:
            self._file.close()


def _progress(total: int | None) -> Progress:
    # Imported here: a query's start-up does not pay for rich's progress machinery.
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [TextColumn("[bold]ingest")]
    if total:
        columns += [BarColumn(), DownloadColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    columns += [TextColumn("{task.fields[docs]} records read"), TimeElapsedColumn()]
    return Progress(
        *columns, console=err, transient=True, disable=not err.is_terminal, refresh_per_second=4
    )


def _summary_json(summary: IngestSummary) -> dict[str, Any]:
    return {
        "added": summary.added,
        "duplicates": summary.duplicates,
        "records": summary.records,
        "resumed_after": summary.resumed_after,
        "bytes_read": summary.bytes_read,
        "seconds": round(summary.seconds, 3),
        "skipped": [_skip_json(b) for b in summary.skipped],
        "skipped_not_listed": summary.skipped_before,
    }


def _skip_json(bad: BadRecord) -> dict[str, Any]:
    return {"where": bad.where, "reason": bad.reason, "problem": bad.problem.value}


def _print_summary(summary: IngestSummary, k: int | None, rule: str = "") -> None:
    if summary.resumed_after:
        err.print(
            f"resumed: {summary.resumed_after} records were done by an earlier run", highlight=False
        )
    found = f", {summary.duplicates} near-duplicates ({rule or f'k<={k}'})" if k is not None else ""
    skipped = len(summary.skipped) + summary.skipped_before
    err.print(
        f"added {summary.added} documents{found}, skipped {skipped}, "
        f"{summary.bytes_read / 1e6:.1f} MB in {summary.seconds:.1f} s "
        f"({summary.docs_per_second:.0f} docs/s)",
        highlight=False,
    )
    _print_skips(summary.skipped, summary.skipped_before)


def _print_skips(skipped: list[BadRecord], unlisted: int = 0) -> None:
    for bad in skipped[:_SHOWN_SKIPS]:
        hint = PROBLEM_HINTS.get(bad.problem)
        line = f"  skipped {bad.where}: {bad.reason}" + (f"; {hint}" if hint else "")
        err.print(line, highlight=False, markup=False)
    more = len(skipped) - _SHOWN_SKIPS + unlisted
    if more > 0:
        err.print(f"  ... and {more} more skipped records (--json lists them)", highlight=False)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Human output: tab-separated columns under a header line."""
    typer.echo("\t".join(header))
    for row in rows:
        typer.echo("\t".join(str(cell) for cell in row))


@app.command("ingest")
def ingest_cmd(
    paths: PathsArg,
    index: IndexOpt = None,
    fmt: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    doc_id: Annotated[
        str | None,
        typer.Option(
            "--id", metavar="ID", help="The id of a plain text read from stdin (- with text)."
        ),
    ] = None,
    workers: WorkersOpt = 1,
    store_text: Annotated[
        bool, typer.Option(metavar="", help="Keep the text in the docs table.")
    ] = False,
    report: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="Write one JSON line per new document that has near-copies to FILE "
            '(- = stdout): {"id", "matches" (its --limit nearest earlier documents), '
            '"total", "total_exact"}; a resumed run continues it.',
        ),
    ] = None,
    k: KOpt = DEFAULT_K,
    on_error: Annotated[
        OnError,
        typer.Option(
            metavar="skip|fail", help="skip: list bad records and go on; fail: stop at the first."
        ),
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
    batch_size: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help=f"Records per write batch (1..{MAX_BATCH_SIZE}; default {DEFAULT_BATCH_SIZE} "
            f"documents, {DEFAULT_FINGERPRINT_BATCH} with --fingerprints).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            metavar="", help="Continue where an interrupted run of this input and options stopped."
        ),
    ] = True,
    fingerprints: FingerprintsOpt = False,
    dedup: Annotated[
        bool,
        typer.Option(
            metavar="",
            help="Look up every new document before adding it (10 scans each); "
            "--no-dedup for a faster bulk load.",
        ),
    ] = True,
    limit: LimitOpt = DEFAULT_LIMIT,
    as_json: JsonOpt = False,
) -> None:
    """Index documents from each PATH (a file, a folder, or - for stdin), reporting
    near-copies of documents already held.

    Exit 0, or 3 when records were skipped (each listed with file:line and why).
    """
    if doc_id is not None and (paths != [STDIN] or fmt not in ("auto", "text")):
        raise InvalidInput("--id names a plain text read from stdin: give `-` and no other format")
    if doc_id is None and STDIN in paths and fmt == "text" and not fingerprints:
        raise InvalidInput("a plain text from stdin needs an id: give --id ID")
    opts = SourceOptions("text" if doc_id else fmt, id_field, text_field, max_bytes, doc_id)
    if probes and fingerprints:
        raise InvalidInput(
            "--probes needs documents: the weak bits come from the text, and "
            "--fingerprints input has none"
        )
    options = IngestOptions(
        workers, store_text, k if dedup else None, on_error, batch_size, probes=probes, limit=limit
    )
    wanted = _wanted(top_n, idf, features, ngram, fingerprint_version, fold)
    check_paths(paths)
    if report is not None:
        check_output("--report", report, paths, local_path(index))
    exclude = [Path(report)] if report not in (None, "-") else []
    total = None if fingerprints else total_bytes(paths, exclude)
    sink = _JsonlReport(report) if report is not None else None
    seen = IngestSummary()
    try:
        with SimhashIndex.open(index, scheme=scheme, params=wanted) as ix, _progress(total) as bar:
            task = bar.add_task("ingest", total=total, docs=0)
            read = [0, 0]

            def on_record(record: Record | BadRecord) -> None:
                read[0] += record.size
                read[1] += 1
                bar.update(task, completed=read[0], docs=read[1])

            def on_progress(s: IngestSummary) -> None:
                seen.added, seen.records = s.added, s.records

            summary = ingest(
                ix,
                paths,
                opts,
                options,
                resume=resume,
                fingerprints=fingerprints,
                report=sink,
                exclude=exclude,
                on_record=on_record,
                on_progress=on_progress,
            )
    except KeyboardInterrupt:
        again = (
            "run the same command again to resume"
            if resume and STDIN not in paths
            else ("a re-run starts over (re-adding a document is harmless)")
        )
        _error(
            f"interrupted: the {seen.added} documents added in the batches finished before it "
            f"are saved; {again}"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if sink is not None:
            sink.close()
    if as_json:
        typer.echo(json.dumps(_summary_json(summary), ensure_ascii=False))
    rule = "" if options.find_k is None else _predicate(options.find_k, ix.lsh, options.probes)
    _print_summary(summary, options.find_k, rule)
    if summary.skipped or summary.skipped_before:
        raise typer.Exit(EXIT_SKIPPED)


def _text_from(text: str | None, file: str | None, max_bytes: int) -> str:
    if file is not None and text is None:
        return read_text_file(file, max_bytes)
    if text is not None and file is None:
        return text
    raise InvalidInput("give exactly one of TEXT or --file (- reads stdin)")


@app.command("query")
def query_cmd(
    text: TextArg = None,
    file: FileOpt = None,
    fingerprint: Annotated[
        str | None,
        typer.Option(metavar="HEX", help="Look up a 64-bit hex fingerprint instead of text."),
    ] = None,
    k: KOpt = DEFAULT_K,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    probes: QueryProbesOpt = None,
    limit: LimitOpt = DEFAULT_LIMIT,
) -> None:
    """Near-copies of TEXT (or --file, --fingerprint) held in the index, nearest
    first: a table of distance, fingerprint and id, at most --limit rows, and how
    many there are in all (--json: {"matches": [...], "total", "total_exact"}).
    Exit 1 if none."""
    if fingerprint is not None and (text, file) != (None, None):
        raise InvalidInput("give exactly one of TEXT, --file or --fingerprint")
    check_limit(limit)
    if fingerprint is not None and probes:
        raise InvalidInput(
            "--fingerprint cannot be probed: which bits are weak comes from the text's "
            "term weights; query with TEXT or --file to use --probes"
        )
    wanted = _wanted(top_n, idf, features, ngram)
    query_fp = parse_fingerprint_hex(fingerprint) if fingerprint is not None else None
    body = _text_from(text, file, max_bytes) if query_fp is None else ""
    with SimhashIndex.open(index, readonly=True, params=wanted) as ix:
        probe = 0 if query_fp is not None else DEFAULT_QUERY_PROBES if probes is None else probes
        if query_fp is not None:
            matches = ix.query_fingerprint(query_fp, k, limit=limit)
        else:
            matches = ix.query(body, k, probes=probe, limit=limit)
    if as_json:
        typer.echo(json.dumps(matches.to_json(), ensure_ascii=False))
    elif matches:
        _table(
            ("distance", "similarity", "fingerprint", "id"),
            (
                (
                    m.distance,
                    "-" if m.similarity is None else m.similarity,
                    fingerprint_to_hex(m.fingerprint),
                    m.doc_id,
                )
                for m in matches
            ),
        )
        more = "" if matches.total_exact else ">= "
        rule = _predicate(k, ix.lsh if query_fp is None else None, probe)
        shown = f"{len(matches)} shown of {more}{matches.total} matches ({rule})"
        err.print(shown, highlight=False)
    if not matches:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("fingerprint")
def fingerprint_cmd(
    text: TextArg = None,
    file: FileOpt = None,
    terms: Annotated[
        bool, typer.Option(metavar="", help="Also print the weighted terms used.")
    ] = False,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
) -> None:
    """The 64-bit SimHash of TEXT (or --file) as 16 hex digits, made as the index
    (-i) or the options say (default: a new index's settings)."""
    wanted = _wanted(top_n, idf, features, ngram, fingerprint_version, fold)
    body = _text_from(text, file, max_bytes)
    if index is not None:
        with SimhashIndex.open(index, readonly=True, params=wanted) as ix:
            fp = ix.fingerprinter
    else:
        fp = Fingerprinter(FingerprintParams(**wanted))
    value = fingerprint_to_hex(fp.fingerprint(body))
    weighted = fp.weighted_terms(body) if terms else []
    if as_json:
        row: dict[str, Any] = {"fingerprint": value}
        if terms:
            row["terms"] = [{"term": t, "weight": round(w, 6)} for t, w in weighted]
        typer.echo(json.dumps(row, ensure_ascii=False))
        return
    typer.echo(value)
    if terms:
        _table(("weight", "term"), ((f"{w:.3f}", t) for t, w in weighted))


@app.command("stats")
def stats_cmd(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Documents, index cells, disk use and the settings of an index."""
    with SimhashIndex.open(index, readonly=True) as ix:
        stats = ix.stats()
    if as_json:
        typer.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    flat = {k: v for k, v in stats.items() if not isinstance(v, dict)}
    flat.update({f"fingerprint.{k}": v for k, v in stats.get("fingerprint", {}).items()})
    _table(("stat", "value"), flat.items())


def _doc_json(doc: Document) -> dict[str, Any]:
    return {
        "id": doc.doc_id,
        "fingerprint": fingerprint_to_hex(doc.fingerprint),
        "text": doc.text,
        "meta": doc.meta,
    }


@app.command("get")
def get_cmd(
    doc_ids: Annotated[list[str], typer.Argument(metavar="ID", hidden=True)],
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stored documents by ID: a table of id, fingerprint, text and meta (--json: one
    JSON object per line). Exit 1 if an id is not held."""
    with SimhashIndex.open(index, readonly=True) as ix:
        found = ix.get_many(doc_ids)
    docs = [found[d] for d in doc_ids if d in found]
    if as_json:
        for doc in docs:
            typer.echo(json.dumps(_doc_json(doc), ensure_ascii=False))
    elif docs:
        _table(
            ("id", "fingerprint", "text", "meta"),
            (
                (
                    d.doc_id,
                    fingerprint_to_hex(d.fingerprint),
                    json.dumps(d.text, ensure_ascii=False),
                    json.dumps(d.meta, ensure_ascii=False),
                )
                for d in docs
            ),
        )
    missing = [d for d in doc_ids if d not in found]
    for doc_id in missing:
        err.print(f"not found: {doc_id}", markup=False, highlight=False)
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("remove")
def remove_cmd(
    doc_ids: Annotated[list[str], typer.Argument(metavar="ID", hidden=True)],
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete documents by ID, with all their index rows. Exit 1 if an id was not there."""
    with SimhashIndex.open(index, create=False) as ix:
        missing = [doc_id for doc_id in doc_ids if not ix.remove(doc_id)]
    if as_json:
        removed = [d for d in doc_ids if d not in missing]
        typer.echo(json.dumps({"removed": removed, "missing": missing}, ensure_ascii=False))
    for doc_id in missing:
        err.print(f"not found: {doc_id}", markup=False, highlight=False)
    err.print(f"removed {len(doc_ids) - len(missing)} of {len(doc_ids)}", highlight=False)
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("verify")
def verify_cmd(
    index: IndexOpt = None,
    repair: Annotated[
        bool, typer.Option(metavar="", help="Fix what is found and report counts.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check that every document has all its index rows and no row is stale.

    Exit 0 when clean (or repaired), 1 when problems were found and left alone.
    """
    with SimhashIndex.open(index, readonly=not repair) as ix:
        report = verify(ix, repair=repair)
    fields = {k: v for k, v in dataclasses.asdict(report).items() if k != "examples"}
    fields["clean"] = report.clean
    if as_json:
        typer.echo(json.dumps({**fields, "examples": report.examples}, ensure_ascii=False))
    else:
        _table(("check", "value"), fields.items())
        for example in report.examples:
            err.print(f"  {example}", markup=False, highlight=False)
    if not report.clean and not report.repaired:
        raise typer.Exit(EXIT_NO_MATCH)


@app.command("dedup")
def dedup_cmd(
    paths: PathsArg,
    fingerprints: FingerprintsOpt = False,
    k: KOpt = DEFAULT_K,
    as_clusters: Annotated[
        bool,
        typer.Option(
            "--clusters",
            metavar="",
            help="Print the groups of near-copies (connected components of all pairs, "
            "exact), one JSON list of ids per group, instead of each document's matches.",
        ),
    ] = False,
    limit: LimitOpt = DEFAULT_LIMIT,
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE", help="FILE, or - for stdout.")
    ] = "-",
    fmt: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    text_field: TextFieldOpt = "text",
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    workers: WorkersOpt = 1,
    scheme: Annotated[str, typer.Option(metavar="5x10|4x4", help="Pigeonhole scheme.")] = (
        DEFAULT_SCHEME
    ),
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Near-duplicates within each PATH (file, folder, - for stdin), in memory, no
    index: one JSON line per input that has near-copies before it,
    {"id", "matches" (its --limit nearest earlier inputs), "total", "total_exact"}
    (--clusters: one JSON list of ids per group). Texts are matched by both nets,
    as an index does (docs/nets.md). Memory: an id, a fingerprint and a sketch
    per input, whatever the number of copies."""
    check_limit(limit)
    opts = SourceOptions(fmt, id_field, text_field, max_bytes)
    params = FingerprintParams(**_wanted(top_n, idf, features, ngram, fingerprint_version, fold))
    check_paths(paths)
    _check_output("--output", output, paths)
    exclude = [Path(output)] if output != "-" else []
    result = find_duplicates(
        paths,
        opts,
        k=k,
        scheme=get_scheme(scheme),
        params=params,
        workers=workers,
        fingerprints=fingerprints,
        exclude=exclude,
        lsh=MinHashParams(),
    )
    ids, graph = result.ids, result.graph
    copies = 0
    with _open_output(output) as out:
        if as_clusters:
            for group in clusters_of(graph):
                out.write(json.dumps([ids[i] for i in group], ensure_ascii=False) + "\n")
        else:
            for found in nearest_earlier(graph, ids, limit):
                copies += 1
                matches = Matches(
                    (
                        Match(ids[i], int(graph.unique[graph.inverse[i]]), d, sim)
                        for i, d, sim in found.near
                    ),
                    found.total,
                )
                line = {"id": ids[found.j], **matches.to_json()}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    pairs = graph.pair_count()
    if as_json:
        summary = {
            "inputs": len(ids),
            "pairs": pairs,
            "skipped": [_skip_json(b) for b in result.skipped],
        }
        if not as_clusters:
            summary["with_near_copies"] = copies
        err.print(json.dumps(summary, ensure_ascii=False), markup=False, highlight=False)
    else:
        listed = "" if as_clusters else f", {copies} of them with earlier near-copies"
        err.print(
            f"{len(ids)} inputs{listed}, {pairs} near-duplicate pairs "
            f"({_predicate(k, None if fingerprints else MinHashParams())}), "
            f"skipped {len(result.skipped)}",
            highlight=False,
        )
        _print_skips(result.skipped)
    if result.skipped:
        raise typer.Exit(EXIT_SKIPPED)


idf_app = typer.Typer(
    cls=_Group, no_args_is_help=True, rich_markup_mode=None, help="IDF tables for your own domain."
)
app.add_typer(idf_app, name="idf")


@idf_app.command("build")
def idf_build_cmd(
    paths: PathsArg,
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE", help="Where to write the table.")
    ],
    fmt: FormatOpt = "auto",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = "id",
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
) -> None:
    """Build an IDF table (ln N/df over jieba terms) from the corpus at each PATH;
    use it with `ingest --idf`.
    Exit 3 when records were skipped (listed)."""
    opts = SourceOptions(fmt, id_field, text_field, max_bytes)
    check_paths(paths)
    _check_output("--output", output, paths)
    if output == "-":
        raise InvalidInput("--output -: the table goes to a file")
    skipped: list[BadRecord] = []

    def texts() -> Iterator[str]:
        for r in read_sources(paths, opts, exclude=[Path(output)]):
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
    prefix: Annotated[str, typer.Option(metavar="NAME", help="Table name prefix.")] = "shdb",
) -> None:
    """Print the hbase shell script that creates the tables exactly as schema/ defines."""
    typer.echo(shell_script(prefix), nl=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"shdb (simhash-hbase) {__version__}")
        raise typer.Exit()


from simhash_hbase.spark.cli import spark_app  # noqa: E402  (imported last: it reuses the options above)

app.add_typer(spark_app, name="spark")

from simhash_hbase.cli.serve import serve_cmd  # noqa: E402

app.command("serve")(serve_cmd)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", metavar="", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Near-duplicate text index (see `shdb COMMAND --help`)."""


def main() -> None:
    app()
