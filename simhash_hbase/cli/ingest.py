"""`shdb ingest`: index documents, report near-copies, resume after a stop."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from simhash_hbase.cli.options import (
    CreateOpt,
    FingerprintsOpt,
    IndexOpt,
    JsonOpt,
    KOpt,
    LimitOpt,
    PathsArg,
    ProbesOpt,
    RetainOpt,
    SchemeOpt,
    SimilarityOpt,
    StoreTextOpt,
    WaitOpt,
    WorkersOpt,
    fingerprint_settings,
    source_options,
    uses,
    window_options,
)
from simhash_hbase.cli.render import (
    EXIT_INTERRUPTED,
    EXIT_SKIPPED,
    dumps,
    echo_json,
    err,
    error,
    excluded,
    hint,
    message,
    new_index,
    note,
    predicate,
    print_skips,
    skip_json,
)
from simhash_hbase.errors import InvalidInput, ShdbError
from simhash_hbase.index.client import DEFAULT_K, SimhashIndex
from simhash_hbase.jobs.ingest import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FINGERPRINT_BATCH,
    MAX_BATCH_SIZE,
    IngestOptions,
    check_output,
    index_for_ingest,
    ingest,
)
from simhash_hbase.layout.window import Window
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    BadRecord,
    IngestSummary,
    Lookup,
    OnError,
    Record,
    Written,
)
from simhash_hbase.store import local_path
from simhash_hbase.text.readers import STDIN, SourceOptions, check_paths, total_bytes

if TYPE_CHECKING:
    from rich.progress import Progress

DocIdOpt = Annotated[
    str | None,
    typer.Option(
        "--id", metavar="ID", help="The id of a plain text read from stdin (- with text)."
    ),
]
ReportOpt = Annotated[
    str | None,
    typer.Option(
        metavar="FILE",
        help="Write one JSON line per new document that has near-copies to FILE "
        '(- = stdout): {"id", "matches" (its --limit nearest earlier documents), '
        '"total", "total_exact"}; a resumed run continues it.',
    ),
]
OnErrorOpt = Annotated[
    OnError,
    typer.Option(
        metavar="skip|fail", help="skip: list bad records and go on; fail: stop at the first."
    ),
]
BatchSizeOpt = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        help=f"Records per write batch (1..{MAX_BATCH_SIZE}; default {DEFAULT_BATCH_SIZE} "
        f"documents, {DEFAULT_FINGERPRINT_BATCH} with --fingerprints).",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        metavar="", help="Continue where an interrupted run of this input and options stopped."
    ),
]
DedupOpt = Annotated[
    bool,
    typer.Option(
        metavar="",
        help="Look up every new document before adding it (10 scans each); "
        "--no-dedup for a faster bulk load.",
    ),
]


class JsonlReport:
    """``ingest --report``: JSON lines, appended and synced after each batch's commit."""

    def __init__(self, path: str) -> None:
        self._stdout = path == "-"
        self._file: IO[bytes] = sys.stdout.buffer if self._stdout else open(path, "ab")  # noqa: SIM115

    def line(self, found: Lookup) -> str:
        """One line per new document that has near-copies: its nearest (bounded) and count."""
        return dumps({"id": found.doc_id, **found.matches.to_json()})

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


@uses(source=source_options, wanted=fingerprint_settings, window=window_options)
def ingest_cmd(
    paths: PathsArg,
    *,
    index: IndexOpt = None,
    create: CreateOpt = False,
    wait: WaitOpt = 0.0,
    source: SourceOptions,
    doc_id: DocIdOpt = None,
    workers: WorkersOpt = 1,
    store_text: StoreTextOpt = False,
    report: ReportOpt = None,
    k: KOpt = DEFAULT_K,
    on_error: OnErrorOpt = OnError.SKIP,
    scheme: SchemeOpt = None,
    wanted: dict[str, Any],
    probes: ProbesOpt = 0,
    batch_size: BatchSizeOpt = None,
    resume: ResumeOpt = True,
    fingerprints: FingerprintsOpt = False,
    dedup: DedupOpt = True,
    limit: LimitOpt = DEFAULT_LIMIT,
    similarity: SimilarityOpt = None,
    window: Window | None,
    retain: RetainOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Index documents from each PATH (a file, a folder, or - for stdin), reporting
    near-copies of documents already held (--within/--since/--until: those that
    arrived in that window; the run's own documents count as now).

    Exit 0, or 3 when records were skipped (each listed with file:line and why). An
    index folder that does not exist is created (and said); an hbase:// index only
    with --create.
    """
    opts = _checked_source(source, paths, doc_id, fingerprints, probes)
    options = IngestOptions(
        workers, store_text, k if dedup else None, on_error, batch_size, probes=probes, limit=limit
    )
    check_paths(paths, opts)
    if report is not None:
        check_output("--report", report, paths, local_path(index))
    create = create or local_path(index) is not None
    with index_for_ingest(
        index,
        scheme=scheme,
        params=wanted,
        create=create,
        wait=wait,
        similarity=similarity,
        retain=retain,
    ) as ix:
        if ix.created:
            new_index(ix.url)
        seen = ix.within(window)
        summary = _run(seen, paths, opts, options, report, resume=resume, fingerprints=fingerprints)
    if ix.created and not summary.written:
        note("nothing was added, so the new index was not kept")
    if as_json:
        echo_json(_summary_json(summary))
    rule = None if options.find_k is None else predicate(options.find_k, ix.lsh, options.probes)
    _print_summary(summary, rule, paths)
    if summary.skipped or summary.skipped_before:
        raise typer.Exit(EXIT_SKIPPED)


def _checked_source(
    source: SourceOptions, paths: list[str], doc_id: str | None, fingerprints: bool, probes: int
) -> SourceOptions:
    """``--id`` makes stdin one plain text with that id; a plain text needs one;
    fingerprint input has no text to probe."""
    if doc_id is not None and (paths != [STDIN] or source.format not in ("auto", "text")):
        raise InvalidInput("--id names a plain text read from stdin: give `-` and no other format")
    if doc_id is None and STDIN in paths and source.format == "text" and not fingerprints:
        raise InvalidInput("a plain text from stdin needs an id: give --id ID")
    if probes and fingerprints:
        raise InvalidInput(
            "--probes needs documents: the weak bits come from the text, and "
            "--fingerprints input has none"
        )
    if doc_id is None:
        return source
    return dataclasses.replace(source, format="text", stdin_id=doc_id)


def _run(
    ix: SimhashIndex,
    paths: list[str],
    opts: SourceOptions,
    options: IngestOptions,
    report: str | None,
    *,
    resume: bool,
    fingerprints: bool,
) -> IngestSummary:
    """The ingest job under a progress bar; Ctrl-C says what was kept and how to go on."""
    exclude = excluded(report)
    total = None if fingerprints else total_bytes(paths, exclude)
    sink = JsonlReport(report) if report is not None else None
    seen: dict[int, Written] = {}  # what each write pass (a pending batch, the rest) wrote

    def on_progress(s: IngestSummary) -> None:
        seen[id(s)] = s

    try:
        with _progress(total) as bar:
            return ingest(
                ix,
                paths,
                opts,
                options,
                report=sink,
                exclude=exclude,
                on_record=_counter(bar, total),
                on_progress=on_progress,
                resume=resume,
                fingerprints=fingerprints,
            )
    except KeyboardInterrupt:
        error(f"interrupted: {_kept(seen, paths, resume)}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:  # the ingest stopped with its report: not silent, as a query is
        note(f"stopped: the report's reader closed it (--report -); {_kept(seen, paths, resume)}")
        raise
    except ShdbError as exc:
        if not _done(seen).written:  # nothing written: the error alone says it (exit 2)
            raise
        error(message(exc), hint(exc))
        note(_kept(seen, paths, resume))
        raise typer.Exit(exc.exit_code) from None
    finally:
        if sink is not None:
            sink.close()


def _done(seen: dict[int, Written]) -> Written:
    done = Written()
    for part in seen.values():
        done.add(part)
    return done


def _kept(seen: dict[int, Written], paths: list[str], resume: bool) -> str:
    """What a run stopped midway wrote, and what a re-run does."""
    done = _done(seen)
    again = (
        "run the same command again to resume after them"
        if resume and STDIN not in paths
        else "a re-run starts over (re-adding a document is harmless)"
    )
    return (
        f"the {done.written} documents of the batches finished before it are saved "
        f"({done.added} added, {done.replaced} replaced, {done.unchanged} unchanged); {again}"
    )


def _counter(bar: Progress, total: int | None) -> Callable[[Record | BadRecord], None]:
    task = bar.add_task("ingest", total=total, docs=0)
    read = [0, 0]

    def on_record(record: Record | BadRecord) -> None:
        read[0] += record.size
        read[1] += 1
        bar.update(task, completed=read[0], docs=read[1])

    return on_record


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
        *columns, console=err(), transient=True, disable=not err().is_terminal, refresh_per_second=4
    )


def _summary_json(summary: IngestSummary) -> dict[str, Any]:
    return {
        "added": summary.added,
        "replaced": summary.replaced,
        "unchanged": summary.unchanged,
        "duplicates": summary.duplicates,
        "records": summary.records,
        "resumed_after": summary.resumed_after,
        "bytes_read": summary.bytes_read,
        "seconds": round(summary.seconds, 3),
        "skipped": [skip_json(b) for b in summary.skipped],
        "skipped_not_listed": summary.skipped_before,
    }


def _print_summary(summary: IngestSummary, rule: str | None, paths: list[str]) -> None:
    if summary.resumed_after:
        note(f"resumed: {summary.resumed_after} records were done by an earlier run")
    skipped = len(summary.skipped) + summary.skipped_before
    note(
        f"added {summary.added} documents, replaced {summary.replaced}, "
        f"unchanged {summary.unchanged} (already held); skipped {skipped} records; "
        f"{summary.bytes_read / 1e6:.1f} MB in {summary.seconds:.1f} s "
        f"({summary.docs_per_second:.0f} docs/s)"
    )
    if rule is not None and summary.added + summary.replaced:
        note(f"{summary.duplicates} of the new or changed documents have near-copies ({rule})")
    if rule is not None and summary.unchanged:
        where = " ".join(shlex.quote(p) for p in paths)
        note(
            f"the {summary.unchanged} documents already held unchanged are not reported again "
            f"(their near-copies were reported when they were added): `shdb dedup {where}` "
            "lists every near-copy pair in the input, `shdb query --file FILE` one document's"
        )
    print_skips(summary.skipped, summary.skipped_before)
