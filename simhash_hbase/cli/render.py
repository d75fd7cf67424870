"""What `shdb` prints: messages, hints, exit codes, tables and JSON rows.

This module owns every hint and every exit code; the library below speaks
neutrally and carries structured details in its exceptions.

Exit codes (docs/cli.md, the README): 0 done; 1 nothing found (`query` found
nothing, `get`/`remove` missed an id, `verify` found problems); 2 error (bad
usage or setting, store down, a worker died, bad input with --on-error fail;
one after some records were written says what was saved and that a re-run
resumes); 3 finished but skipped records (listed); 130 interrupted (Ctrl-C);
141 the output was closed early.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import typer
from typer.core import TyperGroup

from simhash_hbase.errors import (
    IndexNotFound,
    InvalidQuery,
    InvalidSetting,
    ManifestMismatch,
    NotAuthenticated,
    RejectedRecord,
    ShdbError,
    StoreError,
    StoreUnavailable,
    WorkerDied,
)
from simhash_hbase.fingerprint.probes import bound
from simhash_hbase.records import BadRecord, Problem

if TYPE_CHECKING:
    from rich.console import Console

    from simhash_hbase.fingerprint.minhash import MinHashParams
    from simhash_hbase.jobs.verify import VerifyReport

EXIT_NO_MATCH = 1
EXIT_ERROR = 2  # ShdbError.exit_code
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
    "columns": "--columns",
    "max_bytes": "--max-bytes",
    "batch_size": "--batch-size",
    "workers": "--workers",
    "sample": "--sample",
}

#: What to do about a skipped record, by kind.
PROBLEM_HINTS = {
    Problem.TOO_LARGE: "raise --max-bytes or split the document",
    # no charset named: a guess would "succeed" into mojibake (Big5 read as GB18030)
    Problem.NOT_UTF8: "re-encode it as UTF-8 from the charset it is in "
    "(iconv -f THAT-CHARSET -t UTF-8), or declare that charset in the page's <meta>",
    Problem.MISSING_FIELD: "set --id-field/--text-field",
    Problem.WRONG_TYPE: "make it a JSON string",
    Problem.MALFORMED: "fix or remove the record",
    Problem.BAD_ID: "fix or remove the record",  # the reason says what an id must be
    Problem.UNREADABLE: "check its permissions, or the disk or mount it is on",
    Problem.SYMLINK: "--follow-symlinks reads what it leads to",
}
#: What an interrupted command kept, and what to do, by command (ingest says its own).
INTERRUPT_HINTS = {
    "compact": "the parts merged before it are kept (the index is valid); "
    "run `shdb compact` again to finish",
    "migrate": "OLD is unchanged and a NEW folder as it was before: run `shdb migrate` "
    "again (to HBase: with a new prefix)",
}
#: A malformed line on stdin is most often a plain text read as JSON lines.
_STDIN_TEXT_HINT = "stdin is read as JSON lines; for one plain text give --id ID"


@cache
def err() -> Console:
    """rich's console on stderr (notes, progress), made on first use: a one-shot
    command that prints neither does without importing rich."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def hint(exc: ShdbError) -> str | None:
    """What the user can do about ``exc``, in flag names."""
    if isinstance(exc, IndexNotFound):
        return (
            f"is the name right? A new index: `shdb ingest --index {exc.url} PATH...` "
            "(with --create for an hbase:// URL), or `shdb serve --create`"
        )
    if isinstance(exc, NotAuthenticated):
        return (
            "kinit, then try again; sasl=, service= and principal= in the index URL must "
            'match the gateway (docs/hbase.md "Kerberos")'
        )
    if isinstance(exc, StoreUnavailable) and exc.answered is not None:
        return "give the port of an HBase Thrift gateway: hbase://HOST:9091 (Thrift2) or :9090"
    if isinstance(exc, StoreUnavailable):
        return (
            "is HBase running? (`scripts/hbase start`: Thrift at 9090/9091, or "
            "`scripts/hbase cluster start`: 9790/9791; docs/hbase.md); check the host and port"
        )
    if isinstance(exc, ManifestMismatch):
        return _mismatch_hint(exc)
    if isinstance(exc, RejectedRecord):
        what = PROBLEM_HINTS.get(Problem(exc.problem))
        return f"{what}; or --on-error skip to go on" if what else "--on-error skip to go on"
    if isinstance(exc, InvalidQuery) and exc.max_k is not None:
        return f"give -k between 0 and {exc.max_k}"
    if isinstance(exc, StoreError) and "corrupt" in str(exc):
        return "`shdb verify --repair` may fix it"
    if isinstance(exc, WorkerDied):
        return (
            "run the same command again to resume; if it dies at the same document again, "
            "remove or split that document (or lower --max-bytes), or use --workers 1"
        )
    return None


def _mismatch_hint(exc: ManifestMismatch) -> str | None:
    given = [FLAGS[n] for n, _, _ in exc.differences if n in FLAGS]
    if given:
        return (
            f"leave out {', '.join(given)} to use the index's own settings, or write to a new index"
        )
    from simhash_hbase.index.manifest import ENVIRONMENT  # only on this error

    if any(n in ENVIRONMENT for n, _, _ in exc.differences):
        return "the index was built by another version of shdb or jieba; rebuild it"
    return None


def message(exc: ShdbError) -> str:
    """The error text, prefixed with the flag that set a bad setting."""
    if isinstance(exc, InvalidSetting) and exc.setting in FLAGS:
        return f"{FLAGS[exc.setting]}: {exc}"
    return str(exc)


def error(text: str, advice: str | None = None) -> None:
    """``shdb: error: ...`` (and a hint line) on stderr."""
    typer.echo(f"shdb: error: {text}", err=True)
    if advice:
        typer.echo(f"hint: {advice}", err=True)


# click's exception classes, reached through typer's public ones (newer typer
# vendors click, so `import click` would be another copy).
_UsageError: type[Exception] = typer.BadParameter.__mro__[1]
_ClickException: type[Exception] = typer.BadParameter.__mro__[2]


class Group(TyperGroup):
    """The one place where errors become a message, a hint and an exit code."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (vendored by newer typer)
        try:
            return super().invoke(ctx)
        except ShdbError as exc:
            error(message(exc), hint(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:  # typer would exit 130 in silence
            error("interrupted", INTERRUPT_HINTS.get(ctx.invoked_subcommand or ""))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `shdb ... | head`: the reader has all it wanted
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the flush at exit must not fail
            raise typer.Exit(EXIT_BROKEN_PIPE) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Usage errors in the same voice as the rest: ``shdb: error: ...``."""
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except _ClickException as exc:
            code = _usage_error(exc)
        except typer.Abort:
            error("interrupted")
            code = EXIT_INTERRUPTED
        if not standalone:
            return code
        sys.exit(code or 0)


def _usage_error(exc: Any) -> int:
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())
        return 0
    advice = f"see `{ctx.command_path} --help`" if ctx is not None else None
    error(exc.format_message(), advice if isinstance(exc, _UsageError) else None)
    return int(exc.exit_code)


def group(help_text: str) -> typer.Typer:
    """A command group (``shdb idf``, ``shdb spark``) with the same error handling."""
    return typer.Typer(cls=Group, no_args_is_help=True, rich_markup_mode=None, help=help_text)


# -- output files ---------------------------------------------------------------
def excluded(path: str | None) -> list[Path]:
    """An output file, which a folder input must not read back."""
    return [Path(path)] if path not in (None, "-") else []


@contextmanager
def open_output(path: str) -> Iterator[TextIO]:
    if path == "-":
        yield sys.stdout
    else:
        with open(path, "w", encoding="utf-8") as f:
            yield f


# -- rows -------------------------------------------------------------------------
#: A cell's backslash, tab and line breaks escaped, as linear TSV does: an id or a
#: value holding a tab or a newline keeps its row one line of as many columns.
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Human output: tab-separated columns under a header line."""
    typer.echo("\t".join(header))
    for row in rows:
        typer.echo("\t".join(str(cell).translate(_TSV_ESCAPES) for cell in row))


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON as people read it: Chinese text as itself, not \\u escapes."""
    return json.dumps(value, ensure_ascii=False, **kwargs)


def echo_json(value: Any, **kwargs: Any) -> None:
    typer.echo(dumps(value, **kwargs))


def new_index(url: str) -> None:
    """Said once, when a command created the index it was given: a mistyped name
    would otherwise start an empty index without a word."""
    note(f"shdb: created a new, empty index at {url}")


def estimated(value: Any) -> Any:
    """A count, or an extrapolated one (``{"estimate", "bound_95"}``) as ``N ± B``."""
    if isinstance(value, dict) and "estimate" in value and value["bound_95"] is None:
        return f"{value['estimate']:,} (sampled, nothing seen: no bound; sample more)"
    if isinstance(value, dict) and "estimate" in value:
        return f"{value['estimate']:,} ± {value['bound_95']:,} (95 %, sampled)"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return value


def verify_report(report: VerifyReport, as_json: bool) -> None:
    """`verify`'s and `spark verify`'s report, one shape for scripts to read either;
    exit 1 when problems were found and left alone."""
    skip = {"examples", "estimates"}
    fields = {k: v for k, v in dataclasses.asdict(report).items() if k not in skip}
    fields["clean"] = report.clean
    if as_json:
        echo_json({**fields, "estimates": report.estimates, "examples": report.examples})
    else:
        estimates = [(f"estimated {k}", estimated(v)) for k, v in report.estimates.items()]
        table(("check", "value"), [*fields.items(), *estimates])
        for example in report.examples:
            note(f"  {example}")
    if not report.clean and not report.repaired:
        raise typer.Exit(EXIT_NO_MATCH)


def stats_report(stats: dict[str, Any], as_json: bool) -> None:
    """`stats`'s and `spark stats`'s report: JSON, or a flat table of stat, value."""
    if as_json:
        echo_json(stats, indent=2)
        return
    flat = {k: v for k, v in stats.items() if not isinstance(v, dict)}
    flat.update({k: estimated(v) for k, v in stats.items() if k in ("documents", "index_cells")})
    flat.update({f"pieces_read.{k}": v for k, v in stats.get("pieces_read", {}).items()})
    flat.update({f"fingerprint.{k}": v for k, v in stats.get("fingerprint", {}).items()})
    table(("stat", "value"), flat.items())


def region_progress(table: str, done: int, ranges: int) -> None:
    """A line on stderr per key range read of a long scan (`stats`, `verify`): a
    region, or a piece of one when sampling (``ranges``: those to read, not the
    table's)."""
    note(f"{table}: {done} of {ranges} key ranges read")


def note(text: str) -> None:
    """A line for the person at the terminal (stderr), printed as is: through rich's
    console once one exists (a progress bar may be live on stderr), else plainly, so a
    one-shot command that only prints a note does without importing rich."""
    if err.cache_info().currsize:
        err().print(text, markup=False, highlight=False)
    else:
        typer.echo(text, err=True)


def predicate(k: int, lsh: MinHashParams | None, probes: int = 0) -> str:
    """The match rule in words a newcomer can read, for summaries (layout.nets.is_match;
    docs/nets.md): "distance" and "similarity" are the columns of ``shdb query``."""
    near = f"distance <= {k} bits"
    if probes:
        near = f"distance <= {k} bits (or <= {bound(k, probes)} for one of {probes} probes)"
    if lsh is None:
        return f"a match: {near}"
    if lsh.evidence:  # every sketch of the index carries evidence: the similarity decides
        return f"a match: similarity >= {lsh.threshold} (without a sketch: {near})"
    return f"a match: {near} with similarity >= {lsh.floor}, or similarity >= {lsh.threshold}"


def skip_json(bad: BadRecord) -> dict[str, Any]:
    return {"where": bad.where, "reason": bad.reason, "problem": bad.problem.value}


def print_skips(skipped: list[BadRecord], unlisted: int = 0) -> None:
    """The first skipped records with what to do about each, then a count of the rest."""
    from simhash_hbase.text.readers import STDIN_NAME  # here: the readers load NumPy

    for bad in skipped[:_SHOWN_SKIPS]:
        advice = PROBLEM_HINTS.get(bad.problem)
        if bad.problem is Problem.MALFORMED and bad.where.startswith(STDIN_NAME):
            advice = _STDIN_TEXT_HINT
        note(f"  skipped {bad.where}: {bad.reason}" + (f"; {advice}" if advice else ""))
    more = len(skipped) - _SHOWN_SKIPS + unlisted
    if more > 0:
        note(f"  ... and {more} more skipped records (--json lists them)")


def print_missing(missing: list[str]) -> None:
    """Ids asked for and not held, one line each on stderr."""
    for doc_id in missing:
        note(f"not found: {doc_id}")
