"""Streaming jobs over an index: ingest (fingerprint -> batch -> lookups -> write)
and the all-pairs dedup of an input without an index.

Each record is fingerprinted, turned into a document and checked inside its own
error boundary: a bad one becomes a :class:`BadRecord` (skipped and reported, or
fatal with :attr:`OnError.FAIL`) and never costs a batch-mate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from simhash_hbase.errors import EmptyDocument, InvalidInput, InvalidSetting, RejectedRecord
from simhash_hbase.fingerprint.probes import check_probes
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout import codec
from simhash_hbase.layout.pairs import Pair, near_duplicate_pairs
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
# Precomputed fingerprints are ~100 bytes a record: batch many, so the store writes
# few large sorted transactions (embedded store at 1 M: ~7x faster than 1,000; and
# 200,000 against 50,000: 0.27x the bytes written, 0.85x the CPU, as each commit
# rewrites every B+tree page its keys land on, ~all of them at 1 M).
DEFAULT_FINGERPRINT_BATCH = 200_000
MAX_BATCH_SIZE = 1_000_000
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
    """Chunks of records with their fingerprints, in input order (``workers`` processes)."""
    pending: deque[list[Record | BadRecord]] = deque()
    for fps in fingerprinter.map(_texts(records, size, pending), workers):
        yield pending.popleft(), fps


def probe_chunks(
    records: Iterable[Record | BadRecord],
    fingerprinter: Fingerprinter,
    workers: int,
    size: int,
    probes: int,
) -> Iterator[tuple[list[Record | BadRecord], list[list[int] | EmptyDocument]]]:
    """Like :func:`fingerprint_chunks`, with each text's probe list (fingerprint first)."""
    pending: deque[list[Record | BadRecord]] = deque()
    for lists in fingerprinter.map_probes(_texts(records, size, pending), probes, workers):
        yield pending.popleft(), lists


def _texts(
    records: Iterable[Record | BadRecord], size: int, pending: deque[list[Record | BadRecord]]
) -> Iterator[list[str]]:
    for chunk in _chunks(iter(records), size):
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
    record: Record | BadRecord, fp: int | EmptyDocument, store_text: bool
) -> Document | BadRecord:
    """A screened, fingerprinted record as a storable Document, or why it cannot be one."""
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
    return checked(
        Document(record.doc_id, fp, record.text if store_text else None, record.meta),
        where,
        record.size,
    )


def checked(doc: Document, where: str = "", size: int = 0) -> Document | BadRecord:
    """The document, or a BadRecord if it cannot be stored (id, text, meta)."""
    try:
        codec.check_document(doc)
    except InvalidInput as exc:
        problem = Problem.BAD_META if "meta" in str(exc) else Problem.BAD_ID
        return BadRecord(where or repr(doc.doc_id)[:60], str(exc), size, problem)
    return doc


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


def _write_stream(
    index: SimhashIndex,
    chunks: Iterable[Chunk],
    options: IngestOptions,
    on_duplicate: OnDuplicate | None,
    on_progress: OnProgress | None,
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
        for found in index.add_documents(
            docs, find_k=options.find_k, probes=lists, checked=True, limit=options.limit
        ):
            summary.duplicates += 1
            if on_duplicate is not None:
                on_duplicate(found)
        summary.added += len(docs)
        summary.seconds = time.perf_counter() - started
        if on_progress is not None:
            on_progress(summary)
        if failure is not None:
            raise failure
    summary.seconds = time.perf_counter() - started
    return summary


def index_records(
    index: SimhashIndex,
    records: Iterable[Record | BadRecord | tuple[Any, ...]],
    options: IngestOptions | None = None,
    *,
    on_duplicate: OnDuplicate | None = None,
    on_progress: OnProgress | None = None,
) -> IngestSummary:
    """Fingerprint and index a stream of records in batches.

    With :attr:`OnError.FAIL` the valid records read before the first bad one
    are still written, then :class:`InvalidInput` is raised naming it.
    """
    options = options or IngestOptions()
    fingerprinter = index.fingerprinter
    stream = (screen(r) for r in records)
    chunks: Iterable[Chunk]
    if options.probes and options.find_k is not None:
        chunks = (
            _probed_chunk(chunk, lists, options.store_text)
            for chunk, lists in probe_chunks(
                stream,
                fingerprinter,
                options.workers,
                options.batch_size or DEFAULT_BATCH_SIZE,
                options.probes,
            )
        )
    else:
        chunks = (
            (
                [to_document(record, fp, options.store_text) for record, fp in zip(chunk, fps)],
                sum(record.size for record in chunk),
                None,
            )
            for chunk, fps in fingerprint_chunks(
                stream, fingerprinter, options.workers, options.batch_size or DEFAULT_BATCH_SIZE
            )
        )
    return _write_stream(index, chunks, options, on_duplicate, on_progress)


def _probed_chunk(
    chunk: list[Record | BadRecord], lists: list[list[int] | EmptyDocument], store_text: bool
) -> Chunk:
    docs: list[Document | BadRecord] = []
    probes: list[list[int] | None] = []
    for record, probe_list in zip(chunk, lists):
        if isinstance(probe_list, EmptyDocument):
            docs.append(to_document(record, probe_list, store_text))
            probes.append(None)
        else:
            docs.append(to_document(record, probe_list[0], store_text))
            probes.append(probe_list)
    return docs, sum(record.size for record in chunk), probes


def index_fingerprints(
    index: SimhashIndex,
    items: Iterable[tuple[str, int] | BadRecord],
    options: IngestOptions | None = None,
    *,
    on_duplicate: OnDuplicate | None = None,
    on_progress: OnProgress | None = None,
) -> IngestSummary:
    """Like :func:`index_records`, for precomputed (id, fingerprint) pairs."""
    options = options or IngestOptions()
    if options.probes:
        raise InvalidInput("precomputed fingerprints cannot be probed: margins come from text")
    chunks = (
        ([i if isinstance(i, BadRecord) else checked(Document(*i)) for i in chunk], 0, None)
        for chunk in _chunks(iter(items), options.batch_size or DEFAULT_FINGERPRINT_BATCH)
    )
    return _write_stream(index, chunks, options, on_duplicate, on_progress)


class Report(Protocol):
    """Where an ingest writes the near-duplicates it finds, so that none is lost
    or repeated across an interruption: it is cut back to the size it had at the
    last checkpoint before a resumed run appends to it."""

    def write(self, found: Lookup) -> None: ...
    def tell(self) -> int:
        """Bytes written and flushed so far."""
        ...

    def truncate(self, size: int) -> None: ...


_SAVED_SKIPS = 1000  # skipped records a checkpoint keeps, to report again on resume


@dataclass
class Progress:
    """What a checkpoint holds: records done, those skipped, the report's size."""

    records: int = 0
    skipped: list[BadRecord] = dataclasses.field(default_factory=list)
    more_skipped: int = 0
    report_bytes: int | None = None


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
        """What earlier runs did (nothing, for a fresh start)."""
        state = self._index.get_state(self.name) or {}
        skipped = [
            BadRecord(where, reason, 0, Problem(problem))
            for where, reason, problem in state.get("skipped", [])
        ]
        return Progress(
            int(state.get("records", 0)),
            skipped,
            int(state.get("more_skipped", 0)),
            state.get("report_bytes"),
        )

    def save(self, progress: Progress) -> None:
        kept = progress.skipped[:_SAVED_SKIPS]
        self._index.put_state(
            self.name,
            {
                "records": progress.records,
                "skipped": [[b.where, b.reason, b.problem.value] for b in kept],
                "more_skipped": progress.more_skipped + len(progress.skipped) - len(kept),
                "report_bytes": progress.report_bytes,
            },
        )

    def clear(self) -> None:
        self._index.delete_state(self.name)


def _tapped(
    records: Iterator[Record | BadRecord], tap: Callable[[Record | BadRecord], None] | None
) -> Iterator[Record | BadRecord]:
    for record in records:
        if tap is not None:
            tap(record)
        yield record


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
    for path in input_files(paths, exclude):
        try:
            info = path.stat()
        except OSError:
            identity.append([os.fsencode(path).hex(), None])
            continue
        identity.append([os.fsencode(path.absolute()).hex(), info.st_size, info.st_mtime_ns])
    return identity


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

    After each batch the records done, those skipped and the report's size are
    saved in the index; a re-run of the same command on the same input resumes
    after them, reports the skipped records again, and cuts the report back to
    that size, so no pair is lost or repeated (writes are idempotent, so the
    batch in flight when it stopped is simply written again).
    """
    options = options or IngestOptions()
    exclude = [*_own_files(index), *exclude]
    checkpoint = (
        Checkpoint.of(index, paths, opts, options, fingerprints=fingerprints, exclude=exclude)
        if resume
        else None
    )
    earlier = checkpoint.load() if checkpoint else Progress()
    if report is not None:
        report.truncate(earlier.report_bytes or 0)
    done = earlier.records

    def progress(summary: IngestSummary) -> None:
        if checkpoint:
            checkpoint.save(
                Progress(
                    done + summary.records,
                    earlier.skipped + summary.skipped,
                    earlier.more_skipped,
                    report.tell() if report is not None else None,
                )
            )
        if on_progress is not None:
            on_progress(summary)

    on_duplicate = report.write if report is not None else None
    if fingerprints:
        summary = index_fingerprints(
            index,
            islice(read_fingerprint_lines(paths, stdin), done, None),
            options,
            on_duplicate=on_duplicate,
            on_progress=progress,
        )
    else:
        records = islice(read_sources(paths, opts, stdin, exclude), done, None)
        summary = index_records(
            index,
            _tapped(records, on_record),
            options,
            on_duplicate=on_duplicate,
            on_progress=progress,
        )
    summary.resumed_after = done
    summary.skipped[:0] = earlier.skipped
    summary.skipped_before = earlier.more_skipped
    if checkpoint:
        checkpoint.clear()
    return summary


@dataclass
class DedupResult:
    """Ids in input order, near-duplicate pairs among them, and what was skipped."""

    ids: list[str]
    pairs: list[Pair]
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
) -> DedupResult:
    """All near-duplicate pairs within the input (no index): documents, or
    precomputed fingerprints with ``fingerprints=True``."""
    scheme.check_k(k)
    if fingerprints:
        ids, fps, skipped = read_fingerprint_arrays(paths)
    else:
        ids, fps, skipped = _fingerprinted_arrays(paths, opts, params, workers, exclude)
    pairs = near_duplicate_pairs(fps, k, scheme)
    return DedupResult(ids, pairs, skipped)


def _fingerprinted_arrays(
    paths: Sequence[str],
    opts: SourceOptions,
    params: FingerprintParams,
    workers: int,
    exclude: Sequence[Path],
) -> tuple[list[str], np.ndarray, list[BadRecord]]:
    ids: list[str] = []
    fps: list[int] = []
    skipped: list[BadRecord] = []
    records = (screen(r) for r in read_sources(paths, opts, exclude=exclude))
    for item in _fingerprinted(records, Fingerprinter(params), workers):
        if isinstance(item, BadRecord):
            skipped.append(item)
        else:
            ids.append(item[0])
            fps.append(item[1])
    return ids, np.array(fps, dtype=np.uint64), skipped


def _fingerprinted(
    records: Iterator[Record | BadRecord], fingerprinter: Fingerprinter, workers: int
) -> Iterator[tuple[str, int] | BadRecord]:
    for chunk, fps in fingerprint_chunks(records, fingerprinter, workers, _DEDUP_CHUNK):
        for record, fp in zip(chunk, fps):
            item = to_document(record, fp, store_text=False)
            yield item if isinstance(item, BadRecord) else (item.doc_id, item.fingerprint)
