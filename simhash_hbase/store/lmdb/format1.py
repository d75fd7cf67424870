"""Format 1, the embedded store's older layout: each index cell its own LMDB key
(13-byte row key + the document id, empty value), as HBase's KeyValues are, and a
docs row ``doc id -> columns`` (docs/SPEC.md, "The embedded store", format 1).

New indexes are in the compact format (tables.py); a format 1 file is still read
and written as it is (``shdb migrate`` moves it to today's format). Every method
takes a transaction the store began (on the table it reads); LMDB errors are the
store's to translate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import lmdb
import numpy as np

from simhash_hbase.errors import StoreCorrupt, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import CellBlock, CellsOf, IndexCell
from simhash_hbase.store.lmdb.columns import (
    _ID_COLUMN,
    _REBUILD,
    _decode_id,
    _encode_id,
    fold_key,
    pack_columns,
    pack_fingerprint_columns,
    sorted_keys,
    unpack_columns,
)

TABLES = (b"index", b"docs", b"meta")  # format 1's; the compact format's are cells.TABLES
Txn = Any  # an lmdb.Transaction, read as the store's code always has (bytes keys)


class Format1Batch:
    """All mutations of one batch in one LMDB write transaction (atomic, durable).

    Writes go in key order: LMDB then finds each key on or next to the page of
    the previous one, and keys above everything held (a fresh index) are
    appended without a tree search at all.
    """

    def __init__(self, store: Format1, txn: lmdb.Transaction) -> None:
        self._store = store
        self._txn = txn

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        return self._store.get_docs(self._txn, doc_ids)

    def claim_docs(
        self, intents: Mapping[str, Document | None], cells_of: CellsOf
    ) -> dict[str, Document]:
        """Read in the write transaction, which owns every row until it commits."""
        return self.get_docs(list(intents))

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        keys, values = self._store._index_items(cells, ordered=True)
        # A key held already holds this very cell: leave its page untouched.
        self._put_sorted(self._store._index, keys, values, overwrite=False)

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        for key in self._store._index_items(cells)[0]:
            self._txn.delete(key, db=self._store._index)

    def put_docs(self, docs: Iterable[Document]) -> None:
        items = self._store._doc_items(docs)
        items.sort()  # ids are unique within a batch: the index keeps the last version
        self._put_sorted(self._store._docs, [k for k, _ in items], [v for _, v in items])

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        """Delete docs rows by id: the id's key, and a row stored under the id's own
        bytes where that is not its key (an older layout kept ids of exactly
        the key limit unfolded; ``verify`` reports such a row)."""
        for doc_id in doc_ids:
            key = self._store._doc_key(doc_id)
            self._txn.delete(key, db=self._store._docs)
            raw = _encode_id(doc_id)
            if raw != key and len(raw) <= self._store._max_key:
                self._txn.delete(raw, db=self._store._docs)

    def _put_sorted(
        self, db: Any, keys: list[bytes], values: list[bytes] | None, *, overwrite: bool = True
    ) -> None:
        """Put unique, ascending ``keys`` with ``values`` (None: all empty)."""
        if not keys:
            return
        cursor = self._txn.cursor(db)
        append = not cursor.last() or bytes(cursor.key()) < keys[0]
        items = zip(keys, repeat(b"") if values is None else values)
        cursor.putmulti(items, append=append, overwrite=overwrite)


class Format1:
    """The tables of a format 1 file (``index`` and ``docs``; ``meta`` is the
    store's) and their reads; a batch's writes go through :class:`Format1Batch`."""

    def __init__(
        self,
        path: Path,
        max_key: int,
        corrupt_row: Callable[[StoreError], StoreCorrupt],
        index: Any,
        docs: Any,
    ) -> None:
        self.path = path
        self._max_key = max_key
        self._corrupt_row = corrupt_row
        self._index = index
        self._docs = docs

    # -- encoding of the two logical tables into LMDB keys ----------------------
    def _index_items(
        self, cells: Iterable[IndexCell], *, ordered: bool = False
    ) -> tuple[list[bytes], list[bytes] | None]:
        """Keys of ``cells`` (in key order if ``ordered``), and their values: None when
        all are empty (no folded key). Each id is encoded once."""
        limit = self._max_key - codec.ROWKEY_BYTES
        if isinstance(cells, CellBlock) and ordered:  # a batch's new cells: all in NumPy
            tails = list(map(_encode_id, cells.doc_ids))
            if tails and max(map(len, tails)) < limit:
                return sorted_keys(cells.rows, tails), None
        cells = list(cells)
        if not cells:
            return [], None
        rows = [row for row, _ in cells]
        ids = [doc_id for _, doc_id in cells]
        raw_ids = {doc_id: _encode_id(doc_id) for doc_id in set(ids)}
        raws = list(map(raw_ids.__getitem__, ids))
        if max(map(len, raw_ids.values())) < limit:  # ids up to ~500 bytes
            if ordered:
                keys = np.frombuffer(b"".join(rows), dtype=codec.ROWKEY_DTYPE)
                return sorted_keys(keys.reshape(-1, 1), raws), None
            return list(map(bytes.__add__, rows, raws)), None
        items = [
            (row + raw, b"") if len(raw) < limit else (fold_key(row + raw, self._max_key)[0], raw)
            for row, raw in zip(rows, raws)
        ]
        if ordered:  # folding reorders keys: sort what is stored
            items.sort()
        return [k for k, _ in items], [v for _, v in items]

    def _doc_key(self, doc_id: str) -> bytes:
        raw = _encode_id(doc_id)
        return fold_key(raw, self._max_key)[0]

    def _doc_items(self, docs: Iterable[Document]) -> list[tuple[bytes, bytes]]:
        """(key, value) per docs row; rows of a fingerprint alone are packed in one go."""
        items, bare = [], []
        limit = self._max_key
        for doc in docs:
            raw_id = _encode_id(doc.doc_id)
            bare_doc = doc.text is None and doc.meta is None and doc.sketch is None
            bare_doc = bare_doc and doc.time is None and doc.cluster is None
            if bare_doc and doc.bands is None and len(raw_id) < limit:
                bare.append((raw_id, doc.fingerprint))
                continue
            key, folded = fold_key(raw_id, limit)
            cols = codec.doc_to_columns(doc)
            if folded:
                cols[_ID_COLUMN] = raw_id
            items.append((key, pack_columns(cols)))
        if bare:
            keys, fps = zip(*bare)
            items += zip(keys, pack_fingerprint_columns(fps))
        return items

    def _doc_from_item(self, key: bytes, value: bytes | memoryview) -> Document:
        try:
            cols = unpack_columns(bytes(value))  # lmdb gives bytes: no copy
        except StoreError as exc:
            reason = f"the docs row {_decode_id(key)!r} is damaged (its columns are cut short)"
            raise self._corrupt_row(StoreError(reason)) from exc
        try:
            return codec.doc_from_columns(_decode_id(cols.pop(_ID_COLUMN, key)), cols)
        except StoreCorrupt as exc:
            raise self._corrupt_row(exc) from exc

    def _checked_doc(self, key: bytes, value: bytes) -> Document:
        """A docs row whose key is its id's key: two ids that ever shared a key
        (a collision) leave a row held under a key that is not its own."""
        doc = self._doc_from_item(key, value)
        if self._doc_key(doc.doc_id) != key:
            raise self._corrupt_row(
                StoreError(
                    f"the docs row of {doc.doc_id[:60]!r} is held under the key "
                    f"{key[:24].hex()}... ({len(key)} bytes), not its own (another id "
                    "shared its key, or an older layout wrote it)"
                )
            )
        return doc

    def _cell_from_item(self, key: bytes, value: bytes) -> IndexCell:
        if len(key) <= codec.ROWKEY_BYTES:
            raise StoreCorrupt(
                f"the embedded index at {self.path} holds an index key of {len(key)} bytes "
                f"({key.hex()}), too short for a cell; {_REBUILD}"
            )
        return key[: codec.ROWKEY_BYTES], _decode_id(value or key[codec.ROWKEY_BYTES :])

    def get_docs(self, txn: lmdb.Transaction, doc_ids: Sequence[str]) -> dict[str, Document]:
        """One multi-get in key order (a batch's look-up of the versions it replaces)."""
        keys = dict(zip(map(self._doc_key, doc_ids), doc_ids))  # ids checked by the index
        found = txn.cursor(self._docs).getmulti(sorted(keys))
        return {keys[bytes(k)]: self._doc_from_item(bytes(k), v) for k, v in found}

    # -- reads (the store's protocol, in this format) ---------------------------
    def scan(
        self, txn: Txn, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None
    ) -> list[list[IndexCell]]:
        """The cells under each list of prefixes: one cursor for all scans; most
        prefixes match nothing, so the common case is one seek per prefix."""
        results: list[list[IndexCell]] = []
        cursor = txn.cursor()
        seek, key_of, value_of, next_ = (
            cursor.set_range,
            cursor.key,
            cursor.value,
            cursor.next,
        )
        for prefixes in prefix_lists:
            cells: list[IndexCell] = []
            for prefix in prefixes:
                found = seek(prefix)
                current, taken = b"", 0
                while found:
                    key = key_of()
                    if not key.startswith(prefix):
                        break
                    if row_cap is not None:  # a hot row: skip past its cap
                        if current and key.startswith(current):
                            taken += 1
                            if taken > row_cap:
                                found = seek(codec.prefix_stop(current))
                                continue
                        else:
                            current, taken = key[: codec.ROWKEY_BYTES], 1
                    value = value_of()
                    if value or len(key) <= codec.ROWKEY_BYTES:  # folded, or damaged
                        cells.append(self._cell_from_item(key, value))
                    else:  # the common cell, inline (4x4 at 1 M: ~60 a query)
                        row, raw_id = key[: codec.ROWKEY_BYTES], key[codec.ROWKEY_BYTES :]
                        cells.append((row, _decode_id(raw_id)))
                    found = next_()
            results.append(cells)
        return results

    def row_sizes(self, txn: Txn, rows: Sequence[bytes]) -> dict[bytes, int]:
        """Cells per index row, by walking its keys without decoding them."""
        sizes: dict[bytes, int] = {}
        cursor = txn.cursor()
        for row in rows:
            n = 0
            if cursor.set_range(row):
                for key in cursor.iternext(keys=True, values=False):
                    if not key.startswith(row):
                        break
                    n += 1
            sizes[row] = n
        return sizes

    def iter_docs(self, txn: Txn) -> Iterator[tuple[bytes, Document | StoreCorrupt]]:
        """Every docs row (key, document), or (key, error) for a damaged one."""
        for key, value in txn.cursor():
            try:
                yield key, self._checked_doc(key, value)
            except StoreCorrupt as exc:
                yield key, exc

    def iter_index(self, txn: Txn) -> Iterator[IndexCell]:
        for key, value in txn.cursor():
            yield self._cell_from_item(key, value)

    def counts(self, txn: Txn) -> tuple[int, int]:
        """(documents, index cells) held."""
        return txn.stat(self._docs)["entries"], txn.stat(self._index)["entries"]
