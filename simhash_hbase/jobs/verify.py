"""`shdb verify`: every document has all its index cells, and no cell is stale.

One pass over the docs table (ids and fingerprints held in memory, ~100 bytes a
document) and one over the index table, each range by range in ``workers``
processes; or, for an index too large to hold (a billion documents: ~100 GB), a
sample of each table's regions checked by point reads (:func:`verify_sample`).
Meant to run while nothing writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from simhash_hbase.errors import InvalidSetting, StoreCorrupt
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.census import Progress, check, each, extrapolate, ranges_of, sampled
from simhash_hbase.layout import codec
from simhash_hbase.layout.nets import band_rows, pigeonhole_rows
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import Document
from simhash_hbase.store import IndexCell
from simhash_hbase.store.base import KeyRange

_REPAIR_BATCH = 10_000
_CHECK_BATCH = 1_000  # documents or cells a sampled verify looks up at once
_EXAMPLES = 5


@dataclass
class VerifyReport:
    documents: int = 0
    cells: int = 0
    stale_cells: int = 0  # cell of a missing document, of another fingerprint, or a bad key
    incomplete_documents: int = 0  # documents lacking some of their cells
    missing_cells: int = 0
    corrupt_documents: int = 0  # docs rows that cannot be read back; repair deletes them
    repaired: bool = False
    examples: list[str] = field(default_factory=list)  # a few of each kind of problem
    sample: float | None = None  # the fraction of regions read (None: all of them)
    estimates: dict[str, object] = field(default_factory=dict)  # a sample's, table-wide

    @property
    def clean(self) -> bool:
        return not (self.stale_cells or self.missing_cells or self.corrupt_documents)


def owned(
    scheme: Scheme, cells: Sequence[IndexCell], owners: Sequence[Document | None]
) -> np.ndarray:
    """Whether each cell is one of the cells of ``owners[i]`` (None: it has no
    owner): the row key its flag gives the owner's fingerprint, a pigeonhole
    combination or, after them, an LSH band key (:func:`.nets.pigeonhole_rows`,
    :func:`.nets.band_rows`: what :meth:`SimhashIndex.cells` writes; `shdb spark
    verify` joins with those). In NumPy, a batch at once."""
    ok = np.zeros(len(cells), dtype=bool)
    at: list[int] = []
    docs: list[Document] = []
    for i, ((row, _), doc) in enumerate(zip(cells, owners)):
        if doc is not None and len(row) == codec.ROWKEY_BYTES:
            at.append(i)
            docs.append(doc)
    if not at:
        return ok
    keys = np.frombuffer(b"".join([cells[i][0] for i in at]), dtype=codec.ROWKEY_DTYPE)
    fps = np.array([doc.fingerprint for doc in docs], dtype=np.uint64)
    col = keys["flag"].astype(np.int64) - 1
    combos = scheme.rows_per_fingerprint
    pigeon = (col >= 0) & (col < combos)
    want = pigeonhole_rows(scheme, fps)[np.arange(len(at)), np.clip(col, 0, combos - 1)]
    ok[at] = pigeon & (want == keys)
    by_count: dict[int, list[int]] = {}  # band cells, by their owner's number of bands
    for n in np.flatnonzero(col >= combos).tolist():
        bands = docs[n].bands or b""
        if col[n] - combos < len(bands) // codec.BAND_BYTES:
            by_count.setdefault(len(bands), []).append(n)
    for width, ns in by_count.items():
        joined = b"".join([docs[n].bands or b"" for n in ns])
        band_keys = np.frombuffer(joined, dtype=">u4").reshape(len(ns), width // codec.BAND_BYTES)
        want = band_rows(scheme, fps[ns], band_keys)[np.arange(len(ns)), col[ns] - combos]
        ok[[at[n] for n in ns]] = want == keys[ns]
    return ok


@dataclass
class _Held:
    """What one index range holds, judged without the docs table: a cell is kept
    with the fingerprint its row key carries (:data:`codec.ROWKEY_BYTES`: segment,
    flag, fingerprint). ``own``: (row, id, fingerprint) of the pigeonhole cells
    that fingerprint has, each valid if the id's document has it; ``others``: the
    rest (band cells, or stale), judged against the documents in the parent."""

    cells: int = 0
    own: list[tuple[bytes, str, int]] = field(default_factory=list)
    others: list[IndexCell] = field(default_factory=list)


def _read_held(index: SimhashIndex, key_range: KeyRange) -> _Held:
    held = _Held()
    cells = index.index_cells(key_range)
    while batch := list(islice(cells, _CHECK_BATCH)):
        held.cells += len(batch)
        fps = [codec.rowkey_fingerprint(row) for row, _ in batch]
        # no bands: a cell is judged against its row key's fingerprint's combinations
        mine = owned(index.scheme, batch, [Document(d, fp) for (_, d), fp in zip(batch, fps)])
        for (row, doc_id), fp, ok in zip(batch, fps, mine.tolist()):
            if ok:
                held.own.append((row, doc_id, fp))
            else:
                held.others.append((row, doc_id))
    return held


def read_docs(
    index: SimhashIndex, key_range: KeyRange
) -> tuple[list[Document], list[tuple[str, str]]]:
    """A docs range's documents (id, fingerprint, band keys) and its damaged rows
    (id, what is wrong)."""
    corrupt: list[tuple[str, str]] = []

    def on_corrupt(doc_id: str, error: StoreCorrupt) -> None:
        corrupt.append((doc_id, str(error)))

    docs = [
        Document(d.doc_id, d.fingerprint, bands=d.bands)
        for d in index.documents(on_corrupt, key_range)
    ]
    return docs, corrupt


def verify(
    index: SimhashIndex,
    *,
    repair: bool = False,
    workers: int = 1,
    sample: float | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check (and with ``repair`` fix) the index against its docs table, reading each
    table range by range in ``workers`` processes (:mod:`.census`); with ``sample``,
    a fraction of the ranges only (:func:`verify_sample`). The docs table is held
    here (~100 bytes a document); the index ranges are judged in the workers
    against the fingerprints in their row keys, and only what that leaves open is
    judged here against the documents."""
    check(workers, sample)
    if sample is not None:
        if repair:
            raise InvalidSetting("sample", "a sampled verify repairs nothing: drop --repair")
        return verify_sample(index, sample, workers, progress)
    report = VerifyReport()
    docs: dict[str, Document] = {}
    corrupt: list[tuple[str, str]] = []
    docs_ranges = ranges_of(index, "docs")
    for part, damaged in each("docs", index, docs_ranges, read_docs, workers, progress):
        docs.update((doc.doc_id, doc) for doc in part)
        corrupt += damaged
    report.corrupt_documents = len(corrupt)
    report.documents = len(docs)
    report.examples += [why for _, why in corrupt[:_EXAMPLES]]
    present: Counter[str] = Counter()
    stale: list[IndexCell] = []
    for held in each("index", index, ranges_of(index, "index"), _read_held, workers, progress):
        report.cells += held.cells
        for row, doc_id, fp in held.own:
            doc = docs.get(doc_id)
            if doc is not None and doc.fingerprint == fp:
                present[doc_id] += 1
            else:
                stale.append((row, doc_id))
        judged = owned(index.scheme, held.others, [docs.get(d) for _, d in held.others])
        for cell, ok in zip(held.others, judged.tolist()):
            if ok:
                present[cell[1]] += 1
            else:
                stale.append(cell)
    report.stale_cells = len(stale)
    report.examples += [f"stale cell {row.hex()} -> {d!r}" for row, d in stale[:_EXAMPLES]]
    incomplete = [d for d in docs.values() if present[d.doc_id] < cells_per_doc(index, d)]
    report.incomplete_documents = len(incomplete)
    report.missing_cells = sum(cells_per_doc(index, d) - present[d.doc_id] for d in incomplete)
    report.examples += [
        f"document {d.doc_id!r} has {present[d.doc_id]} of {cells_per_doc(index, d)} cells"
        for d in incomplete[:_EXAMPLES]
    ]
    if repair:
        for start in range(0, len(stale), _REPAIR_BATCH):
            index.write_cells(delete=stale[start : start + _REPAIR_BATCH])
        # a damaged document's cells are stale: it is not in docs
        dropped = [doc_id for doc_id, _ in corrupt]
        index.write_cells(put=index.cells(incomplete), drop_rows=dropped)
        report.repaired = True
    return report


def cells_per_doc(index: SimhashIndex, doc: Document) -> int:
    """How many cells :meth:`SimhashIndex.cells` gives ``doc``: its fingerprint's
    combinations and one a band key."""
    bands = len(doc.bands) // codec.BAND_BYTES if doc.bands else 0
    return index.scheme.rows_per_fingerprint + bands


def verify_sample(
    index: SimhashIndex, sample: float, workers: int, progress: Progress | None
) -> VerifyReport:
    """Verify a random ``sample`` of each table (pieces of its regions:
    :func:`.census.sampled`), by point reads instead
    of holding every document: each document of the sampled docs regions has its
    pigeonhole cells looked up (its band cells are not checked here), and each cell
    of the sampled index regions its document. The counts are those of the sample;
    ``estimates`` extrapolates them to the tables (:func:`.census.extrapolate`)."""
    report = VerifyReport(sample=sample)
    docs_ranges, docs_read = sampled(index, "docs", sample)
    index_ranges, cells_read = sampled(index, "index", sample)

    def check_docs(index: SimhashIndex, key_range: KeyRange) -> tuple[int, int, int, list[str]]:
        documents = incomplete = missing = 0
        examples: list[str] = []
        batch: list[Document] = []
        for doc in [*index.documents(None, key_range), None]:
            if doc is not None:
                batch.append(doc)
            if batch and (doc is None or len(batch) >= _CHECK_BATCH):
                found = index.candidates([d.fingerprint for d in batch])
                for d, cells in zip(batch, found):
                    held = set(cells)
                    lacking = sum(c not in held for c in _pigeonhole_cells(index, d))
                    documents += 1
                    incomplete += lacking > 0
                    missing += lacking
                    if lacking and len(examples) < _EXAMPLES:
                        examples.append(f"document {d.doc_id!r} lacks {lacking} pigeonhole cells")
                batch = []
        return documents, incomplete, missing, examples

    def check_cells(index: SimhashIndex, key_range: KeyRange) -> tuple[int, int, list[str]]:
        cells = stale = 0
        examples: list[str] = []
        batch: list[IndexCell] = []
        for cell in [*index.index_cells(key_range), None]:
            if cell is not None:
                batch.append(cell)
            if batch and (cell is None or len(batch) >= _CHECK_BATCH):
                docs = index.get_many(sorted({doc_id for _, doc_id in batch}))
                judged = owned(index.scheme, batch, [docs.get(d) for _, d in batch])
                bad = [cell for cell, ok in zip(batch, judged.tolist()) if not ok]
                cells += len(batch)
                stale += len(bad)
                examples += [f"stale cell {row.hex()} -> {d!r}" for row, d in bad]
                del examples[_EXAMPLES:]
                batch = []
        return cells, stale, examples

    by_docs = each("docs", index, docs_read, check_docs, workers, progress)
    by_cells = each("index", index, cells_read, check_cells, workers, progress)
    report.documents = sum(r[0] for r in by_docs)
    report.incomplete_documents = sum(r[1] for r in by_docs)
    report.missing_cells = sum(r[2] for r in by_docs)
    report.cells = sum(r[0] for r in by_cells)
    report.stale_cells = sum(r[1] for r in by_cells)
    report.examples = [e for r in by_docs for e in r[3]][:_EXAMPLES]
    report.examples += [e for r in by_cells for e in r[2]][:_EXAMPLES]
    docs_n, cells_n = len(docs_ranges), len(index_ranges)
    report.estimates = {
        "documents": extrapolate([r[0] for r in by_docs], docs_n).to_json(),
        "incomplete_documents": extrapolate([r[1] for r in by_docs], docs_n).to_json(),
        "missing_cells": extrapolate([r[2] for r in by_docs], docs_n).to_json(),
        "cells": extrapolate([r[0] for r in by_cells], cells_n).to_json(),
        "stale_cells": extrapolate([r[1] for r in by_cells], cells_n).to_json(),
        "pieces_read": {
            "docs": f"{len(docs_read)} of {docs_n}",
            "index": f"{len(cells_read)} of {cells_n}",
        },
    }
    return report


def _pigeonhole_cells(index: SimhashIndex, doc: Document) -> list[IndexCell]:
    """``doc``'s cells under the scheme (not its band cells: a document without
    band keys has none)."""
    return index.cells([Document(doc.doc_id, doc.fingerprint)])
