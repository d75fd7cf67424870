"""Streaming jobs over an index: ingest (fingerprint -> batch -> lookups -> write)
and the all-pairs dedup of an input without an index.

Each record is prepared (:mod:`simhash_hbase.layout.prepare`, the one preparer;
in chunks through the workers by :mod:`simhash_hbase.jobs.prepared`) inside its
own error boundary: a bad one becomes a :class:`BadRecord` (skipped and
reported, or fatal with :attr:`OnError.FAIL`) and never costs a batch-mate. The
checkpoint, the report and their commit protocol are
:mod:`simhash_hbase.jobs.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from simhash_hbase.errors import InvalidInput, InvalidSetting, RejectedRecord, ShdbError
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.probes import check_probes
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.manifest import Wanted
from simhash_hbase.index.write import gc_paused
from simhash_hbase.jobs import checkpoint as checkpoint_mod
from simhash_hbase.jobs.checkpoint import (
    Checkpoint,
    Commits,
    Progress,
    Report,
    own_files,
)
from simhash_hbase.jobs.prepared import prepared_chunks
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.pairs import NearGraph, near_graph
from simhash_hbase.layout.prepare import Prepared, Preparer, checked, preparer_of
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.layout.window import Window
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    BadRecord,
    Document,
    IngestSummary,
    Lookup,
    OnError,
    Record,
    check_limit,
    now_ms,
)
from simhash_hbase.store import local_path
from simhash_hbase.text.readers import (
    STDIN,
    SourceOptions,
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
    # A batch written again without lookups (a resumed run's pending one): the
    # clusters its saved report lines gave, by id, kept as the lookups chose them.
    clusters: Mapping[str, str] | None = None

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


def _checked_pairs(chunk: list[tuple[str, int] | BadRecord]) -> list[Document | BadRecord]:
    """(id, fingerprint) pairs as documents arriving now, each :func:`checked`: a
    chunk of valid ones in a few C-level passes, else one by one (each bad one its
    BadRecord)."""
    now = now_ms()
    with gc_paused():  # a document a pair: see gc_paused
        items = [i if isinstance(i, BadRecord) else Document(*i, time=now) for i in chunk]
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
        if options.clusters:
            docs = [clustered(doc, options.clusters) for doc in docs]
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
        checkpoint_mod.fault("written")
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
    probed = bool(options.probes) and options.find_k is not None
    preparer = Preparer(index.fingerprinter, index.minhasher, options.probes if probed else 0)
    size = options.batch_size or DEFAULT_BATCH_SIZE
    step = min(size, FINGERPRINT_STEP)
    pieces = (
        _piece(chunk, prepared, probed)
        for chunk, prepared in prepared_chunks(
            records, preparer, options.workers, step, options.store_text
        )
    )
    chunks = _regrouped(pieces, size)
    return _write_stream(index, chunks, options, on_duplicate, on_progress, journal)


def _piece(
    chunk: list[Record | BadRecord], prepared: list[Prepared | BadRecord], probed: bool
) -> Chunk:
    """A piece of a write batch: its documents, bytes read and (``probed``) probe lists."""
    docs = [p.doc if isinstance(p, Prepared) else p for p in prepared]
    probes = [p.probes if isinstance(p, Prepared) else None for p in prepared] if probed else None
    return docs, sum(record.size for record in chunk), probes


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
    similarity: float | None = None,
    retain: int | None = None,
) -> Iterator[SimhashIndex]:
    """Open the index an ingest writes to, or create it (``create``). If this run created it and
    it holds no document at the end (every record skipped), it is removed again:
    a run that adds nothing creates nothing, and a re-run with other settings is
    not refused by the settings of an empty index. Other runs may write into it at
    the same time: :meth:`SimhashIndex.discard` decides in the write section, so it
    never discards what another run wrote, and a run that opened it before the
    discard fails at its first batch rather than write into a dropped index.
    ``similarity``: the report's (a new index records it as its default;
    :meth:`SimhashIndex.open`); ``retain``, a new index's retention."""
    folder = local_path(url)
    fresh = folder is not None and not folder.exists()
    with SimhashIndex.open(
        url, scheme=scheme, params=params, create=create, similarity=similarity, retain=retain
    ) as index:
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
    wait: float = 0.0,
) -> IngestSummary:
    """The streaming-dedup job: index every record and report near-copies found.

    ``fingerprints``: the input is ``HEX`` or ``ID<TAB>HEX`` lines (a Spark job's
    output, say) rather than documents. The index's own folder and ``exclude``
    (an output, say) are never read as input; ``on_record`` sees each record read.

    The commit protocol (:class:`~simhash_hbase.jobs.checkpoint.Commits`): a
    batch's near-duplicate lines are saved in the checkpoint before the batch is
    written, and appended to the report (synced) after it, then the checkpoint
    moves on. A re-run of the same
    command on the same input cuts the report back to the last checkpoint,
    writes a batch left pending again (writes are idempotent) and emits its
    saved lines, then resumes after it and reports the skipped records again.
    So whatever stops a run (kill -9, a closed pipe, a full disk, Ctrl-C), a
    line is in the report if and only if its document is in the index once the
    ingest has finished, and a re-run never loses or repeats a line.

    Runs of other inputs write into one index at once, each reporting the pairs it
    completes as one run would (docs/SPEC.md, "Concurrent writers"); a run of the
    same input (so of the same checkpoint) as a running one waits up to ``wait`` s,
    then gets :class:`IndexBusy` naming it. A stdin run has no checkpoint to share.
    """
    options = options or IngestOptions()
    opts = dataclasses.replace(opts, html=index.params.html)  # pages read as the index says
    exclude = [*own_files(index), *exclude]
    checkpoint = (
        Checkpoint.of(
            index,
            paths,
            opts,
            store_text=options.store_text,
            fingerprints=fingerprints,
            exclude=exclude,
        )
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

    # runs of other inputs write at once (the write section keeps answers exact);
    # one input's runs would share its checkpoint, so they take turns
    held = (
        index.sole_writer("shdb ingest", wait, checkpoint.key)
        if checkpoint is not None
        else nullcontext()
    )
    with held:
        earlier = checkpoint.load() if checkpoint else Progress()
        if report is not None and earlier.report_bytes is not None:
            report.truncate(earlier.report_bytes)  # lines past the checkpoint are re-emitted
        pending = checkpoint.pending() if checkpoint else None
        redone = IngestSummary()
        if pending is not None and checkpoint is not None:
            again = _writes_only(options, pending.lines)
            redone = write(earlier.records, pending.after.records, again, None)
            earlier = dataclasses.replace(
                pending.after,
                report_bytes=report.append(pending.lines) if report is not None else None,
            )
            checkpoint.save(earlier)
            redone.duplicates = len(pending.lines)
        if report is not None:
            earlier.report_bytes = report.size()
        done = earlier.records
        summary = write(done, None, options, Commits(checkpoint, report, earlier))
        summary.add(redone)
        summary.duplicates += redone.duplicates
        summary.resumed_after = done
        summary.skipped[:0] = earlier.skipped
        summary.skipped_before = earlier.more_skipped
        if checkpoint:
            checkpoint.clear()
        return summary


def _writes_only(options: IngestOptions, lines: Sequence[str]) -> IngestOptions:
    """The options of a batch written again: no look-ups (its lines are saved, and
    with them the clusters its documents joined)."""
    return dataclasses.replace(options, find_k=None, probes=0, clusters=saved_clusters(lines))


def saved_clusters(lines: Sequence[str]) -> dict[str, str]:
    """The clusters a batch's lookups gave its documents, by id, from its saved
    report lines (``{"id", ..., "cluster"}``): a batch written again without
    lookups (a resumed ingest's, a retried Spark task's) keeps them."""
    clusters = {}
    for line in lines:
        found = json.loads(line)
        if found.get("cluster") not in (None, found["id"]):
            clusters[found["id"]] = found["cluster"]
    return clusters


def clustered(doc: Document, clusters: Mapping[str, str]) -> Document:
    """``doc`` in its cluster of ``clusters`` (:func:`saved_clusters`), if it has one."""
    cluster = clusters.get(doc.doc_id)
    return doc if cluster is None else dataclasses.replace(doc, cluster=cluster)


@dataclass
class DedupResult:
    """Ids in input order, their near-duplicate graph (identical fingerprints as
    one node: see :func:`~simhash_hbase.layout.pairs.nearest_earlier` and
    :func:`~simhash_hbase.layout.pairs.clusters_of`), and what was skipped."""

    ids: list[str]
    graph: NearGraph
    skipped: list[BadRecord]
    #: Inputs left out: their time is outside the run's window.
    outside: int = 0


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
    window: Window | None = None,
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

    A ``window`` keeps the inputs whose time (``opts.time_field``, which it needs:
    an input has no other time) it holds: the pairs among the documents inside it,
    as an index in that window holding them all would find them.
    """
    scheme.check_k(k)
    opts = dataclasses.replace(opts, html=params.html)  # pages read as the params say
    sketches: list[bytes | None] = []
    bands: list[bytes | None] = []
    if window is not None and (fingerprints or opts.time_field is None):
        raise InvalidInput(
            "a window needs the inputs' times: give --time-field NAME (JSON or CSV "
            "records; --fingerprints input has no times)"
        )
    outside = 0
    if fingerprints:
        ids, fps, skipped = read_fingerprint_arrays(paths)
        lsh = None
    else:
        ids, fps, skipped, sketches, bands, outside = _fingerprinted_arrays(
            paths, opts, preparer_of(params, lsh), workers, exclude, window
        )
    if lsh is None or not any(s is not None for s in sketches):
        return DedupResult(ids, near_graph(fps, k, scheme), skipped, outside)
    return DedupResult(ids, nets_graph(fps, k, scheme, lsh, sketches, bands), skipped, outside)


def _fingerprinted_arrays(
    paths: Sequence[str],
    opts: SourceOptions,
    preparer: Preparer,
    workers: int,
    exclude: Sequence[Path],
    window: Window | None,
) -> tuple[list[str], np.ndarray, list[BadRecord], list[bytes | None], list[bytes | None], int]:
    """Ids, fingerprints, skipped records, (with an LSH net) sketches and band keys, of
    the inputs inside ``window``; and how many were outside it."""
    ids: list[str] = []
    fps: list[int] = []
    skipped: list[BadRecord] = []
    sketches: list[bytes | None] = []
    bands: list[bytes | None] = []
    outside = 0
    records = read_sources(paths, opts, exclude=exclude)
    prepared = prepared_chunks(records, preparer, workers, _DEDUP_CHUNK)
    for item in (item for _, chunk in prepared for item in chunk):
        if isinstance(item, BadRecord):
            skipped.append(item)
        elif window is not None and not window.holds(item.doc.time):
            outside += 1
        else:
            ids.append(item.doc.doc_id)
            fps.append(item.doc.fingerprint)
            sketches.append(item.doc.sketch)
            bands.append(item.doc.bands)
    return ids, np.array(fps, dtype=np.uint64), skipped, sketches, bands, outside
