"""Looking after an index and its inputs: `shdb remove`, `verify`, `compact`, `migrate`,
`schema`, `idf build`."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import IO, Annotated, Any

import typer

from simhash_hbase.cli.options import (
    IndexOpt,
    JsonOpt,
    PathsArg,
    RepairOpt,
    RetainOpt,
    SampleOpt,
    ScanWorkersOpt,
    source_options,
    uses,
)
from simhash_hbase.cli.render import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NO_MATCH,
    EXIT_SKIPPED,
    echo_json,
    err,
    error,
    group,
    note,
    print_missing,
    print_skips,
    region_progress,
    skip_json,
    verify_report,
)
from simhash_hbase.errors import InvalidInput
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.write import REMOVE_BATCH
from simhash_hbase.jobs.idf import build_idf_file
from simhash_hbase.jobs.ingest import check_output
from simhash_hbase.jobs.migrate import migrate
from simhash_hbase.jobs.remove import RemoveSummary, chosen, id_lines, remove_ids
from simhash_hbase.jobs.schema import existing_schema
from simhash_hbase.jobs.verify import verify
from simhash_hbase.layout.plan import parse_count, plan
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme
from simhash_hbase.records import parse_time
from simhash_hbase.store.hbase.tables import Sizing, shell_script
from simhash_hbase.text.readers import SourceOptions, check_paths

PrefixOpt = Annotated[
    str, typer.Option(metavar="NAME", help="Table name prefix (NS:NAME: in HBase namespace NS).")
]


class Layout(str, Enum):
    rows = "rows"
    buckets = "buckets"


LayoutOpt = Annotated[
    Layout, typer.Option(help="The index table's layout: rows (Thrift1) or buckets (Thrift2).")
]
SchemeOpt = Annotated[
    str | None,
    typer.Option(metavar="NAME", help="The rows' scheme (default: the plan's, else 5x10)."),
]
PlanOpt = Annotated[
    str | None,
    typer.Option("--plan", metavar="N", help="Split as `shdb plan` plans for N documents."),
]
DocsSampleOpt = Annotated[
    str | None,
    typer.Option(metavar="FILE", help="With --plan: split the docs table at these ids' quantiles."),
]
SchemaIndexOpt = Annotated[
    str | None,
    typer.Option(
        "--index", "-i", metavar="URL", help="Describe this HBase index's tables as they are."
    ),
]
TableOutputOpt = Annotated[
    str, typer.Option("--output", "-o", metavar="FILE", help="Where to write the table.")
]


RemoveIdsArg = Annotated[list[str] | None, typer.Argument(metavar="ID", hidden=True)]
IdsFileOpt = Annotated[
    str | None,
    typer.Option(
        "--ids",
        metavar="FILE",
        help="Remove the ids of FILE, one a line (- = stdin), in batches.",
    ),
]
BeforeOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TIME",
        help="Remove the documents that arrived before TIME (RFC 3339 or seconds since "
        "the epoch); a document stored without a time is kept.",
    ),
]
IdPrefixOpt = Annotated[
    str | None,
    typer.Option(metavar="PREFIX", help="Remove the documents whose id starts with PREFIX."),
]

RemoveBatchOpt = Annotated[
    int,
    typer.Option(
        "--batch-size",
        metavar="N",
        min=1,
        help=f"Ids per batch of a bulk removal (one read, one write; default {REMOVE_BATCH}).",
    ),
]


def remove_cmd(
    doc_ids: RemoveIdsArg = None,
    ids: IdsFileOpt = None,
    before: BeforeOpt = None,
    id_prefix: IdPrefixOpt = None,
    batch_size: RemoveBatchOpt = REMOVE_BATCH,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete documents by ID, with all their index rows (exit 1 if an id was not
    there); or in bulk: --ids FILE, --before TIME, --id-prefix PREFIX (both: the
    documents that are both). A bulk run cut short is finished by running it again."""
    if (doc_ids is not None) + (ids is not None) + (
        before is not None or id_prefix is not None
    ) != 1:
        raise InvalidInput("give IDs, or --ids FILE, or --before and/or --id-prefix")
    with SimhashIndex.open(index, create=False) as ix:
        if doc_ids is not None:
            removed = set(ix.remove_many(doc_ids))
        elif ids is not None:
            with open_ids(ids) as f:
                summary = _removing(ix, id_lines(f, ids), None, batch_size)
        else:
            when = None if before is None else parse_time(before)
            picked = chosen(ix, before=when, id_prefix=id_prefix)
            summary = _removing(ix, picked, len(picked), batch_size)
    if doc_ids is None:
        if as_json:
            echo_json(dataclasses.asdict(summary))
        note(f"removed {summary.removed:,} of {summary.asked:,} (the rest were not held)")
        return
    missing = [d for d in doc_ids if d not in removed]
    if as_json:
        echo_json({"removed": [d for d in doc_ids if d in removed], "missing": missing})
    print_missing(missing)
    note(f"removed {len(doc_ids) - len(missing)} of {len(doc_ids)}")
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)


def _removing(
    ix: SimhashIndex, doc_ids: Iterable[str], total: int | None, batch_size: int
) -> RemoveSummary:
    """:func:`remove_ids` under a progress bar (stderr, a terminal only); Ctrl-C
    says what the batches written have removed and that a re-run finishes."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    done = RemoveSummary()
    bar = Progress(
        TextColumn("[bold]remove"),
        *([BarColumn()] if total else []),
        TextColumn("{task.fields[removed]:,} removed of {task.fields[asked]:,} ids"),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
        disable=not err().is_terminal,
    )

    def on_batch(summary: RemoveSummary) -> None:
        done.asked, done.removed = summary.asked, summary.removed
        bar.update(task, completed=summary.asked, asked=summary.asked, removed=summary.removed)

    task = bar.add_task("remove", total=total, asked=0, removed=0)
    try:
        with bar:
            return remove_ids(ix, doc_ids, batch_size=batch_size, on_batch=on_batch)
    except KeyboardInterrupt:
        error(
            f"interrupted: the batches written removed {done.removed:,} of the first "
            f"{done.asked:,} ids; run the same command again to remove the rest"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Count the expired documents; remove nothing.")
]


def expire_cmd(
    index: IndexOpt = None,
    dry_run: DryRunOpt = False,
    batch_size: RemoveBatchOpt = REMOVE_BATCH,
    as_json: JsonOpt = False,
) -> None:
    """Remove the documents of a retained index (created with --retain) that arrived
    longer than its retention ago, with all their index rows, oldest first, in
    batches (docs/lifecycle.md). A run cut short is finished by running it again."""
    with SimhashIndex.open(index, create=False) as ix:
        if dry_run:
            count = len(ix.due())
        else:
            count = ix.expire(
                batch_size=batch_size, on_batch=lambda n: note(f"expire: {n:,} removed so far")
            )
    if as_json:
        echo_json({"expired": count, "dry_run": dry_run})
    note(f"{count:,} expired documents" + (" held (--dry-run)" if dry_run else " removed"))


@contextmanager
def open_ids(name: str) -> Iterator[IO[str]]:
    """A file of ids (``-``: stdin), bytes that are not UTF-8 kept as such (named)."""
    if name == "-":
        f = io.TextIOWrapper(sys.stdin.buffer, "utf-8", "surrogateescape")
        try:
            yield f
        finally:
            f.detach()  # stdin stays open
        return
    try:
        f = open(name, encoding="utf-8", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InvalidInput(f"cannot read the ids in {name}: {exc.strerror or exc}") from None
    with f:
        yield f


def verify_cmd(
    index: IndexOpt = None,
    repair: RepairOpt = False,
    workers: ScanWorkersOpt = 1,
    sample: SampleOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that every document has all its index rows and no row is stale; with
    --sample, in a fraction of the regions, by point reads (docs/hbase.md, "verify
    and stats at a billion documents").

    Exit 0 when clean (or repaired), 1 when problems were found and left alone.
    """
    with SimhashIndex.open(index, create=False, readonly=not repair) as ix:
        report = verify(
            ix,
            repair=repair,
            workers=workers,
            sample=sample,
            progress=None if as_json else region_progress,  # --json: no chatter
        )
    verify_report(report, as_json)


OldIndexArg = Annotated[
    str, typer.Argument(metavar="OLD", help="The index to copy: a folder or an hbase:// URL.")
]
NewIndexArg = Annotated[
    str,
    typer.Argument(metavar="NEW", help="A new or empty folder, or a new hbase:// index URL."),
]


def migrate_cmd(old: OldIndexArg, new: NewIndexArg) -> None:
    """Copy an index into the current format of its store. Embedded: into a new
    folder in the compact layout (format 4): its settings and job state, then its
    documents, bulk loaded; a format 2 to 4 index copied this way is compacted
    (docs/embedded.md). HBase: into a new index (another prefix) in the layout a new
    index gets there, the bucket layout over Thrift2 (docs/hbase.md): its settings,
    then its documents. OLD is only read."""
    copied = migrate(old, new)
    note(f"copied {copied} documents into {new}")


def compact_cmd(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Merge an embedded index's fresh tier into its main one now, so that each
    query reads one tier (docs/embedded.md, "Two tiers"). Ingest merges by itself
    as the tier grows; run this after a backfill or a burst of ingest. Readers keep
    answering throughout; a compaction cut short leaves a valid index (run it again)."""
    with SimhashIndex.open(index, create=False) as ix:
        before = ix.stats()
        why = _not_compactable(before)
        moved = 0
        if why is None:
            moved = ix.compact(on_part=_merge_note)
        after = ix.stats()
    if as_json:
        echo_json({"moved": moved, "fresh_cells": after.get("fresh_cells", 0)})
    note(why or f"moved {moved:,} index cells into the main tier; queries read one tier")


def _not_compactable(stats: dict[str, Any]) -> str | None:
    """Why an index has nothing to compact (None: it may have)."""
    if stats.get("format") is None:
        return "an HBase index has one tier: there is nothing to compact"
    if "fresh_cells" not in stats:
        return (
            f"this embedded index is in format {stats['format']}, with one tier: nothing to "
            "compact (shdb migrate OLD NEW copies it into the current format)"
        )
    if not stats["fresh_cells"]:
        return "the fresh tier is empty: nothing to compact"
    return None


def _merge_note(done: int, parts: int, moved: int) -> None:
    note(f"compact: part {done} of {parts}, {moved:,} cells moved")


def schema_cmd(
    prefix: PrefixOpt = "shdb",
    layout: LayoutOpt = Layout.rows,
    scheme: SchemeOpt = None,
    plan_documents: PlanOpt = None,
    docs_sample: DocsSampleOpt = None,
    index: SchemaIndexOpt = None,
    retain: RetainOpt = None,
) -> None:
    """Print the hbase shell script that creates the tables exactly as
    schema/hbase-tables.json defines them (the repository's schema/ folder, installed
    as the package simhash_hbase.schema), with what their row keys hold;
    schema/hbase-tables.hbase is its output for the prefix shdb. --plan N: split as
    planned for N documents; --index URL: those of an existing HBase index. --retain:
    the TTL of a retained index's index and docs tables (then create the index with
    the same --retain)."""
    if index is not None:
        typer.echo(existing_schema(index), nl=False)
        return
    if docs_sample is not None and plan_documents is None:
        raise InvalidInput("--docs-sample splits the regions of --plan N: add --plan")
    expected = None if plan_documents is None else parse_count(plan_documents)
    if scheme is None:  # that of the plan, else the default
        best = plan(expected)[1] if expected is not None else None
        scheme = best.scheme if best is not None else DEFAULT_SCHEME
    get_scheme(scheme)  # a known one
    sizing, notes = Sizing.of(expected, docs_sample, scheme), []
    if expected is not None:
        regions = ", ".join(f"{t} {n}" for t, n in sizing.regions().items())
        notes = [f"regions planned for {expected:,} documents (shdb plan): {regions}"]
    buckets = layout == Layout.buckets
    script = shell_script(
        prefix, retain, buckets=buckets, scheme=scheme, splits=sizing.splits, notes=notes
    )
    typer.echo(script, nl=False)


idf_app = group("IDF tables for your own domain.")


@idf_app.command("build")
@uses(source=source_options)
def idf_build_cmd(
    paths: PathsArg, *, output: TableOutputOpt, source: SourceOptions, as_json: JsonOpt = False
) -> None:
    """Build an IDF table (ln N/df over jieba terms) from the texts at each PATH
    (records need a text field, no id); use it with `ingest --idf`.
    Exit 3 when records were skipped (listed), 2 when no text was read."""
    check_paths(paths, source)
    check_output("--output", output, paths)
    if output == "-":
        raise InvalidInput("--output -: the table goes to a file")
    terms, skipped = build_idf_file(paths, source, output)
    if as_json:
        echo_json({"output": output, "terms": terms, "skipped": [skip_json(b) for b in skipped]})
    elif terms is not None:
        note(f"wrote {terms} terms to {output}, skipped {len(skipped)} records")
    print_skips(skipped)
    if terms is None:
        why = f"all {len(skipped)} records were skipped, listed above" if skipped else "empty"
        error(f"no table written: the input has no text to count ({why})")
    if skipped:
        raise typer.Exit(EXIT_SKIPPED)
    if terms is None:
        raise typer.Exit(EXIT_ERROR)
