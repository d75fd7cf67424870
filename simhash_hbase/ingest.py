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
from typing import Any

import numpy as np

from . import codec
from .dedup import Pair, near_duplicate_pairs
from .errors import EmptyDocument, InvalidInput, InvalidSetting
from .fingerprint import Fingerprinter, FingerprintParams
from .index import SimhashIndex
from .probes import check_probes
from .records import (
    BadRecord,
    Document,
    Duplicate,
    IngestSummary,
    OnError,
    Problem,
    Record,
)
from .scheme import Scheme
from .sources import STDIN, SourceOptions, read_fingerprint_lines, read_sources

DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 1_000_000
_DEDUP_CHUNK = 1000

OnDuplicate = Callable[[Duplicate], None]
OnProgress = Callable[[IngestSummary], None]


@dataclass(frozen=True)
class IngestOptions:
    """How records are written (not what: that is the index's manifest)."""

    workers: int = 1
    store_text: bool = False
    find_k: int | None = 3  # report near-duplicates within k; None: no lookups
    on_error: OnError = OnError.SKIP
    batch_size: int = DEFAULT_BATCH_SIZE
    probes: int = 0  # multi-probe the find_k lookups (simhash_hbase.probes)

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise InvalidSetting(
                "batch_size", f"batch size must be 1..{MAX_BATCH_SIZE}, got {self.batch_size}"
            )
        if not 1 <= self.workers <= (os.cpu_count() or 1) * 4:
            raise InvalidSetting("workers", f"workers must be 1..4 x CPUs, got {self.workers}")
        object.__setattr__(self, "on_error", OnError(self.on_error))
        check_probes(self.probes)


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


def _as_record(item: Record | BadRecord | tuple[Any, ...]) -> Record | BadRecord:
    """Records from library callers may be plain (id, text[, meta]) tuples."""
    if isinstance(item, (Record, BadRecord)):
        return item
    if isinstance(item, tuple) and len(item) in (2, 3):
        return Record(*item)
    return BadRecord(repr(item)[:60], "not an (id, text[, meta]) record", 0, Problem.INVALID)


def to_document(
    record: Record | BadRecord, fp: int | EmptyDocument, store_text: bool
) -> Document | BadRecord:
    """A fingerprinted record as a storable Document, or why it cannot be one."""
    if isinstance(record, BadRecord):
        return record
    where = record.where or repr(record.doc_id)[:60]
    if not isinstance(record.text, str):
        return BadRecord(
            where,
            f"the text of {record.doc_id!r} is a {type(record.text).__name__}, not a string",
            record.size,
            Problem.WRONG_TYPE,
        )
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
) -> tuple[list[Document], InvalidInput | None]:
    """The chunk's documents up to the first bad record (``FAIL``), or all of them."""
    docs: list[Document] = []
    for item in chunk:
        summary.records += 1
        if isinstance(item, BadRecord):
            summary.skipped.append(item)
            if on_error is OnError.FAIL:
                return docs, InvalidInput(f"{item.where}: {item.reason}")
        else:
            docs.append(item)
    return docs, None


#: A chunk to write: its documents (and bad records), the bytes read, and when the
#: lookups are probed, each item's probe list (None for a bad record).
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
        for dup in index.add_documents(docs, find_k=options.find_k, probes=lists):
            summary.duplicates += 1
            if on_duplicate is not None:
                on_duplicate(dup)
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
    stream = (_as_record(r) for r in records)
    chunks: Iterable[Chunk]
    if options.probes and options.find_k is not None:
        chunks = (
            _probed_chunk(chunk, lists, options.store_text)
            for chunk, lists in probe_chunks(
                stream, fingerprinter, options.workers, options.batch_size, options.probes
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
                stream, fingerprinter, options.workers, options.batch_size
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
        for chunk in _chunks(iter(items), options.batch_size)
    )
    return _write_stream(index, chunks, options, on_duplicate, on_progress)


class Checkpoint:
    """How far an interrupted ingest of one input got, kept in the index.

    Named by a digest of the input (every path with its size and mtime) and of
    every option that changes what is written, so a re-run of the same command
    on the same input resumes, and anything else starts over.
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
    ) -> Checkpoint | None:
        """The checkpoint of one ingest; None for stdin, which cannot be read again."""
        identity = input_identity(paths, opts)
        if identity is None:
            return None
        return cls(index, [identity, options.store_text, fingerprints])

    def load(self) -> int:
        """Records already done (0 for a fresh start)."""
        return int((self._index.get_state(self.name) or {}).get("records", 0))

    def save(self, records: int) -> None:
        self._index.put_state(self.name, {"records": records})

    def clear(self) -> None:
        self._index.delete_state(self.name)


def input_identity(paths: Sequence[str], opts: SourceOptions) -> list[Any] | None:
    """The input as a checkpoint names it; None for stdin, which cannot be read again."""
    if STDIN in paths:
        return None
    identity: list[Any] = [dataclasses.asdict(opts)]
    for path in paths:
        info = os.stat(path)
        identity.append([os.path.abspath(path), info.st_size, info.st_mtime_ns])
    return identity


def ingest(
    index: SimhashIndex,
    paths: Sequence[str],
    opts: SourceOptions,
    options: IngestOptions | None = None,
    *,
    resume: bool = True,
    fingerprints: bool = False,
    on_duplicate: OnDuplicate | None = None,
    on_progress: OnProgress | None = None,
) -> IngestSummary:
    """The streaming-dedup job: index every record and report near-copies found.

    ``fingerprints``: the input is ``HEX`` or ``ID<TAB>HEX`` lines (a Spark job's
    output, say) rather than documents.

    After each batch the number of input records done is saved in the index; a
    re-run of the same command on the same files resumes after them (writes are
    idempotent, so the batch in flight when it stopped is simply written again).
    """
    options = options or IngestOptions()
    checkpoint = (
        Checkpoint.of(index, paths, opts, options, fingerprints=fingerprints) if resume else None
    )
    done = checkpoint.load() if checkpoint else 0

    def progress(summary: IngestSummary) -> None:
        if checkpoint:
            checkpoint.save(done + summary.records)
        if on_progress is not None:
            on_progress(summary)

    if fingerprints:
        summary = index_fingerprints(
            index,
            islice(read_fingerprint_lines(paths), done, None),
            options,
            on_duplicate=on_duplicate,
            on_progress=progress,
        )
    else:
        summary = index_records(
            index,
            islice(read_sources(paths, opts), done, None),
            options,
            on_duplicate=on_duplicate,
            on_progress=progress,
        )
    summary.resumed_after = done
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
) -> DedupResult:
    """All near-duplicate pairs within the input (no index): documents, or
    precomputed fingerprints with ``fingerprints=True``."""
    scheme.check_k(k)
    ids: list[str] = []
    fps: list[int] = []
    skipped: list[BadRecord] = []
    if fingerprints:
        items: Iterator[tuple[str, int] | BadRecord] = read_fingerprint_lines(paths)
    else:
        items = _fingerprinted(read_sources(paths, opts), Fingerprinter(params), workers)
    for item in items:
        if isinstance(item, BadRecord):
            skipped.append(item)
        else:
            ids.append(item[0])
            fps.append(item[1])
    pairs = near_duplicate_pairs(np.array(fps, dtype=np.uint64), k, scheme)
    return DedupResult(ids, pairs, skipped)


def _fingerprinted(
    records: Iterator[Record | BadRecord], fingerprinter: Fingerprinter, workers: int
) -> Iterator[tuple[str, int] | BadRecord]:
    for chunk, fps in fingerprint_chunks(records, fingerprinter, workers, _DEDUP_CHUNK):
        for record, fp in zip(chunk, fps):
            item = to_document(record, fp, store_text=False)
            yield item if isinstance(item, BadRecord) else (item.doc_id, item.fingerprint)
