"""Code that runs inside Spark tasks: fingerprinting and writing a partition;
reading and repairing one for `shdb spark verify`.

A Python worker process runs many tasks one after another (Spark reuses it,
``spark.python.worker.reuse``), so its preparer (jieba's dictionary, ~1 s to
load) is built by its first task and kept for the others
(:func:`~simhash_hbase.layout.prepare.preparer_of`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, TypeVar

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.checkpoint import drop_lines, save_lines, saved_lines
from simhash_hbase.jobs.ingest import clustered, saved_clusters
from simhash_hbase.jobs.verify import read_docs
from simhash_hbase.layout.prepare import Prepared, prepare, preparer_of
from simhash_hbase.records import DEFAULT_LIMIT, BadRecord, Document, Lookup, Record
from simhash_hbase.spark.hfiles import Cell, docs_cells, index_cells
from simhash_hbase.store import IndexCell, open_store
from simhash_hbase.store.base import KeyRange
from simhash_hbase.store.hbase.settings import BUCKETS, layout_of

Item = tuple[int, Record | BadRecord]
DocItem = tuple[int, Document | BadRecord]
#: A docs row as verify reads it: (id, fingerprint, band keys, what is wrong or None).
DocRow = tuple[str, int | None, bytes | None, str | None]
T = TypeVar("T")

#: Test-only fault injection, read on the driver: "PARTITION:BATCHES" makes the
#: first attempt of that partition's write task die after that many batches,
#: with the next batch's index cells written and its docs rows not.
FAULT_ENV = "SHDB_SPARK_FAULT"


@dataclass(frozen=True)
class Fingerprinting:
    """What a task needs to fingerprint: picklable, shipped in the closure."""

    params: FingerprintParams
    idf_table: bytes | None  # a custom IDF table travels with the job
    store_text: bool = False
    #: The index's LSH net (None: the pigeonhole only): documents carry sketches.
    lsh: MinHashParams | None = None

    def documents(self, items: Iterable[Item]) -> Iterator[DocItem]:
        """Each record as a Document, or the reason it cannot be one."""
        preparer = preparer_of(self.params, self.lsh, self.idf_table)
        for pos, record in items:
            found = prepare(record, preparer, store_text=self.store_text)
            yield pos, found.doc if isinstance(found, Prepared) else found


def _batches(items: Iterable[DocItem], size: int) -> Iterator[list[Document]]:
    ordered = iter(sorted(items, key=lambda item: item[0]))  # same batches on a retry
    while batch := [doc for _, doc in islice(ordered, size)]:
        yield batch  # type: ignore[misc]


@dataclass(frozen=True)
class Reporting:
    """What a write task reports: each new document's near-copies within ``k`` (at
    most ``limit`` listed), found by the lookups its batch is written with, as
    `shdb ingest --report` finds them; each batch's lines are saved under the job
    state ``journal``/PARTITION/BATCH before the batch is written."""

    k: int
    journal: str
    limit: int = DEFAULT_LIMIT


#: What a write task yields a batch: the documents written, the batch's report
#: lines (`shdb ingest --report`'s: ``{"id", "matches", "total", ...}``) and the
#: job state record that saved them (None: no line, nothing saved).
Done = tuple[int, list[str], str | None]


def write_partition(
    url: str,
    part: int,
    items: Iterable[DocItem],
    batch_size: int,
    reporting: Reporting | None,
    fault: tuple[int, int] | None,
) -> Iterator[Done]:
    """Write partition ``part``'s documents batch by batch (stale cells, new cells,
    docs row: the index's crash-safe order), each batch with its lookups when
    ``reporting`` (:func:`write_reported`).

    A retried task writes the same batches again (sorted by input position): every
    write is idempotent, a document whose cells went in before a crash gets its
    docs row this time, and a batch reports what its first write saved.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    doomed = (
        fault is not None
        and ctx is not None
        and ctx.partitionId() == fault[0]
        and ctx.attemptNumber() == 0
    )
    with SimhashIndex.open(url, create=False) as index:
        for n, batch in enumerate(_batches(items, batch_size)):
            if doomed and fault is not None and n == fault[1]:
                _die_mid_batch(url, index, batch)
            if reporting is None:
                index.add_documents(batch)
                yield len(batch), [], None
                continue
            name = f"{reporting.journal}/{part}/{n}"
            lines = write_reported(index, batch, reporting, name)
            yield len(batch), lines, name if lines else None


def write_reported(
    index: SimhashIndex, batch: list[Document], reporting: Reporting, name: str
) -> list[str]:
    """One batch's lookups and write in one write section, as `shdb ingest` writes a
    batch (:meth:`SimhashIndex.add_documents`): its report lines (the near-copies
    among the documents committed before it, other writers' too, and the earlier
    ones of the batch) are saved in the job state ``name`` before the write, as an
    ingest's checkpoint saves them (again, with the pairs it adds, by a writer that
    lost its section inside its write). A batch whose lines are saved already (a
    retried task's, or a failed job's run again) is written again without lookups
    and reports them: its own first write would hide its pairs (a document held
    unchanged reports none), and pairs with documents committed since are their
    writers' to report. So a retry neither repeats nor loses a pair."""
    digest = _digest(batch)
    saved = index.get_state(name)
    if saved is not None and saved.get("batch") == digest:
        again = saved_lines(index, name, saved)
        clusters = saved_clusters(again)
        index.add_documents([clustered(doc, clusters) for doc in batch])
        return again
    if saved is not None:  # another input's, left by a run that failed
        forget(index, name, saved)
    lines: list[str] = []

    def save(found: list[Lookup]) -> None:
        lines[:] = [json.dumps({"id": f.doc_id, **f.matches.to_json()}) for f in found]
        if lines:
            index.put_state(name, {"batch": digest, **save_lines(index, name, lines)})

    index.add_documents(batch, find_k=reporting.k, limit=reporting.limit, before_write=save)
    return lines


def forget(index: SimhashIndex, name: str, saved: dict[str, Any] | None) -> None:
    """Delete a batch's saved report lines (``saved``: its job state record, as read)."""
    if saved is not None:
        drop_lines(index, name, saved)
        index.delete_state(name)


def forget_saved(url: str, batches: Iterable[Done]) -> None:
    """Delete the saved report lines of a partition's batches, once the job's report
    is written (in the tasks: a round trip or two a batch, spread over executors)."""
    names = [name for _, _, name in batches if name is not None]
    if names:
        with SimhashIndex.open(url, create=False) as index:
            for name in names:
                forget(index, name, index.get_state(name))


def _digest(batch: list[Document]) -> str:
    """What a batch is (ids, fingerprints, band keys): saved lines are its only if
    it is the same batch."""
    h = hashlib.sha256()
    for doc in batch:
        h.update(f"{doc.doc_id}\t{doc.fingerprint:x}\t{(doc.bands or b'').hex()}\n".encode())
    return h.hexdigest()[:32]


def split_held(
    url: str, items: Iterable[DocItem], batch_size: int
) -> Iterator[tuple[bool, DocItem]]:
    """Each document with whether the index already holds its id (batched reads
    of the docs rows): the bulk load writes only ids it does not hold; the others
    are replaced through the writers' protocol, which deletes their stale cells."""
    ordered = iter(items)
    with SimhashIndex.open(url, create=False) as index:
        while batch := list(islice(ordered, batch_size)):
            held = index.get_many([doc.doc_id for _, doc in batch])  # type: ignore[union-attr]
            for item in batch:
                yield item[1].doc_id in held, item  # type: ignore[union-attr]


def bulk_cells(url: str, table: str, items: Iterable[DocItem], batch_size: int) -> Iterator[Cell]:
    """The cells of a partition's documents in ``table`` ("index" or "docs") for
    the HFiles: exactly the cells the Thrift path puts."""
    ordered = iter(items)
    with SimhashIndex.open(url, create=False) as index:
        buckets = layout_of(index.manifest) == BUCKETS
        while batch := [doc for _, doc in islice(ordered, batch_size)]:
            docs: list[Document] = batch  # type: ignore[assignment]
            if table == "index":
                yield from index_cells(index.cells, docs, buckets)
            else:
                yield from docs_cells(docs)


def _die_mid_batch(url: str, index: SimhashIndex, batch: list[Document]) -> None:
    """The injected fault: the batch's first writes land (its cells; in the bucket
    layout its docs rows), the rest never do, and the worker process dies as if
    killed."""
    store = open_store(url, create=False)
    try:
        with store.batch() as writes:
            if store.index_follows_docs:
                writes.put_docs(batch)
            else:
                writes.put_index(index.cells(batch))
    finally:
        store.close()
    os._exit(17)


def parse_fault(spec: str | None) -> tuple[int, int] | None:
    if not spec:
        return None
    partition, _, batches = spec.partition(":")
    return int(partition), int(batches or 0)


# -- `shdb spark verify` and `stats` (:mod:`simhash_hbase.spark.verify`) --------------
def per_range(
    url: str, ranges: Iterable[KeyRange], read: Callable[[SimhashIndex, KeyRange], T]
) -> Iterator[T]:
    """``read`` of each key range of a task, through one index opened for it."""
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        for key_range in ranges:
            yield read(index, key_range)


def doc_rows(url: str, ranges: Iterable[KeyRange]) -> Iterator[DocRow]:
    """The docs rows of a task's ranges: (id, fingerprint, band keys, None), or
    (id, None, None, what is wrong) for a damaged one."""
    for docs, damaged in per_range(url, ranges, read_docs):
        yield from ((d.doc_id, d.fingerprint, d.bands, None) for d in docs)
        yield from ((doc_id, None, None, why) for doc_id, why in damaged)


def expected_cells(url: str, rows: Iterable[DocRow], batch_size: int) -> Iterator[IndexCell]:
    """The cells the documents of a task should have (:meth:`SimhashIndex.cells`)."""
    ordered = iter(rows)
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        while batch := list(islice(ordered, batch_size)):
            yield from index.cells([Document(i, fp, bands=b) for i, fp, b, _ in batch])  # type: ignore[arg-type]


def held_cells(url: str, ranges: Iterable[KeyRange]) -> Iterator[IndexCell]:
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        for key_range in ranges:
            yield from index.index_cells(key_range)


def write_fixes(url: str, edits: Iterable[tuple[str, Any]], batch_size: int) -> None:
    """Apply a task's share of a repair in batches: ("delete", cell) a stale cell,
    ("put", cell) a missing one, ("drop", id) a damaged docs row (its cells are
    stale: deleted too). The writes of `shdb verify --repair`, idempotent."""
    ordered = iter(edits)
    with SimhashIndex.open(url, create=False) as index:
        while batch := list(islice(ordered, batch_size)):
            index.write_cells(
                delete=[cell for what, cell in batch if what == "delete"],
                put=[cell for what, cell in batch if what == "put"],
                drop_rows=[doc_id for what, doc_id in batch if what == "drop"],
            )
