"""Streaming jobs over an index: ingest (fingerprint -> batch -> lookups -> write)
and the all-pairs dedup of an input without an index.

Each record is fingerprinted, turned into a document and checked inside its own
error boundary: a bad one becomes a :class:`BadRecord` (skipped and reported, or
fatal with :attr:`OnError.FAIL`) and never costs a batch-mate.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np

from simhash_hbase.errors import (
    EmptyDocument,
    InvalidInput,
    InvalidSetting,
    RejectedRecord,
    ShdbError,
    WorkerDied,
)
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams
from simhash_hbase.fingerprint.probes import check_probes
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.index.client import SimhashIndex, gc_paused
from simhash_hbase.index.manifest import Wanted
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.nets import sketch_document
from simhash_hbase.layout.pairs import NearGraph, near_graph
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    BadRecord,
    Document,
    IngestSummary,
    Lookup,
    OnError,
    Problem,
    Record,
    check_limit,
)
from simhash_hbase.store import local_path
from simhash_hbase.text.readers import (
    STDIN,
    SourceOptions,
    input_files,
    read_fingerprint_arrays,
    read_fingerprint_lines,
    read_sources,
)

DEFAULT_BATCH_SIZE = 1000
# Records are read and fingerprinted in pieces of this many, then written in
# batches: reading runs only a piece or two ahead of the work, so progress (read
# bytes) moves smoothly and its ETA holds, instead of jumping a batch at a time.
FINGERPRINT_STEP = 64
# Precomputed fingerprints are ~100 bytes a record: batch many, so the store writes
# few large sorted transactions (embedded store at 1 M: ~7x faster than 1,000; and
# 200,000 against 50,000: 0.27x the bytes written, 0.85x the CPU, as each commit
# rewrites every B+tree page its keys land on, ~all of them at 1 M).
DEFAULT_FINGERPRINT_BATCH = 200_000
MAX_BATCH_SIZE = 1_000_000
#: A batch of documents ends early once its records hold this many bytes of input
#: (each byte costs ~30 in memory while indexed: ~2 GB at this, whatever the count).
BATCH_BYTES = 64 * 1024 * 1024
_DEDUP_CHUNK = 1000

#: Called with each new document that has near-copies (its bounded matches).
OnDuplicate = Callable[[Lookup], None]
OnProgress = Callable[[IngestSummary], None]


@dataclass(frozen=True)
class IngestOptions:
    """How records are written (not what: that is the index's manifest)."""

    workers: int = 1
    store_text: bool = False
    find_k: int | None = 3  # report near-duplicates within k; None: no lookups
    on_error: OnError = OnError.SKIP
    # None: DEFAULT_BATCH_SIZE documents, or DEFAULT_FINGERPRINT_BATCH fingerprints
    batch_size: int | None = None
    probes: int = 0  # multi-probe the find_k lookups (simhash_hbase.fingerprint.probes)
    limit: int | None = DEFAULT_LIMIT  # near-copies listed per new document (all counted)

    def __post_init__(self) -> None:
        if self.batch_size is not None and not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise InvalidSetting(
                "batch_size", f"batch size must be 1..{MAX_BATCH_SIZE}, got {self.batch_size}"
            )
        if not 1 <= self.workers <= (os.cpu_count() or 1) * 4:
            raise InvalidSetting("workers", f"workers must be 1..4 x CPUs, got {self.workers}")
        object.__setattr__(self, "on_error", OnError(self.on_error))
        check_probes(self.probes)
        check_limit(self.limit)


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(items, size)):
        yield chunk


def _text_of(record: Record | BadRecord) -> str:
    return record.text if isinstance(record, Record) and isinstance(record.text, str) else ""


def fingerprint_chunks(
    records: Iterable[Record | BadRecord], fingerprinter: Fingerprinter, workers: int, size: int
) -> Iterator[tuple[list[Record | BadRecord], list[int | EmptyDocument]]]:
    """Chunks of records with their fingerprints, in input order (``workers``
    processes); a text repeated within a chunk (mass copies) is fingerprinted once."""
    pending: deque[list[Record | BadRecord]] = deque()
    firsts: deque[list[int]] = deque()
    spread: deque[list[int]] = deque()
    texts = _distinct(_texts(records, size, pending), firsts, spread)
    return _with_records(_spread(fingerprinter.map(texts, workers), firsts, spread), pending)


def _distinct(
    chunks: Iterator[list[str]], firsts: deque[list[int]], spread: deque[list[int]]
) -> Iterator[list[str]]:
    """Each chunk's distinct texts; per chunk, where each distinct text first is
    (``firsts``) and which distinct text each position holds (``spread``)."""
    for texts in chunks:
        slot: dict[str, int] = {}
        first: list[int] = []
        where = []
        for at, text in enumerate(texts):
            if text not in slot:
                slot[text] = len(first)
                first.append(at)
            where.append(slot[text])
        firsts.append(first)
        spread.append(where)
        yield list(slot)


def _spread(
    results: Iterator[list[Any]], firsts: deque[list[int]], spread: deque[list[int]]
) -> Iterator[list[Any]]:
    """Each chunk's results back at every position; a worker that died holding a
    distinct text is said to hold its first position."""
    given = 0
    try:
        for found in results:
            firsts.popleft()
            yield [found[d] for d in spread.popleft()]
            given += 1
    except WorkerDied as exc:
        raise WorkerDied(exc.chunk, firsts[exc.chunk - given][exc.item], exc.how) from None


def probe_chunks(
    records: Iterable[Record | BadRecord],
    fingerprinter: Fingerprinter,
    workers: int,
    size: int,
    probes: int,
) -> Iterator[tuple[list[Record | BadRecord], list[list[int] | EmptyDocument]]]:
    """Like :func:`fingerprint_chunks`, with each text's probe list (fingerprint first)."""
    pending: deque[list[Record | BadRecord]] = deque()
    results = fingerprinter.map_probes(_texts(records, size, pending), probes, workers)
    return _with_records(results, pending)


def _with_records(
    results: Iterator[list[Any]], pending: deque[list[Record | BadRecord]]
) -> Iterator[tuple[list[Record | BadRecord], list[Any]]]:
    """Each chunk of records with its results; a worker that died names the
    document it held (its id and file:line)."""
    given = 0
    try:
        for result in results:
            yield pending.popleft(), result
            given += 1
    except WorkerDied as exc:
        record = pending[exc.chunk - given][exc.item]
        name = record.where if isinstance(record, BadRecord) else repr(record.doc_id)
        if isinstance(record, Record) and record.where:
            name += f" ({record.where})"
        raise exc.naming(f"document {name}") from None


def _record_chunks(
    records: Iterable[Record | BadRecord], size: int, max_bytes: int = BATCH_BYTES
) -> Iterator[list[Record | BadRecord]]:
    """Chunks of ``size`` records, or fewer once they hold ``max_bytes`` of input:
    a batch's memory is then bounded by bytes too, not by count x largest document."""
    chunk: list[Record | BadRecord] = []
    held = 0
    for record in records:
        chunk.append(record)
        held += record.size
        if len(chunk) >= size or held >= max_bytes:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def _texts(
    records: Iterable[Record | BadRecord], size: int, pending: deque[list[Record | BadRecord]]
) -> Iterator[list[str]]:
    for chunk in _record_chunks(records, size):
        pending.append(chunk)  # map() pulls a chunk before it yields its results
        yield [_text_of(r) for r in chunk]


def screen(item: Record | BadRecord | tuple[Any, ...]) -> Record | BadRecord:
    """A record as read, or why it cannot even be fingerprinted: its text is not a
    string of valid Unicode. Library callers may pass plain (id, text[, meta]) tuples."""
    if isinstance(item, BadRecord):
        return item
    if not isinstance(item, Record):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            return BadRecord(
                repr(item)[:60], "not an (id, text[, meta]) record", 0, Problem.INVALID
            )
        item = Record(*item)
    where = item.where or repr(item.doc_id)[:60]
    if not isinstance(item.text, str):
        reason = f"the text of {item.doc_id!r} is a {type(item.text).__name__}, not a string"
        return BadRecord(where, reason, item.size, Problem.WRONG_TYPE)
    try:
        item.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        reason = (
            f"the text of {item.doc_id!r} is not valid Unicode (a lone surrogate at {exc.start})"
        )
        return BadRecord(where, reason, item.size, Problem.NOT_UTF8)
    return item


def to_document(
    record: Record | BadRecord,
    fp: int | EmptyDocument,
    store_text: bool,
    sketched: Callable[[Document, str], Document] | None = None,
) -> Document | BadRecord:
    """A screened, fingerprinted record as a storable Document, or why it cannot be
    one; ``sketched`` adds the LSH net's sketch and band keys of its text."""
    if isinstance(record, BadRecord):
        return record
    where = record.where or repr(record.doc_id)[:60]
    if isinstance(fp, EmptyDocument):
        return BadRecord(
            where,
            f"document {record.doc_id!r} has no usable terms "
            "(empty, or only whitespace, punctuation or stop words)",
            record.size,
            Problem.NO_TERMS,
        )
    doc = Document(record.doc_id, fp, record.text if store_text else None, record.meta)
    if sketched is not None:
        doc = sketched(doc, record.text)
    return checked(doc, where, record.size)


def checked(doc: Document, where: str = "", size: int = 0) -> Document | BadRecord:
    """The document, or a BadRecord if it cannot be stored (id, text, meta)."""
    try:
        codec.check_document(doc)
    except InvalidInput as exc:
        problem = Problem.BAD_META if "meta" in str(exc) else Problem.BAD_ID
        return BadRecord(where or repr(doc.doc_id)[:60], str(exc), size, problem)
    return doc


def _checked_pairs(chunk: list[tuple[str, int] | BadRecord]) -> list[Document | BadRecord]:
    """(id, fingerprint) pairs as documents, each :func:`checked`: a chunk of valid
    ones in a few C-level passes, else one by one (each bad one its BadRecord)."""
    with gc_paused():  # a document a pair: see gc_paused
        items = [i if isinstance(i, BadRecord) else Document(*i) for i in chunk]
    docs: list[Document] = [i for i in items if not isinstance(i, BadRecord)]
    if len(docs) == len(items) and codec.plain_documents_valid(docs):
        return items
    return [i if isinstance(i, BadRecord) else checked(i) for i in items]


def _split(
    chunk: list[Document | BadRecord], summary: IngestSummary, on_error: OnError
) -> tuple[list[Document], RejectedRecord | None]:
    """The chunk's documents up to the first bad record (``FAIL``), or all of them.

    ``summary.records`` counts the records done; a record that fails the run is
    not done, so a re-run (resuming after the records done) stops at it again.
    """
    docs: list[Document] = []
    for item in chunk:
        if isinstance(item, BadRecord):
            if on_error is OnError.FAIL:
                return docs, RejectedRecord(item.where, item.reason, item.problem.value)
            summary.skipped.append(item)
        else:
            docs.append(item)
        summary.records += 1
    return docs, None


#: A chunk to write: its documents (each passed :func:`checked`) and bad records,
#: the bytes read, and when the lookups are probed, each item's probe list (None
#: for a bad record).
Chunk = tuple[list[Document | BadRecord], int, list[list[int] | None] | None]


class Journal(Protocol):
    """What an ingest does around each batch's write (see :func:`ingest`)."""

    def prepare(self, summary: IngestSummary, found: list[Lookup]) -> None:
        """Before the write: make what it will report durable."""
        ...

    def committed(self, summary: IngestSummary, found: list[Lookup]) -> None:
        """After the write: report it and move the checkpoint past it."""
        ...


def _write_stream(
    index: SimhashIndex,
    chunks: Iterable[Chunk],
    options: IngestOptions,
    on_duplicate: OnDuplicate | None,
    on_progress: OnProgress | None,
    journal: Journal | None = None,
) -> IngestSummary:
    if options.find_k is not None:
        index.scheme.check_k(options.find_k)
    summary = IngestSummary()
    started = time.perf_counter()
    for chunk, nbytes, probes in chunks:
        summary.bytes_read += nbytes
        docs, failure = _split(chunk, summary, options.on_error)
        lists = None
        if probes is not None:  # those of the documents _split kept, in order
            kept = [p for item, p in zip(chunk, probes) if isinstance(item, Document)]
            lists = [p for p in kept[: len(docs)] if p is not None]
        before = None if journal is None else partial(journal.prepare, summary)
        found = index.add_documents(
            docs,
            find_k=options.find_k,
            probes=lists,
            checked=True,
            limit=options.limit,
            before_write=before,
            tally=summary,
        )
        _fault("written")
        summary.duplicates += len(found)
        summary.seconds = time.perf_counter() - started
        if journal is not None:
            journal.committed(summary, found)
        if on_duplicate is not None:
            for dup in found:
                on_duplicate(dup)
        if on_progress is not None:
            on_progress(summary)
        if failure is not None:
            raise failure
    summary.seconds = time.perf_counter() - started
    return summary


_FAULT_HITS: Counter[str] = Counter()
P = ParamSpec("P")
R = TypeVar("R")


def _fault(point: str) -> None:
    """Fault injection for the commit-protocol tests: ``SHDB_FAULT=POINT:N`` kills
    this process (SIGKILL, nothing cleaned up) the Nth time it reaches POINT."""
    spec = os.environ.get("SHDB_FAULT")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name == point:
        _FAULT_HITS[point] += 1
        if _FAULT_HITS[point] == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)


def index_records(
    index: SimhashIndex,
    records: Iterable[Record | BadRecord | tuple[Any, ...]],
    options: IngestOptions | None = None,
    *,
    on_duplicate: OnDuplicate | None = None,
    on_progress: OnProgress | None = None,
    journal: Journal | None = None,
) -> IngestSummary:
    """Fingerprint and index a stream of records in batches.

    With :attr:`OnError.FAIL` the valid records read before the first bad one
    are still written, then :class:`InvalidInput` is raised naming it.
    """
    options = options or IngestOptions()
    fingerprinter = index.fingerprinter
    sketched = index.sketched if index.lsh is not None else None
    stream = (screen(r) for r in records)
    size = options.batch_size or DEFAULT_BATCH_SIZE
    step = min(size, FINGERPRINT_STEP)
    pieces: Iterable[Chunk]
    if options.probes and options.find_k is not None:
        pieces = (
            _probed_chunk(chunk, lists, options.store_text, sketched)
            for chunk, lists in probe_chunks(
                stream, fingerprinter, options.workers, step, options.probes
            )
        )
    else:
        pieces = (
            (
                [
                    to_document(record, fp, options.store_text, sketched)
                    for record, fp in zip(chunk, fps)
                ],
                sum(record.size for record in chunk),
                None,
            )
            for chunk, fps in fingerprint_chunks(stream, fingerprinter, options.workers, step)
        )
    chunks = _regrouped(pieces, size)
    return _write_stream(index, chunks, options, on_duplicate, on_progress, journal)


def _regrouped(pieces: Iterable[Chunk], size: int) -> Iterator[Chunk]:
    """Fingerprinted pieces joined into write batches of exactly ``size`` records
    (the last one shorter); the bytes read count toward the batch a piece ends in."""
    docs: list[Document | BadRecord] = []
    nbytes = 0
    probes: list[list[int] | None] = []
    probed = False
    for piece_docs, piece_bytes, piece_probes in pieces:
        docs += piece_docs
        nbytes += piece_bytes
        if piece_probes is not None:
            probed = True
            probes += piece_probes
        while len(docs) >= size:
            yield docs[:size], nbytes, probes[:size] if probed else None
            docs, probes, nbytes = docs[size:], probes[size:], 0
    if docs:
        yield docs, nbytes, probes if probed else None


def _probed_chunk(
    chunk: list[Record | BadRecord],
    lists: list[list[int] | EmptyDocument],
    store_text: bool,
    sketched: Callable[[Document, str], Document] | None = None,
) -> Chunk:
    docs: list[Document | BadRecord] = []
    probes: list[list[int] | None] = []
    for record, probe_list in zip(chunk, lists):
        if isinstance(probe_list, EmptyDocument):
            docs.append(to_document(record, probe_list, store_text))
            probes.append(None)
        else:
            docs.append(to_document(record, probe_list[0], store_text, sketched))
            probes.append(probe_list)
    return docs, sum(record.size for record in chunk), probes


def index_fingerprints(
    index: SimhashIndex,
    items: Iterable[tuple[str, int] | BadRecord],
    options: IngestOptions | None = None,
    *,
    on_duplicate: OnDuplicate | None = None,
    on_progress: OnProgress | None = None,
    journal: Journal | None = None,
) -> IngestSummary:
    """Like :func:`index_records`, for precomputed (id, fingerprint) pairs."""
    options = options or IngestOptions()
    if options.probes:
        raise InvalidInput("precomputed fingerprints cannot be probed: margins come from text")
    chunks = (
        (_checked_pairs(chunk), 0, None)
        for chunk in _chunks(iter(items), options.batch_size or DEFAULT_FINGERPRINT_BATCH)
    )
    return _write_stream(index, chunks, options, on_duplicate, on_progress, journal)


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
        self.name = f"checkpoint/{digest}"
        self._parts = 0  # line records of the pending batch held beside the state

    @classmethod
    def of(
        cls,
        index: SimhashIndex,
        paths: Sequence[str],
        opts: SourceOptions,
        options: IngestOptions,
        *,
        fingerprints: bool = False,
        exclude: Sequence[Path] = (),
    ) -> Checkpoint | None:
        """The checkpoint of one ingest; None for stdin, which cannot be read again."""
        identity = input_identity(paths, opts, [*_own_files(index), *exclude])
        if identity is None:
            return None
        return cls(index, [identity, options.store_text, fingerprints])

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
        parts = held.get("lines") or [
            self._index.get_state(f"{self.name}/lines/{i}") or {} for i in range(self._parts)
        ]
        text = codec.decode_blob_parts(parts).decode("utf-8")
        return Pending(Progress.from_json(held["after"]), text.split("\n") if text else [])

    def save(self, progress: Progress, pending: Pending | None = None) -> None:
        """Record ``progress`` (committed) and, before a batch is written, the
        batch as ``pending``: its lines go in the same record when they fit one."""
        state = progress.to_json()
        if pending is not None:
            parts = codec.encode_blob_parts("\n".join(pending.lines).encode("utf-8"))
            held: dict[str, Any] = {"after": pending.after.to_json()}
            if len(parts) == 1:
                held["lines"] = parts
            else:
                for i, part in enumerate(parts):
                    self._index.put_state(f"{self.name}/lines/{i}", part)
                held["parts"] = len(parts)
            state["pending"] = held
        self._index.put_state(self.name, state)
        if pending is None:
            self._drop_parts()
        else:
            self._parts = max(self._parts, int(state["pending"].get("parts", 0)))

    def clear(self) -> None:
        self._index.delete_state(self.name)
        self._drop_parts()

    def _drop_parts(self) -> None:
        for i in range(self._parts):
            self._index.delete_state(f"{self.name}/lines/{i}")
        self._parts = 0


class _Commits:
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
        _fault("prepared")

    def committed(self, summary: IngestSummary, found: list[Lookup]) -> None:
        size = None
        if self.report is not None:
            size = self.report.append([self.report.line(item) for item in found])
            _fault("reported")
        self.last = self._after(summary, size)
        if self.checkpoint is not None:
            self.checkpoint.save(self.last)
            _fault("saved")


def _tapped(
    records: Iterator[Record | BadRecord], tap: Callable[[Record | BadRecord], None] | None
) -> Iterator[Record | BadRecord]:
    for record in records:
        if tap is not None:
            tap(record)
        yield record


def check_output(
    what: str, path: str, inputs: Sequence[str], index_folder: Path | None = None
) -> None:
    """:class:`InvalidInput` unless ``path`` (``-``: stdout) can be written without
    harm: a regular file or a new one in an existing folder, not an input, not in
    the embedded index's folder (writing there would destroy the index). Links
    are followed: what counts is the file that would be written."""
    if path == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise InvalidInput(f"{what} {path}: is a folder; give a file name")
    if not target.parent.is_dir():
        raise InvalidInput(f"{what} {path}: the folder {target.parent} does not exist")
    if target.exists() and not target.is_file():
        raise InvalidInput(f"{what} {path}: is not a regular file; give a file name")
    real = target.resolve()
    for given in inputs:
        if given != STDIN and target.exists() and os.path.samefile(given, target):
            raise InvalidInput(f"{what} {path}: is also an input; write it elsewhere")
    if index_folder is not None and real.is_relative_to(index_folder.resolve()):
        raise InvalidInput(
            f"{what} {path}: is inside the index folder {index_folder}; writing there would "
            "destroy the index, so write it elsewhere"
        )


@contextmanager
def index_for_ingest(
    url: str | None,
    *,
    scheme: str | None = None,
    params: Wanted = None,
    create: bool = True,
    wait: float = 0.0,
) -> Iterator[SimhashIndex]:
    """Open the index an ingest writes to, or create it (``create``). If this run created it and
    it holds no document at the end (every record skipped), it is removed again:
    a run that adds nothing creates nothing, and a re-run with other settings is
    not refused by the settings of an empty index. The run holds the index from
    here (:func:`_sole_run`), waiting up to ``wait`` seconds for another run to end:
    a second run never discards what the first writes."""
    folder = local_path(url)
    fresh = folder is not None and not folder.exists()
    with (
        SimhashIndex.open(url, scheme=scheme, params=params, create=create) as index,
        index.sole_writer("shdb ingest", wait),
    ):
        failed = True
        try:
            yield index
            failed = False
        finally:
            try:
                discarded = index.discard()
            except ShdbError:
                if not failed:
                    raise
                discarded = False  # the store may be what failed: keep that error
    if discarded and fresh and folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _own_files(index: SimhashIndex) -> list[Path]:
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


def _sole_run(
    job: Callable[Concatenate[SimhashIndex, P], R],
) -> Callable[Concatenate[SimhashIndex, P], R]:
    """``job`` holding its index for its whole run (:meth:`SimhashIndex.sole_writer`):
    a second run at once is refused with the first one's pid and start time, so a
    checkpoint and a report belong to one run."""

    @functools.wraps(job)
    def run(index: SimhashIndex, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with index.sole_writer(f"shdb {job.__name__}"):
            return job(index, *args, **kwargs)

    return run


@_sole_run
def ingest(
    index: SimhashIndex,
    paths: Sequence[str],
    opts: SourceOptions,
    options: IngestOptions | None = None,
    *,
    resume: bool = True,
    fingerprints: bool = False,
    report: Report | None = None,
    stdin: BinaryIO | None = None,
    exclude: Sequence[Path] = (),
    on_record: Callable[[Record | BadRecord], None] | None = None,
    on_progress: OnProgress | None = None,
) -> IngestSummary:
    """The streaming-dedup job: index every record and report near-copies found.

    ``fingerprints``: the input is ``HEX`` or ``ID<TAB>HEX`` lines (a Spark job's
    output, say) rather than documents. The index's own folder and ``exclude``
    (an output, say) are never read as input; ``on_record`` sees each record read.

    The commit protocol (:class:`_Commits`): a batch's near-duplicate lines are
    saved in the checkpoint before the batch is written, and appended to the
    report (synced) after it, then the checkpoint moves on. A re-run of the same
    command on the same input cuts the report back to the last checkpoint,
    writes a batch left pending again (writes are idempotent) and emits its
    saved lines, then resumes after it and reports the skipped records again.
    So whatever stops a run (kill -9, a closed pipe, a full disk, Ctrl-C), a
    line is in the report if and only if its document is in the index once the
    ingest has finished, and a re-run never loses or repeats a line.
    """
    options = options or IngestOptions()
    opts = dataclasses.replace(opts, html=index.params.html)  # pages read as the index says
    exclude = [*_own_files(index), *exclude]
    checkpoint = (
        Checkpoint.of(index, paths, opts, options, fingerprints=fingerprints, exclude=exclude)
        if resume
        else None
    )

    def write(
        start: int, stop: int | None, how: IngestOptions, journal: Journal | None
    ) -> IngestSummary:
        if fingerprints:
            items = islice(read_fingerprint_lines(paths, stdin), start, stop)
            return index_fingerprints(index, items, how, on_progress=on_progress, journal=journal)
        records = _tapped(islice(read_sources(paths, opts, stdin, exclude), start, stop), on_record)
        return index_records(index, records, how, on_progress=on_progress, journal=journal)

    earlier = checkpoint.load() if checkpoint else Progress()
    if report is not None and earlier.report_bytes is not None:
        report.truncate(earlier.report_bytes)  # lines past the checkpoint are re-emitted
    pending = checkpoint.pending() if checkpoint else None
    redone = IngestSummary()
    if pending is not None and checkpoint is not None:
        redone = write(earlier.records, pending.after.records, _writes_only(options), None)
        earlier = dataclasses.replace(
            pending.after,
            report_bytes=report.append(pending.lines) if report is not None else None,
        )
        checkpoint.save(earlier)
        redone.duplicates = len(pending.lines)
    if report is not None:
        earlier.report_bytes = report.size()
    done = earlier.records
    summary = write(done, None, options, _Commits(checkpoint, report, earlier))
    summary.add(redone)
    summary.duplicates += redone.duplicates
    summary.resumed_after = done
    summary.skipped[:0] = earlier.skipped
    summary.skipped_before = earlier.more_skipped
    if checkpoint:
        checkpoint.clear()
    return summary


def _writes_only(options: IngestOptions) -> IngestOptions:
    """The options of a batch written again: no look-ups (its lines are saved)."""
    return dataclasses.replace(options, find_k=None, probes=0)


@dataclass
class DedupResult:
    """Ids in input order, their near-duplicate graph (identical fingerprints as
    one node: see :func:`~simhash_hbase.layout.pairs.nearest_earlier` and
    :func:`~simhash_hbase.layout.pairs.clusters_of`), and what was skipped."""

    ids: list[str]
    graph: NearGraph
    skipped: list[BadRecord]


def find_duplicates(
    paths: Sequence[str],
    opts: SourceOptions,
    *,
    k: int,
    scheme: Scheme,
    params: FingerprintParams,
    workers: int = 1,
    fingerprints: bool = False,
    exclude: Sequence[Path] = (),
    lsh: MinHashParams | None = None,
) -> DedupResult:
    """The near-duplicate graph of the input (no index): documents, or
    precomputed fingerprints with ``fingerprints=True`` (the pigeonhole net only).
    Identical documents are one node, so the work and memory follow documents
    and distinct near pairs, not copies x copies; held: an id, a fingerprint
    (and with ``lsh`` a sketch and band keys) per input, no text.

    With ``lsh``, texts join the LSH net too, and pairs are judged by the index's
    predicate between distinct documents; a document in a group larger than
    :data:`~simhash_hbase.layout.groups.SMALL` (N near-identical texts) is judged
    against its nearest neighbours in input order only, so the work is linear in
    documents, its count a lower bound, and the clusters stay exact.
    """
    scheme.check_k(k)
    opts = dataclasses.replace(opts, html=params.html)  # pages read as the params say
    sketches: list[bytes | None] = []
    bands: list[bytes | None] = []
    if fingerprints:
        ids, fps, skipped = read_fingerprint_arrays(paths)
        lsh = None
    else:
        hasher = MinHasher(lsh) if lsh is not None else None
        ids, fps, skipped, sketches, bands = _fingerprinted_arrays(
            paths, opts, params, workers, exclude, hasher
        )
    if lsh is None or not any(s is not None for s in sketches):
        return DedupResult(ids, near_graph(fps, k, scheme), skipped)
    return DedupResult(ids, nets_graph(fps, k, scheme, lsh, sketches, bands), skipped)


def _fingerprinted_arrays(
    paths: Sequence[str],
    opts: SourceOptions,
    params: FingerprintParams,
    workers: int,
    exclude: Sequence[Path],
    hasher: MinHasher | None = None,
) -> tuple[list[str], np.ndarray, list[BadRecord], list[bytes | None], list[bytes | None]]:
    """Ids, fingerprints, skipped records, and (with ``hasher``) sketches and band keys."""
    ids: list[str] = []
    fps: list[int] = []
    skipped: list[BadRecord] = []
    sketches: list[bytes | None] = []
    bands: list[bytes | None] = []
    records = (screen(r) for r in read_sources(paths, opts, exclude=exclude))
    for item in _fingerprinted(records, Fingerprinter(params), workers, hasher):
        if isinstance(item, BadRecord):
            skipped.append(item)
        else:
            ids.append(item.doc_id)
            fps.append(item.fingerprint)
            sketches.append(item.sketch)
            bands.append(item.bands)
    return ids, np.array(fps, dtype=np.uint64), skipped, sketches, bands


def _fingerprinted(
    records: Iterator[Record | BadRecord],
    fingerprinter: Fingerprinter,
    workers: int,
    hasher: MinHasher | None,
) -> Iterator[Document | BadRecord]:
    for chunk, fps in fingerprint_chunks(records, fingerprinter, workers, _DEDUP_CHUNK):
        sketched = None if hasher is None else _sketcher(hasher)
        for record, fp in zip(chunk, fps):
            yield to_document(record, fp, False, sketched)


def _sketcher(hasher: MinHasher) -> Callable[[Document, str], Document]:
    """:func:`sketch_document` that sketches each distinct text once (mass copies)."""
    done: dict[str, Document] = {}

    def sketched(doc: Document, text: str) -> Document:
        if text not in done:
            done[text] = sketch_document(hasher, doc, text)
        held = done[text]
        return dataclasses.replace(doc, sketch=held.sketch, bands=held.bands)

    return sketched
