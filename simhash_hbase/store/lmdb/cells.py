"""The compact embedded layout (formats 2 to 4; docs/SPEC.md, "The embedded store"):
its tables, constants, state record and packed cells.

Format 1 wrote each index cell as its own LMDB key (13-byte row key + the
document id): ~45 bytes of key, node and slack per cell, and a file that grew to
~1,270 bytes a document. Format 2 keeps the same logical tables in four LMDB
databases:

- ``index``: a *bucket* key (the cell's flag and the top 16 bits of its field,
  3 bytes) -> its cells packed side by side, 6 bytes each: the low 16 bits of the
  field and the 4-byte document number. A bucket holds N / 65,536 cells of its
  flag (~15 at 1 M documents, ~150 at 10 M), so a cell costs ~6.5 bytes, and a
  prefix scan is one LMDB get and a ``bytes.find`` in C.
- ``names``: document number -> fingerprint (8 bytes) + id. Numbers ascend, so
  it is only ever appended to. A cell is visible only while its number has a
  names row: the names rows are the commit record of a batch's cells.
- ``docs``: id -> number (4 bytes), fingerprint (8 bytes), then the other
  columns packed as in format 1 (text, meta, sketch, bands; the full id of a folded
  key). A row of 4 bytes numbers an id that has cells but no document.
- ``meta``: as in format 1, plus the store's own record :data:`STATE`.
- ``hot`` (format 3): the cells of a lead holding :data:`~.tuning.HOT` cells or more (mass
  copies of one fingerprint), a key each in id order, so that a batch or a bounded
  query never reads such a row whole; its bucket keeps a mark (docs/SPEC.md).

Document numbers are exact: an id keeps its number until its row is deleted; a
folded id (over LMDB's 511-byte key limit) is compared in full with the id its
row holds, so two ids never share a number. Numbers are never reused.

Why a batch commits in parts: LMDB copies every page a transaction touches and
can reuse a freed page only two commits later, so one transaction that touches
the whole index leaves the file ~3x the index. A batch's cells of new documents
(new numbers, invisible until their names rows exist) are therefore written in
several commits of one key range each, and the rest of the batch (names and docs
rows, deletions, cells of documents already numbered) in one last commit: what
readers see still changes all at once, at that commit.

Format 3 adds a second table of buckets, ``fresh`` (an LSM tree of two levels):
new documents' cells go there, and it is merged into ``index`` once it holds
1/:data:`~.tuning.FRESH_RATIO` of its cells, so a batch rewrites the buckets of a small tier and
not, as in format 2, every bucket of the whole index (its cost grew with N).
Queries read both tiers. A format 2 file is a format 3 file with no fresh tier.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import pairwise, repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from simhash_hbase.errors import StoreCorrupt, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import IndexCell

FORMAT = 4  # 3 + the tiers' prefix filters; 3 is 2 + the fresh tier
STATE = "store/embedded"  # meta record: format, next number, cells and documents held
TABLES = (b"index", b"docs", b"names", b"meta")  # format 2's; format 3 adds FRESH
FRESH = b"fresh"
HOT_ROWS = b"hot"  # the cells of hot leads, a key each (see tuning.HOT)
FILTERS = b"filters"  # format 4: each tier's PrefixFilter, kept exact by every commit
ALL_TABLES = (*TABLES, FRESH, HOT_ROWS, FILTERS)
TIMES = b"times"  # a retained index's time order (times.py); made by an index that asks
TIERS = (b"index", FRESH)  # a tier's filter is kept under its table's name
CELL = np.dtype([("lo", ">u2"), ("num", ">u4")])
CELL_BYTES = CELL.itemsize
MAX_DOCUMENTS = (1 << 32) - 1
# lmdb.Transaction; its stubs type every value as bytes | memoryview, and this
# layout never asks LMDB for buffers: values are bytes.
Txn = Any
_NUM = struct.Struct(">I")
_HEAD = struct.Struct(">IQ")  # a docs row: number, fingerprint, then packed columns
_BARE = np.dtype([("num", ">u4"), ("fp", ">u8")])
_ID_COLUMN = b"_id"
_DOC_ID = attrgetter("doc_id")
#: A docs row of a number, a fingerprint and a time: the head, then ``f:t`` packed
#: as format 1 packs a column (u8 name length, u32 value length, name, value).
_TIMED = np.dtype(
    [
        ("num", ">u4"),
        ("fp", ">u8"),
        ("name_len", "u1"),
        ("value_len", ">u4"),
        ("name", "S3"),
        ("time", ">i8"),
    ]
)
#: The number of a bucket cell that marks its lead as spilled (never a document's:
#: numbers stop at MAX_DOCUMENTS - 1).
SPILLED = b"\xff\xff\xff\xff"
_HEAD_BYTES = 5  # a spilled cell's key: flag, field (4), fingerprint (8), id


Buckets = tuple[list[bytes], list[bytes]]  # bucket keys and their packed cells


class Helpers(NamedTuple):
    """What the layout borrows from :class:`EmbeddedStore` (format 1's row codecs)."""

    path: Path
    max_key: int
    fold: Callable[[bytes], bytes]  # the LMDB key of an id (folded past the key limit)
    pack_columns: Callable[[Mapping[bytes, bytes]], bytes]
    unpack_columns: Callable[[bytes], dict[bytes, bytes]]
    corrupt_row: Callable[[StoreError], StoreCorrupt]
    rebuild: str


_UTF8, _ESCAPE = repeat("utf-8"), repeat("surrogateescape")  # decode_id's arguments, for map


def encode_id(doc_id: str) -> bytes:
    return doc_id.encode("utf-8", "surrogateescape")


def decode_id(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


#: In the store's record while a bulk load runs: its rows become one index at its end.
LOADING = "loading"


def new_state() -> dict[str, Any]:
    return {
        "format": FORMAT,
        "bucket_bits": 16,
        "next": 0,
        "cells": 0,
        "fresh": 0,
        "documents": 0,
    }


def grouped(rows: np.ndarray, nums: np.ndarray) -> tuple[list[bytes], list[bytes]]:
    """Bucket keys (ascending) and each bucket's packed cells, of an (n, c) row-key
    array (:data:`codec.ROWKEY_DTYPE`) whose document i has number ``nums[i]``."""
    c = rows.shape[1] if rows.ndim == 2 else 1
    flat = np.ascontiguousarray(rows).reshape(-1)
    field = flat["field"].astype(np.uint32)
    bucket = flat["flag"].astype(np.uint32) << np.uint32(16) | field >> np.uint32(16)
    order = np.argsort(bucket)  # the order of cells within a bucket is free
    cells = np.empty(len(flat), dtype=CELL)
    cells["lo"] = field[order] & np.uint32(0xFFFF)
    cells["num"] = np.repeat(np.asarray(nums, dtype=np.uint32), c)[order]
    bucket = bucket[order]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    keys = (bucket[starts] << np.uint32(8)).astype(">u4").view(np.uint8).reshape(-1, 4)
    buf = cells.tobytes()
    bounds = [*(starts * CELL_BYTES).tolist(), len(buf)]
    packed = [buf[a:b] for a, b in pairwise(bounds)]
    return np.ascontiguousarray(keys[:, :3]).view("V3").reshape(-1).tolist(), packed


def cell_rows(cells: Sequence[IndexCell]) -> np.ndarray:
    """The row keys of ``cells`` as a ROWKEY_DTYPE array."""
    return np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)


def find_cells(packed: bytes, lead: bytes) -> Iterator[int]:
    """Offsets of the cells of ``packed`` whose first two bytes are ``lead``."""
    return find_cells_at(packed, lead, 0)


def find_cells_at(packed: bytes, part: bytes, offset: int) -> Iterator[int]:
    """Offsets of ``part`` in ``packed`` that start ``offset`` bytes into a cell."""
    pos = packed.find(part)
    while pos >= 0:
        if pos % CELL_BYTES == offset:
            yield pos
        pos = packed.find(part, pos + 1)


def spilled_leads(packed: bytes) -> set[bytes]:
    """The leads a bucket's cells mark as spilled."""
    if SPILLED not in packed:  # most buckets
        return set()
    return {packed[pos - 2 : pos] for pos in find_cells_at(packed, SPILLED, 2)}


def bare_rows(nums: Sequence[int], docs: Sequence[Document]) -> list[bytes] | None:
    """The docs rows of documents holding only a fingerprint (and maybe a time, on
    every one or on none), packed in one NumPy pass, as :meth:`Tables.doc_value`
    packs them one by one; None: they hold other columns (pack them one by one)."""
    if not codec.bare(docs):  # other columns than a time (codec.EXTRAS has none)
        return None
    times = [doc.time for doc in docs]
    timed = bool(times) and times[0] is not None
    if any((t is None) is timed for t in times):
        return None
    kind = _TIMED if timed else _BARE
    rows = np.empty(len(docs), dtype=kind)
    rows["num"] = np.fromiter(nums, dtype=np.uint32, count=len(docs))
    rows["fp"] = np.fromiter((d.fingerprint for d in docs), dtype=np.uint64, count=len(docs))
    if timed:
        rows["name_len"] = len(codec.COL_TIME)
        rows["value_len"] = codec.TIME_BYTES
        rows["name"] = codec.COL_TIME
        rows["time"] = np.array(times, dtype=np.int64)
    buf, step = rows.tobytes(), kind.itemsize
    return [buf[i : i + step] for i in range(0, len(buf), step)]


def bare_docs(ids: Sequence[str], values: Sequence[bytes]) -> list[Document] | None:
    """The documents of docs rows that :func:`bare_rows` packs (a number, a
    fingerprint and maybe a time, the same on every row), read in one NumPy pass;
    None: other rows (read them one by one). A bulk removal reads its ids' rows so."""
    if not values:
        return []
    size = len(values[0])
    kind = _BARE if size == _BARE.itemsize else _TIMED if size == _TIMED.itemsize else None
    buf = b"".join(values)
    if kind is None or len(buf) != size * len(values):
        return None
    rows = np.frombuffer(buf, dtype=kind)
    fps = rows["fp"].tolist()
    if kind is _BARE:
        return [Document(doc_id, fp) for doc_id, fp in zip(ids, fps)]
    if not (
        (rows["name_len"] == len(codec.COL_TIME))
        & (rows["value_len"] == codec.TIME_BYTES)
        & (rows["name"] == codec.COL_TIME)
    ).all():
        return None
    return [Document(i, fp, time=t) for i, fp, t in zip(ids, fps, rows["time"].tolist())]
