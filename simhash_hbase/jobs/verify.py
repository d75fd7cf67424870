"""`shdb verify`: every document has all its index cells, and no cell is stale.

One pass over the docs table (ids and fingerprints held in memory, ~100 bytes a
document) and one over the index table, each range by range on ``workers``
threads; or, for an index too large to hold (a billion documents: ~100 GB), a
sample of each table's regions checked by point reads (:func:`verify_sample`).
Meant to run while nothing writes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from simhash_hbase.errors import InvalidSetting, StoreCorrupt
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.census import Progress, check, each, extrapolate, ranges_of, sampled
from simhash_hbase.layout import codec
from simhash_hbase.layout.nets import first_band_flag
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


def _key_is_valid(index: SimhashIndex, row: bytes, doc: Document | None) -> bool:
    """The cell is one ``doc`` owns: a segment combination of its fingerprint, or
    (flags after them) one of its LSH band keys."""
    if len(row) != codec.ROWKEY_BYTES or doc is None:
        return False
    field_value, flag, fp = codec.decode_rowkey(row)
    if fp != doc.fingerprint:
        return False
    fields = index.scheme.fields(fp)
    if 1 <= flag <= len(fields):
        return fields[flag - 1] == field_value
    band = flag - first_band_flag(index.scheme)
    if doc.bands is None or not 0 <= band < len(doc.bands) // codec.BAND_BYTES:
        return False
    return int(codec.decode_bands(doc.bands)[band]) == field_value


def verify(
    index: SimhashIndex,
    *,
    repair: bool = False,
    workers: int = 1,
    sample: float | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check (and with ``repair`` fix) the index against its docs table, reading each
    table range by range on ``workers`` threads (:mod:`.census`); with ``sample``, a
    fraction of the ranges only (:func:`verify_sample`)."""
    check(workers, sample)
    if sample is not None:
        if repair:
            raise InvalidSetting("sample", "a sampled verify repairs nothing: drop --repair")
        return verify_sample(index, sample, workers, progress)
    report = VerifyReport()
    corrupt: list[str] = []

    def on_corrupt(doc_id: str, error: StoreCorrupt) -> None:
        corrupt.append(doc_id)
        if len(corrupt) <= _EXAMPLES:
            report.examples.append(str(error))

    def read_docs(key_range: KeyRange) -> list[Document]:
        return [
            Document(doc.doc_id, doc.fingerprint, bands=doc.bands)
            for doc in index.documents(on_corrupt, key_range)
        ]

    parts = each("docs", ranges_of(index, "docs"), read_docs, workers, progress)
    docs = {doc.doc_id: doc for part in parts for doc in part}
    report.corrupt_documents = len(corrupt)
    report.documents = len(docs)

    def read_cells(key_range: KeyRange) -> tuple[int, Counter[str], list[IndexCell]]:
        present: Counter[str] = Counter()
        stale: list[IndexCell] = []
        cells = 0
        for row, doc_id in index.index_cells(key_range):
            cells += 1
            if _key_is_valid(index, row, docs.get(doc_id)):
                present[doc_id] += 1
            else:
                stale.append((row, doc_id))
        return cells, present, stale

    present: Counter[str] = Counter()
    stale: list[IndexCell] = []
    for cells, held, bad in each("index", ranges_of(index, "index"), read_cells, workers, progress):
        report.cells += cells
        present.update(held)
        stale += bad
    report.stale_cells = len(stale)
    report.examples += [f"stale cell {row.hex()} -> {d!r}" for row, d in stale[:_EXAMPLES]]
    incomplete = [d for d in docs.values() if present[d.doc_id] < _cells_per_doc(index, d)]
    report.incomplete_documents = len(incomplete)
    report.missing_cells = sum(_cells_per_doc(index, d) - present[d.doc_id] for d in incomplete)
    report.examples += [
        f"document {d.doc_id!r} has {present[d.doc_id]} of {_cells_per_doc(index, d)} cells"
        for d in incomplete[:_EXAMPLES]
    ]
    if repair:
        for start in range(0, len(stale), _REPAIR_BATCH):
            index.write_cells(delete=stale[start : start + _REPAIR_BATCH])
        # a damaged document's cells are stale: it is not in docs
        index.write_cells(put=index.cells(incomplete), drop_rows=corrupt)
        report.repaired = True
    return report


def _cells_per_doc(index: SimhashIndex, doc: Document) -> int:
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

    def check_docs(key_range: KeyRange) -> tuple[int, int, int, list[str]]:
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

    def check_cells(key_range: KeyRange) -> tuple[int, int, list[str]]:
        cells = stale = 0
        examples: list[str] = []
        batch: list[IndexCell] = []
        for cell in [*index.index_cells(key_range), None]:
            if cell is not None:
                batch.append(cell)
            if batch and (cell is None or len(batch) >= _CHECK_BATCH):
                docs = index.get_many(sorted({doc_id for _, doc_id in batch}))
                for row, doc_id in batch:
                    cells += 1
                    if not _key_is_valid(index, row, docs.get(doc_id)):
                        stale += 1
                        if len(examples) < _EXAMPLES:
                            examples.append(f"stale cell {row.hex()} -> {doc_id!r}")
                batch = []
        return cells, stale, examples

    by_docs = each("docs", docs_read, check_docs, workers, progress)
    by_cells = each("index", cells_read, check_cells, workers, progress)
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
    """``doc``'s cells under the scheme (not its band cells)."""
    flags = index.scheme.rows_per_fingerprint
    plain = Document(doc.doc_id, doc.fingerprint)
    return [c for c in index.cells([plain]) if 1 <= codec.decode_rowkey(c[0])[1] <= flags]
