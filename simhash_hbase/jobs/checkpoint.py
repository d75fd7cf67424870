"""What makes an ingest resumable and its report exact: the checkpoint kept in
the index, the report it appends to, and the commit protocol between them
(:class:`Commits`), with the fault points the commit-protocol tests kill at.

See :func:`simhash_hbase.jobs.ingest.ingest` for how a run uses them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from simhash_hbase.faults import fault
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout import codec
from simhash_hbase.records import BadRecord, IngestSummary, Lookup, Problem
from simhash_hbase.store import local_path
from simhash_hbase.text.readers import STDIN, SourceOptions, input_files


class Report(Protocol):
    """Where an ingest writes the near-duplicates it finds, one line each.

    A batch's lines reach it only after the batch is committed, and ``append``
    makes them durable before the checkpoint moves past the batch, so a line is
    in the report if and only if its document is in the index (see :func:`ingest`).
    """

    def line(self, found: Lookup) -> str:
        """One near-duplicate as a line (no newline)."""
        ...

    def append(self, lines: Sequence[str]) -> int:
        """Write, flush and sync ``lines``; the report's size after them."""
        ...

    def size(self) -> int: ...
    def truncate(self, size: int) -> None:
        """Cut the report back to ``size`` bytes (lines of a batch not yet checkpointed)."""
        ...


_SAVED_SKIPS = 1000  # skipped records a checkpoint keeps, to report again on resume


@dataclass
class Progress:
    """What a checkpoint holds: records done, those skipped, the report's size."""

    records: int = 0
    skipped: list[BadRecord] = dataclasses.field(default_factory=list)
    more_skipped: int = 0
    report_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        kept = self.skipped[:_SAVED_SKIPS]
        return {
            "records": self.records,
            "skipped": [[b.where, b.reason, b.problem.value] for b in kept],
            "more_skipped": self.more_skipped + len(self.skipped) - len(kept),
            "report_bytes": self.report_bytes,
        }

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> Progress:
        skipped = [
            BadRecord(where, reason, 0, Problem(problem))
            for where, reason, problem in state.get("skipped", [])
        ]
        return cls(
            int(state.get("records", 0)),
            skipped,
            int(state.get("more_skipped", 0)),
            state.get("report_bytes"),
        )


@dataclass
class Pending:
    """A batch whose report lines are saved but which may not be committed yet:
    the progress after it and its lines."""

    after: Progress
    lines: list[str]


class Checkpoint:
    """How far an interrupted ingest of one input got, kept in the index.

    Named by a digest of the input (every file, in folders too, with its size
    and mtime) and of every option that changes what is written, so a re-run of
    the same command on the same input resumes, and anything else starts over.
    """

    def __init__(self, index: SimhashIndex, identity: Any) -> None:
        self._index = index
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]
        self.key = digest  # its run lock's (SimhashIndex.sole_writer): one run of an input
        self.name = f"checkpoint/{digest}"
        self._parts = 0  # line records of the pending batch held beside the state

    @classmethod
    def of(
        cls,
        index: SimhashIndex,
        paths: Sequence[str],
        opts: SourceOptions,
        *,
        store_text: bool = False,
        fingerprints: bool = False,
        exclude: Sequence[Path] = (),
    ) -> Checkpoint | None:
        """The checkpoint of one ingest; None for stdin, which cannot be read again."""
        identity = input_identity(paths, opts, [*own_files(index), *exclude])
        if identity is None:
            return None
        return cls(index, [identity, store_text, fingerprints])

    def load(self) -> Progress:
        """What earlier runs committed (nothing, for a fresh start)."""
        return Progress.from_json(self._index.get_state(self.name) or {})

    def pending(self) -> Pending | None:
        """The batch an earlier run stopped in after saving its lines, if any."""
        state = self._index.get_state(self.name) or {}
        held = state.get("pending")
        if held is None:
            return None
        self._parts = int(held.get("parts", 0))
        return Pending(Progress.from_json(held["after"]), saved_lines(self._index, self.name, held))

    def save(self, progress: Progress, pending: Pending | None = None) -> None:
        """Record ``progress`` (committed) and, before a batch is written, the
        batch as ``pending``: its lines go in the same record when they fit one."""
        state = progress.to_json()
        if pending is not None:
            lines = save_lines(self._index, self.name, pending.lines)
            state["pending"] = {"after": pending.after.to_json(), **lines}
        self._index.put_state(self.name, state)
        if pending is None:
            self._drop_parts()
        else:
            self._parts = max(self._parts, int(state["pending"].get("parts", 0)))

    def clear(self) -> None:
        self._index.delete_state(self.name)
        self._drop_parts()

    def _drop_parts(self) -> None:
        drop_lines(self._index, self.name, {"parts": self._parts})
        self._parts = 0


def save_lines(index: SimhashIndex, name: str, lines: Sequence[str]) -> dict[str, Any]:
    """Report lines saved for the job state record ``name``: the entry to put in it,
    which holds them when they fit one meta record, else says how many records
    ``name/lines/I`` (written here) hold them, so that no HBase cell exceeds its limit."""
    parts = codec.encode_blob_parts("\n".join(lines).encode("utf-8"))
    if len(parts) == 1:
        return {"lines": parts}
    for i, part in enumerate(parts):
        index.put_state(f"{name}/lines/{i}", part)
    return {"parts": len(parts)}


def saved_lines(index: SimhashIndex, name: str, entry: dict[str, Any]) -> list[str]:
    """The lines :func:`save_lines` saved, given the entry it returned."""
    parts = entry.get("lines") or [
        index.get_state(f"{name}/lines/{i}") or {} for i in range(int(entry.get("parts", 0)))
    ]
    text = codec.decode_blob_parts(parts).decode("utf-8")
    return text.split("\n") if text else []


def drop_lines(index: SimhashIndex, name: str, entry: dict[str, Any]) -> None:
    """Delete the records ``name/lines/I`` that :func:`save_lines` wrote for ``entry``."""
    for i in range(int(entry.get("parts", 0))):
        index.delete_state(f"{name}/lines/{i}")


class Commits:
    """The commit protocol of one ingest with a checkpoint and/or a report.

    Per batch: its near-duplicates' lines are saved in the checkpoint as
    pending (only when there are any), the batch is written, the lines are
    appended to the report and synced, and the checkpoint moves past the batch.
    A stop anywhere leaves the batch either pending (a resume writes it again,
    idempotently, and emits its saved lines) or done; the report never holds a
    line of a batch not written.
    """

    def __init__(
        self, checkpoint: Checkpoint | None, report: Report | None, last: Progress
    ) -> None:
        self.checkpoint = checkpoint
        self.report = report
        self.start = last  # what runs before this one committed
        self.last = last  # what the checkpoint holds as committed

    def _after(self, summary: IngestSummary, report_bytes: int | None) -> Progress:
        return Progress(
            self.start.records + summary.records,
            self.start.skipped + summary.skipped,
            self.start.more_skipped,
            report_bytes,
        )

    def prepare(self, summary: IngestSummary, found: list[Lookup]) -> None:
        if self.checkpoint is None or self.report is None or not found:
            return  # a batch without lines is simply written again on resume
        lines = [self.report.line(item) for item in found]
        self.checkpoint.save(self.last, Pending(self._after(summary, None), lines))
        fault("prepared")

    def committed(self, summary: IngestSummary, found: list[Lookup]) -> None:
        size = None
        if self.report is not None:
            size = self.report.append([self.report.line(item) for item in found])
            fault("reported")
        self.last = self._after(summary, size)
        if self.checkpoint is not None:
            self.checkpoint.save(self.last)
            fault("saved")


def own_files(index: SimhashIndex) -> list[Path]:
    """The index's own folder (embedded): never read as input, nor written."""
    path = local_path(index.url)
    return [path] if path is not None else []


def input_identity(
    paths: Sequence[str], opts: SourceOptions, exclude: Sequence[Path] = ()
) -> list[Any] | None:
    """Every input file with its size and mtime, and the reading options; None for
    stdin, which cannot be read again."""
    if STDIN in paths:
        return None
    identity: list[Any] = [dataclasses.asdict(opts), [os.path.abspath(p) for p in paths]]
    for path in input_files(paths, exclude, opts.follow_symlinks):
        try:
            info = path.stat()
        except OSError:
            identity.append([os.fsencode(path).hex(), None])
            continue
        identity.append([os.fsencode(path.absolute()).hex(), info.st_size, info.st_mtime_ns])
    return identity
