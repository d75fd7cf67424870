"""`shdb verify`: every document has all its index cells, and no cell is stale.

One pass over the docs table (ids and fingerprints held in memory, ~100 bytes a
document) and one over the index table; meant to run while nothing writes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from simhash_hbase.errors import StoreCorrupt
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout import codec
from simhash_hbase.layout.nets import first_band_flag
from simhash_hbase.records import Document
from simhash_hbase.store import IndexCell

_REPAIR_BATCH = 10_000
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


def verify(index: SimhashIndex, *, repair: bool = False) -> VerifyReport:
    """Check (and with ``repair`` fix) the index against its docs table."""
    report = VerifyReport()
    corrupt: list[str] = []

    def on_corrupt(doc_id: str, error: StoreCorrupt) -> None:
        corrupt.append(doc_id)
        if len(corrupt) <= _EXAMPLES:
            report.examples.append(str(error))

    docs = {
        doc.doc_id: Document(doc.doc_id, doc.fingerprint, bands=doc.bands)
        for doc in index.documents(on_corrupt)
    }
    report.corrupt_documents = len(corrupt)
    report.documents = len(docs)
    present: Counter[str] = Counter()
    stale: list[IndexCell] = []
    for row, doc_id in index.index_cells():
        report.cells += 1
        if not _key_is_valid(index, row, docs.get(doc_id)):
            report.stale_cells += 1
            if report.stale_cells <= _EXAMPLES:
                report.examples.append(f"stale cell {row.hex()} -> {doc_id!r}")
            stale.append((row, doc_id))
            if repair and len(stale) >= _REPAIR_BATCH:
                _delete(index, stale)
        else:
            present[doc_id] += 1
    combos = index.scheme.rows_per_fingerprint

    def per_doc(doc: Document) -> int:
        return combos + (len(doc.bands) // codec.BAND_BYTES if doc.bands else 0)

    incomplete = [d for d in docs.values() if present[d.doc_id] < per_doc(d)]
    report.incomplete_documents = len(incomplete)
    report.missing_cells = sum(per_doc(d) - present[d.doc_id] for d in incomplete)
    report.examples += [
        f"document {d.doc_id!r} has {present[d.doc_id]} of {per_doc(d)} cells"
        for d in incomplete[:_EXAMPLES]
    ]
    if repair:
        _delete(index, stale)  # a damaged document's cells are stale: it is not in docs
        index.write_cells(put=index.cells(incomplete), drop_rows=corrupt)
        report.repaired = True
    return report


def _delete(index: SimhashIndex, cells: list[IndexCell]) -> None:
    index.write_cells(delete=cells)
    cells.clear()
