"""The compact embedded layout (formats 2 and 3; docs/SPEC.md, "The embedded store").

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
- ``hot`` (format 3): the cells of a lead holding :data:`HOT` cells or more (mass
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
1/FRESH_RATIO of its cells, so a batch rewrites the buckets of a small tier and
not, as in format 2, every bucket of the whole index (its cost grew with N).
Queries read both tiers. A format 2 file is a format 3 file with no fresh tier.
"""

from __future__ import annotations

import heapq
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from itertools import compress, islice, pairwise, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import lmdb
import numpy as np

from simhash_hbase import _native as native
from simhash_hbase.errors import StoreCorrupt, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import CellBlock, CellsOf, IndexCell
from simhash_hbase.store.lmdb import pages

FORMAT = 4  # 3 + the tiers' prefix filters; 3 is 2 + the fresh tier
STATE = "store/embedded"  # meta record: format, next number, cells and documents held
TABLES = (b"index", b"docs", b"names", b"meta")  # format 2's; format 3 adds FRESH
FRESH = b"fresh"
HOT_ROWS = b"hot"  # the cells of hot leads, a key each (see HOT)
FILTERS = b"filters"  # format 4: each tier's PrefixFilter, kept exact by every commit
ALL_TABLES = (*TABLES, FRESH, HOT_ROWS, FILTERS)
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
_COLUMNS = attrgetter("text", "meta", "sketch", "bands")  # a document's optional columns
_DOC_ID = attrgetter("doc_id")
_NO_COLUMNS = (None, None, None, None)  # == compares each: "" or {} is a column
PART_BYTES = 8 << 20  # an index this big or more takes a batch's new cells in parts
MAX_PARTS = 16  # file overhead ~2/MAX_PARTS of the index; each part costs a commit
PART_MIN_CELLS = 1 << 16  # fewer new cells than this go in the batch's one commit
# The fresh tier is merged into the index once it holds this many cells and at
# least 1/FRESH_RATIO of the index's: a batch then rewrites the buckets of a
# small tier, and the big buckets are rewritten once per ~FRESH_RATIO-th growth.
FRESH_MIN_CELLS = 1 << 23
FRESH_RATIO = 8
#: A bucket's cells of one lead (two bytes of the field) past this many move to keys
#: of their own in ``hot`` (a hot row: mass copies of one fingerprint), so that no
#: batch or query reads or rewrites them whole (docs/SPEC.md, "Hot rows").
HOT = 2048
#: A bucket is checked for hot leads each time it grows past a multiple of this
#: many bytes (amortised: one check per CHECK_BYTES / 6 cells appended to it).
CHECK_BYTES = HOT * CELL_BYTES // 2
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
    return {packed[pos - 2 : pos] for pos in find_cells_at(packed, SPILLED, 2)}


def bucket_keys(
    prefixes: list[bytes],
    index: PrefixFilter | None,
    fresh: PrefixFilter | None,
    trees: Trees | None = None,
) -> tuple[list[bytes], list[bytes]] | None:
    """One query's bucket keys (each prefix's flag, then its field's top two
    bytes) to ask of each tier: all, or (a :class:`PrefixFilter` of the tier)
    those whose prefix's bit is set. None where two prefixes share a bucket.
    The reference of ``_native.bucket_keys``, which also prefetches the pages
    of the searches (``trees``, :class:`Trees`): that changes no answer, and
    this one has no use for them."""
    keys = [prefix[4:5] + prefix[0:2] for prefix in prefixes]
    if len(set(keys)) != len(keys):
        return None
    index_keys, fresh_keys = (
        [key for key, prefix in zip(keys, prefixes) if tier is None or tier.holds(prefix)]
        for tier in (index, fresh)
    )
    return index_keys, fresh_keys


def bucket_nums(
    prefixes: list[bytes],
    found: list[tuple[bytes, bytes]],
    row_cap: int | None,
    trees: Trees | None = None,
) -> tuple[list[bytes], list[int]] | None:
    """The numbers of the cells of each prefix's lead in ``found`` ((bucket key,
    packed cells) of both tiers; the prefixes of distinct buckets), each once in
    the order first met, and how many cells name each. None where a lead is
    marked spilled or a prefix has ``row_cap`` (1 or more) cells or more.
    The reference of ``_native.bucket_nums``, which also prefetches the pages of
    the numbers' ``names`` searches where there are two or more (``trees``, as
    :func:`bucket_keys`)."""
    leads = {prefix[4:5] + prefix[0:2]: prefix[2:4] for prefix in prefixes}
    counts: dict[bytes, int] = {}
    per_key: dict[bytes, int] = {}  # cells of each prefix, in both tiers
    for key, packed in found:
        lead, here = leads[key], 0
        pos = packed.find(lead)
        while pos >= 0:
            if not pos % CELL_BYTES:
                num = packed[pos + 2 : pos + 6]
                counts[num] = counts.get(num, 0) + 1
                here += 1
            pos = packed.find(lead, pos + 1)
        per_key[key] = per_key.get(key, 0) + here
    if SPILLED in counts or (row_cap is not None and max(per_key.values(), default=0) >= row_cap):
        return None
    return list(counts), list(counts.values())


def _slots(shift: int, chunk: list[tuple[bytes, bytes]]) -> np.ndarray:
    """The bit (:meth:`PrefixFilter.slot`) of the prefix of each whole cell of
    ``chunk`` ((bucket key, packed cells) of a tier)."""
    keys = [b"\x00" + key for key, _ in chunk]
    values = [packed[: len(packed) - len(packed) % CELL_BYTES] for _, packed in chunk]
    sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) // CELL_BYTES
    head = np.repeat(np.frombuffer(b"".join(keys), dtype=">u4").astype(np.uint64), sizes)
    lo = np.frombuffer(b"".join(values), dtype=CELL)["lo"].astype(np.uint64)
    field = (head & np.uint64(0xFFFF)) << np.uint64(16) | lo
    value = field << np.uint64(8) | head >> np.uint64(16)
    return value * np.uint64(_SPREAD) >> np.uint64(shift)  # the product wraps, as in slot()


def mark_prefixes(bits: bytearray, shift: int, chunk: list[tuple[bytes, bytes]]) -> None:
    """Set in ``bits`` the bit of the prefix of each whole cell of ``chunk``.
    The reference of ``_native.mark_prefixes``."""
    slot = _slots(shift, chunk)
    view, byte, bit = np.frombuffer(bits, dtype=np.uint8), slot >> np.uint64(3), slot & np.uint64(7)
    for b in range(8):  # one bit at a time: a byte listed twice gets the same value twice
        view[byte[bit == b]] |= np.uint8(1 << b)


def marked_chunks(shift: int, chunk: list[tuple[bytes, bytes]]) -> set[int]:
    """The numbers of the persisted chunks (``FILTER_CHUNK`` bytes each) that
    marking ``chunk`` may change: a batch's commit rewrites only those, not the
    whole bitmap (16 MB for a fresh tier sized for 2^23 cells: a one-document
    commit took 15 ms instead of 1)."""
    byte = _slots(shift, chunk) >> np.uint64(3)
    return set(np.unique(byte // np.uint64(FILTER_CHUNK)).tolist())


class Probe(NamedTuple):
    """:func:`bucket_keys`, :func:`bucket_nums` and :func:`mark_prefixes`, in C
    where the extension is built (``$SHDB_NATIVE=0``: in Python); both give the
    same answers."""

    keys: Callable[
        [list[bytes], PrefixFilter | None, PrefixFilter | None, Trees | None],
        tuple[list[bytes], list[bytes]] | None,
    ]
    nums: Callable[
        [list[bytes], list[tuple[bytes, bytes]], int | None, Trees | None],
        tuple[list[bytes], list[int]] | None,
    ]
    mark: Callable[[bytearray, int, list[tuple[bytes, bytes]]], None]

    @classmethod
    def best(cls) -> Probe:
        c = native.module()
        if c is None:
            return cls(bucket_keys, bucket_nums, mark_prefixes)
        return cls(c.bucket_keys, c.bucket_nums, c.mark_prefixes)


#: Bits of a tier's :class:`PrefixFilter` per cell, at least: a probe whose
#: prefix the tier lacks finds its bit set ~1/bits of the time. The fresh tier's
#: holds few of a query's prefixes, so that most queries ask it nothing (at 8
#: bits, 72 % of queries still read it; at 32, 27 %: query p50 at 1 M 20.5 ->
#: 12.4 µs, same run); the index's, ~10 times bigger, holds those of the
#: documents found: it saves the probes of the others (about half). A reader at
#: 10 M holds ~128 MB + up to 64 MB of them (docs/embedded.md).
TIER_FILTER_BITS = {b"index": 8, FRESH: 16}
_MARK_CHUNK = 1 << 14  # buckets a call of mark_prefixes (bounded memory in NumPy)
#: A tier's bitmap has at most 2^this bits (256 MB): past ~30 M documents the
#: index's fills up (at 100 M, ~37 % of its bits set) rather than growing.
_MAX_FILTER_LOG = 31
_MIN_FILTER_LOG = 16
_SPREAD = 0x9E37_79B9_7F4A_7C15  # 2^64 / the golden ratio, odd (Fibonacci hashing)
_WORD = (1 << 64) - 1
#: A persisted filter: under the tier's name, the id of the write transaction that
#: wrote it and its shift; its bits under the name + u32 chunk number, this many
#: bytes a chunk: two to a 4 KB LMDB page, no overflow pages (those LMDB reuses
#: only in contiguous runs: a filter rewritten each batch in 1 MB chunks grew the
#: file by ~60 B a document at 1 M).
_FILTER_HEAD = struct.Struct(">QB")
FILTER_CHUNK = 1984


def filter_shift(cells: int, per_cell: int) -> int:
    """The shift of a filter of at least ``per_cell`` bits for each of ``cells``
    (up to twice that: a tier that grows past it gets one twice as big)."""
    size = (per_cell * max(cells, 1) - 1).bit_length()
    return 64 - min(_MAX_FILTER_LOG, max(_MIN_FILTER_LOG, size))


def tier_cells(state: dict[str, Any], tier: bytes) -> int:
    """The cells a tier holds, by the store's record."""
    fresh: int = state.get("fresh", 0)
    return fresh if tier == FRESH else state["cells"] - fresh


def fresh_due(state: dict[str, Any]) -> int:
    """The cells at which the fresh tier is merged into the index."""
    return max(FRESH_MIN_CELLS, tier_cells(state, b"index") // FRESH_RATIO)


class PrefixFilter(NamedTuple):
    """Which prefixes have cells in one tier: a bitmap of 2^(64 - ``shift``) bits
    (at least :data:`TIER_FILTER_BITS` a cell), each cell's prefix setting the bit
    :meth:`slot`, marks included. A probe whose bit is clear has no cell there,
    and a query skips its bucket in that tier (one cache-missing leaf less a probe)."""

    shift: int
    bits: bytearray

    @staticmethod
    def slot(prefix: bytes, shift: int) -> int:
        """The top bits of the prefix value (field << 8 | flag) times an odd
        constant: a field holds two segments of 12-13 bits each, so the values
        are not spread over their 40 bits (modulo 2^28 - 1 at 3 M, random
        prefixes found 38 % of the bits set where 8.5 % were)."""
        return (int.from_bytes(prefix, "big") * _SPREAD & _WORD) >> shift

    def holds(self, prefix: bytes) -> bool:
        h = self.slot(prefix, self.shift)
        return bool(self.bits[h >> 3] >> (h & 7) & 1)

    @classmethod
    def empty(cls, shift: int) -> PrefixFilter:
        return cls(shift, bytearray(1 << (64 - shift - 3)))


class TierFilters(NamedTuple):
    """The :class:`PrefixFilter` of each tier at one snapshot (the LMDB
    transaction id ``txn_id``; None: that tier is read whole). Exact: used only
    by read transactions of that snapshot (a commit changes the id)."""

    txn_id: int
    main: PrefixFilter | None  # the index tier's
    fresh: PrefixFilter | None


class Trees(NamedTuple):
    """Where one snapshot's bucket tables lie in this process's map of the file:
    the map's address, the pages the file held (it never shrinks), the page
    size, and the root page of each tier's table and of ``names`` (``P_INVALID``,
    2^64 - 1: empty).
    The C probe prefetches with it the pages the searches of a query's buckets
    will read, the searches of all ten a tree level at a time, so that their
    cache misses overlap: at 3 M documents a bucket read waited on ~5 of them,
    one after another (docs/embedded.md, "Prefetched searches")."""

    base: int
    pages: int
    psize: int
    index_root: int
    fresh_root: int
    names_root: int


#: An LMDB sub-database's record in the main database (LMDB 0.9's ``MDB_db``,
#: 64-bit): pad, flags, depth, branch, leaf and overflow pages, entries, root.
_DB_RECORD = struct.Struct("=IHHQQQQQ")
_NO_ROOT = (1 << 64) - 1  # P_INVALID
#: The page layout the C walk reads (mdb.c's MDB_page and MDB_node) is LMDB
#: 0.9's on 64-bit machines; another LMDB is never walked.
_WALKABLE = lmdb.version()[:2] == (0, 9) and sys.maxsize > 1 << 32


class _Held(NamedTuple):
    """A reader's copy of the persisted filters, as of the snapshot ``txn_id``:
    each tier's (head, filter), kept while its head (the id of the commit that
    wrote it) is unchanged; and what :meth:`Tables.query_probe` gives for that
    snapshot (and ``warm``, the filters warm() made). One object, replaced whole
    (threads share it)."""

    txn_id: int
    warm: TierFilters | None
    main: tuple[bytes, PrefixFilter] | None
    fresh: tuple[bytes, PrefixFilter] | None
    probe: tuple[PrefixFilter | None, PrefixFilter | None, Trees | None]


class Tables:
    """The databases of one environment, and how rows are encoded in them."""

    def __init__(self, env: lmdb.Environment, handles: dict[bytes, Any], helpers: Helpers) -> None:
        self.env = env
        self.index = handles[b"index"]
        self.docs = handles[b"docs"]
        self.names = handles[b"names"]
        self.meta = handles[b"meta"]
        self.fresh: Any = handles.get(FRESH)  # None: a format 2 file opened read-only
        self.hot: Any = handles.get(HOT_ROWS)  # None: a file without hot rows, read-only
        self.kept: Any = handles.get(FILTERS)  # None: a file before format 4, read-only
        self.catalog = env.open_db(None)  # LMDB's main database: the named ones' records
        self.h = helpers
        self.filter: TierFilters | None = None  # see filters(); set by a warm reader
        self._held = _Held(-1, None, None, None, (None, None, None))  # see query_probe()
        self._map: tuple[int, int] | None = None  # see trees(): (address, page size)
        #: The fresh filter this process last committed: (tier, head, filter), taken
        #: by its next batch instead of reading it back (see add_to_filter).
        self.mine: tuple[bytes, bytes, PrefixFilter] | None = None
        self.probe = Probe.best()

    @staticmethod
    def open(env: lmdb.Environment, txn: Txn | None = None) -> dict[bytes, Any]:
        """The handles of the databases; with ``txn``, created in it (the fresh
        tier and the hot rows too); without, those only if the file has them."""
        handles = {name: env.open_db(name, txn=txn, create=txn is not None) for name in TABLES}
        for name in (FRESH, HOT_ROWS, FILTERS):
            with suppress(lmdb.NotFoundError):  # read-only: none yet (see tier(), hot_rows())
                handles[name] = env.open_db(name, txn=txn, create=txn is not None)
        return handles

    def upgrade(self, txn: Txn) -> None:
        """Record a format 2 or 3 file as format 4 (its fresh tier, hot rows and
        filters table, those missing made empty by :meth:`open` in ``txn``), and
        give each tier its filter (one pass over each)."""
        raw = txn.get(STATE.encode(), db=self.meta)
        if raw is not None:
            state = codec.decode_json(raw)
            state["format"] = FORMAT
            state.setdefault("fresh", 0)
            txn.put(STATE.encode(), codec.encode_json(state), db=self.meta)
        self.rebuild_filters(txn)

    # -- the tiers' persisted prefix filters (format 4) --------------------------
    def rebuild_filters(self, txn: Txn) -> None:
        """Each tier's filter made anew from its cells (one pass over each)."""
        state = self.state(txn)
        for tier in TIERS:
            self.save_filter(txn, tier, self._filter(txn, tier, self.shift_for(state, tier)))

    def load_filter(self, txn: Txn, tier: bytes) -> PrefixFilter | None:
        """A tier's persisted filter (its bits writable), None if it has none."""
        head = txn.get(tier, db=self.kept)
        return None if head is None else self._read_bits(txn, tier, head)

    def _read_bits(self, txn: Txn, tier: bytes, head: bytes) -> PrefixFilter:
        _, shift = _FILTER_HEAD.unpack(head)
        size = 1 << (64 - shift - 3)
        bits = bytearray(size)
        cursor = txn.cursor(self.kept)
        at = 0
        chunks = [tier + _NUM.pack(i) for i in range(-(-size // FILTER_CHUNK))]
        for _, chunk in cursor.getmulti(chunks):
            bits[at : at + len(chunk)] = chunk
            at += len(chunk)
        if at != size:
            raise StoreCorrupt(
                f"the embedded index at {self.h.path} holds a {tier.decode()} filter of "
                f"{at} bytes where its head says {size}; {self.h.rebuild}"
            )
        return PrefixFilter(shift, bits)

    def save_filter(
        self, txn: Txn, tier: bytes, held: PrefixFilter, dirty: set[int] | None = None
    ) -> bytes:
        """Write a tier's filter in ``txn``: what readers of its commit use; its head.
        Its chunks overwrite those of the one before (those past its end go), or,
        given ``dirty``, only those chunks: the filter is the file's own, marked."""
        bits = memoryview(held.bits)
        numbers = range(-(-len(bits) // FILTER_CHUNK)) if dirty is None else sorted(dirty)
        chunks = [
            (tier + _NUM.pack(i), bytes(bits[i * FILTER_CHUNK : (i + 1) * FILTER_CHUNK]))
            for i in numbers
        ]
        cursor = txn.cursor(self.kept)
        cursor.putmulti(chunks)
        if dirty is None:
            found = cursor.set_range(tier + _NUM.pack(len(chunks)))
            while found and cursor.key().startswith(tier):
                found = cursor.delete()
        head = _FILTER_HEAD.pack(txn.id(), held.shift)
        txn.put(tier, head, db=self.kept)
        return head

    def drop_filter(self, txn: Txn, tier: bytes) -> None:
        """Remove a tier's filter: its readers then read all of its buckets."""
        cursor = txn.cursor(self.kept)
        found = cursor.set_range(tier)
        while found and cursor.key().startswith(tier):
            found = cursor.delete()

    def add_to_filter(
        self, txn: Txn, tier: bytes, added: Buckets
    ) -> tuple[bytes, bytes, PrefixFilter] | None:
        """Keep a tier's filter exact in the commit that put the cells ``added``
        (bucket keys, their packed cells) in it: their bits set, or (the tier has
        outgrown it, or has none) made anew from the tier, bigger. (tier, head,
        filter) written, for :attr:`mine` once committed."""
        keys, packed = added
        if self.kept is None or not keys:
            return None
        state = self.state(txn)
        mine, self.mine = self.mine, None
        if mine is not None and mine[0] == tier and txn.get(tier, db=self.kept) == mine[1]:
            held: PrefixFilter | None = mine[2]  # what this process committed last, unchanged
        else:
            held = self.load_filter(txn, tier)
        if held is None or held.shift > filter_shift(
            tier_cells(state, tier), TIER_FILTER_BITS[tier]
        ):
            held = self._filter(txn, tier, self.shift_for(state, tier))
            return tier, self.save_filter(txn, tier, held), held
        dirty: set[int] = set()
        for at in range(0, len(keys), _MARK_CHUNK):  # tuples made a chunk at a time
            chunk = list(zip(keys[at : at + _MARK_CHUNK], packed[at : at + _MARK_CHUNK]))
            self.probe.mark(held.bits, held.shift, chunk)
            dirty |= marked_chunks(held.shift, chunk)
        return tier, self.save_filter(txn, tier, held, dirty), held

    @staticmethod
    def shift_for(state: dict[str, Any], tier: bytes) -> int:
        """The size (shift) of a tier's filter made anew: for the index, its cells;
        for the fresh tier, 4-8 times its cells, up to what it will hold at its
        next merge (so that it is made anew a few times a merge, not each batch)."""
        cells = tier_cells(state, tier)
        need = filter_shift(cells, TIER_FILTER_BITS[tier])
        if tier != FRESH:
            return need
        return min(need, max(need - 2, filter_shift(fresh_due(state), TIER_FILTER_BITS[FRESH])))

    def table(self, tier: bytes) -> Any:
        return self.fresh if tier == FRESH else self.index

    def query_probe(
        self, txn: Txn
    ) -> tuple[PrefixFilter | None, PrefixFilter | None, Trees | None]:
        """:func:`bucket_keys`' arguments after the prefixes for a query of
        ``txn``'s snapshot: the (index, fresh) filters it may use (the persisted
        ones, format 4: a copy held while no commit rewrote them; else those
        warm() made for this very snapshot; else none), and its :meth:`trees`.
        Worked out once a snapshot."""
        now, held = txn.id(), self._held
        if held.txn_id == now and held.warm is self.filter:
            return held.probe
        warm = self.filter
        if self.kept is None:
            main = fresh = None
            usable = warm is not None and warm.txn_id == now
            filters = (warm.main, warm.fresh) if warm is not None and usable else (None, None)
        else:
            heads = dict(txn.cursor(self.kept).getmulti(list(TIERS)))
            main, fresh = (
                self._kept(txn, tier, heads.get(tier), mine)
                for tier, mine in zip(TIERS, (held.main, held.fresh))
            )
            filters = (None if main is None else main[1], None if fresh is None else fresh[1])
        probe = (filters[0], filters[1], self.trees(txn))
        self._held = _Held(now, warm, main, fresh, probe)
        return probe

    def trees(self, txn: Txn) -> Trees | None:
        """The :class:`Trees` of ``txn``'s snapshot; None where this process's
        map of the file is not known (not Linux) or the LMDB is not one whose
        pages the C walk can read (:data:`_WALKABLE`)."""
        if self._map is None:
            start = pages.mapped_at(self.h.path / pages.DATA_FILE) if _WALKABLE else None
            self._map = (start or 0, int(self.env.stat()["psize"]))
        base, psize = self._map
        if not base:
            return None
        records = [txn.get(name, db=self.catalog) for name in (*TIERS, b"names")]
        if any(raw is not None and len(raw) != _DB_RECORD.size for raw in records):
            return None
        roots = [_NO_ROOT if raw is None else _DB_RECORD.unpack(raw)[-1] for raw in records]
        return Trees(base, int(self.env.info()["last_pgno"]) + 1, psize, *roots)

    def hot_rows(self) -> Any:
        """The hot rows' handle, or None if the file has none (then no bucket marks a
        lead as spilled: the marks and the table are written in one commit)."""
        if self.hot is None:
            with suppress(lmdb.NotFoundError):
                self.hot = self.env.open_db(HOT_ROWS, create=False)
        return self.hot

    def new_cells_tier(self) -> Any:
        """Where new cells go: the fresh tier (the index itself in a file without one,
        which is format 2's layout and as exact, only slower to write)."""
        return self.index if self.fresh is None else self.fresh

    def tier(self, txn: Txn | None = None) -> Any:
        """The fresh tier's handle, or None if the file has none: a format 2 file
        opened read-only gets one once a writer of format 3 has opened it (a get
        in LMDB's catalog of ``txn`` until then)."""
        if self.fresh is None:
            if txn is not None and txn.get(FRESH, db=self.catalog) is None:
                return None
            try:
                self.fresh = self.env.open_db(FRESH, create=False)
            except lmdb.NotFoundError:
                return None
        return self.fresh

    # -- the store's own record -------------------------------------------------
    def state(self, txn: Txn, *, loading: bool = False) -> dict[str, Any]:
        """The store's record; :class:`StoreCorrupt` while it says a bulk load runs
        (one that was killed: its rows are not all there), unless ``loading``."""
        raw = txn.get(STATE.encode(), db=self.meta)
        if raw is None:
            raise StoreCorrupt(f"the embedded index at {self.h.path} lacks its record {STATE!r}")
        state: dict[str, Any] = codec.decode_json(raw)
        if state.get(LOADING) and not loading:
            raise StoreCorrupt(
                f"a bulk load into the embedded index at {self.h.path} was cut short (its "
                "process was killed), so it holds part of the documents: run the bulk load "
                "again (it starts over), or remove the folder"
            )
        return state

    def put_state(self, txn: Txn, state: dict[str, Any]) -> None:
        txn.put(STATE.encode(), codec.encode_json(state), db=self.meta)

    # -- rows -----------------------------------------------------------------
    def doc_value(self, num: int, doc: Document, raw_id: bytes, key: bytes) -> bytes:
        cols = codec.doc_to_columns(doc)
        del cols[codec.COL_FINGERPRINT]
        if key != raw_id:
            cols[_ID_COLUMN] = raw_id
        return _HEAD.pack(num, doc.fingerprint) + self.h.pack_columns(cols)

    def doc_from(self, key: bytes, value: bytes) -> Document:
        """The document of a full docs row; a damaged row is a StoreCorrupt."""
        if len(value) < _HEAD.size:
            raise self.h.corrupt_row(
                StoreError(f"the docs row {decode_id(key)!r} is damaged (it is cut short)")
            )
        fp = _HEAD.unpack_from(value)[1]
        try:
            cols = self.h.unpack_columns(value[_HEAD.size :])
        except StoreError as exc:
            reason = f"the docs row {decode_id(key)!r} is damaged (its columns are cut short)"
            raise self.h.corrupt_row(StoreError(reason)) from exc
        doc_id = decode_id(cols.pop(_ID_COLUMN, key))
        cols[codec.COL_FINGERPRINT] = codec.fingerprint_to_bytes(fp)
        try:
            return codec.doc_from_columns(doc_id, cols)
        except StoreCorrupt as exc:
            raise self.h.corrupt_row(exc) from exc

    def lookup(self, txn: Txn, raw_ids: Iterable[bytes]) -> dict[bytes, bytes]:
        """{raw id: docs row} of the ids that have one, a multi-get in key order."""
        raws = list(raw_ids)
        if not raws:
            return {}
        if max(map(len, raws)) < self.h.max_key:  # no id is folded: keys are ids
            found = txn.cursor(self.docs).getmulti(sorted(raws))
        else:
            keys = {self.h.fold(raw): raw for raw in raws}
            found = [
                (keys[key], value)
                for key, value in txn.cursor(self.docs).getmulti(sorted(keys))
                if key == keys[key] or _held_id(value) == keys[key]  # the full id must match
            ]
        # Committed rows: those whose number has a names row, asked in one multi-get.
        named = txn.cursor(self.names).getmulti(sorted({value[:4] for _, value in found}))
        held = {num for num, _ in named}
        return {raw: value for raw, value in found if value[:4] in held}

    def committed(self, txn: Txn, row: bytes) -> bool:
        """A docs row counts once its number has a names row (see CompactBatch.commit)."""
        return txn.get(row[:4], db=self.names) is not None

    # -- reads ----------------------------------------------------------------
    def get_docs(self, txn: Txn, doc_ids: Sequence[str]) -> dict[str, Document]:
        raws = {encode_id(doc_id): doc_id for doc_id in doc_ids}
        return {
            raws[raw]: self.doc_from(self.h.fold(raw), value)
            for raw, value in self.lookup(txn, raws).items()
            if len(value) != _NUM.size
        }

    def buckets(self, txn: Txn, keys: list[bytes]) -> dict[bytes, bytes]:
        """{bucket key: its cells in both tiers} of the ``keys`` that hold any: one
        multi-get a tier (two C calls, not a get per key)."""
        found = dict(txn.cursor(self.index).getmulti(keys))
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        if fresh is not None:
            for key, packed in dict(txn.cursor(fresh).getmulti(keys)).items():  # a key once
                found[key] = found[key] + packed if key in found else packed
        return found

    def scan(
        self, txn: Txn, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        """Hot path: per query one multi-get of its buckets in each tier and per
        bucket found a ``find`` of its prefix's two lead bytes; each document found
        costs one more get (its names row), once per query. A lead marked spilled
        also reads its own keys, in id order: with ``row_cap``, each row's first
        ``row_cap`` visible ones."""
        get, names = txn.get, self.names
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        tiers = [txn.cursor(self.index)] + ([] if fresh is None else [txn.cursor(fresh)])
        results: list[list[IndexCell]] = []
        for prefixes in prefix_lists:
            cells: list[IndexCell] = []
            held: dict[bytes, tuple[bytes, str] | None] = {}  # a match is in up to 10 buckets
            spilled: dict[bytes, None] = {}  # prefixes whose lead a bucket marks, in order
            for prefix, packed in _buckets_of(tiers, prefixes):
                lead = prefix[2:4]
                pos = packed.find(lead)
                while pos >= 0:
                    if pos % CELL_BYTES == 0:
                        num = packed[pos + 2 : pos + 6]
                        if num not in held:
                            name = get(num, db=names)
                            held[num] = None if name is None else (name[:8], decode_id(name[8:]))
                        found = held[num]
                        if found is not None:  # else not committed, or its document removed
                            cells.append((prefix + found[0], found[1]))
                        elif num == SPILLED:
                            spilled[prefix] = None
                    pos = packed.find(lead, pos + 1)
            for prefix in spilled:
                head = prefix[4:5] + prefix[0:4]
                cells += self._spilled(txn, head, prefix, row_cap, held)
            results.append(cells)
        return results

    def scan_documents(
        self, txn: Txn, prefixes: Sequence[bytes], row_cap: int | None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """:meth:`scan` of one query's prefixes, as the distinct documents found
        ((id, fingerprint), in no order) and the count of visible cells, without
        a tuple per cell: a multi-get of the buckets a tier (only those its
        :class:`PrefixFilter` may hold, where it has one: :meth:`query_probe`),
        the cells of each lead (:func:`bucket_nums`, in C where built), one
        names get per document.
        None (use :meth:`scan`) where that would differ: two prefixes of one
        bucket, a lead marked spilled, or a prefix with ``row_cap`` cells or more
        (a capped scan may cut its row)."""
        listed = prefixes if type(prefixes) is list else list(prefixes)
        main, fresh_filter, trees = self.query_probe(txn)
        probe = self.probe.keys(listed, main, fresh_filter, trees)
        if probe is None:
            return None
        keys, asked = probe
        found = txn.cursor(self.index).getmulti(keys) if keys else []
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        if fresh is not None and asked:
            found += txn.cursor(fresh).getmulti(asked)
        counted = self.probe.nums(listed, found, row_cap, trees)
        if counted is None:
            return None
        get, names = txn.get, self.names
        docs: list[tuple[str, int]] = []
        cells = 0
        for num, count in zip(*counted):
            name = get(num, db=names)
            if name is not None:  # else not committed, or its document removed
                docs.append((decode_id(name[8:]), int.from_bytes(name[:8], "big")))
                cells += count
        return docs, cells

    def _kept(
        self, txn: Txn, tier: bytes, head: bytes | None, mine: tuple[bytes, PrefixFilter] | None
    ) -> tuple[bytes, PrefixFilter] | None:
        """A tier's filter as of ``head`` (None: it has none): the copy held if
        the same commit wrote it (this reader's, or this process's last commit's:
        a writer that queries between its batches reads nothing back), else read.
        A writer marks its copy in place for its next batch: bits set early only
        cost a bucket read, never a cell."""
        if head is None:
            return None
        if mine is not None and mine[0] == head:
            return mine
        written = self.mine
        if written is not None and written[0] == tier and written[1] == head:
            return head, written[2]
        return head, self._read_bits(txn, tier, head)

    def filters(self, txn: Txn) -> TierFilters:
        """The :class:`TierFilters` of ``txn``'s snapshot: one pass over each tier
        (warm() of a file without persisted filters)."""
        state = self.state(txn)
        fresh = self.tier(txn)
        held = state.get("fresh", 0) if fresh is not None else 0
        return TierFilters(
            txn.id(),
            self._filter(
                txn, b"index", filter_shift(state["cells"] - held, TIER_FILTER_BITS[b"index"])
            ),
            None if fresh is None else self._filter(txn, FRESH, self.shift_for(state, FRESH)),
        )

    def _filter(self, txn: Txn, tier: bytes, shift: int) -> PrefixFilter:
        """The :class:`PrefixFilter` of ``tier``'s cells, of 2^(64 - ``shift``) bits."""
        held = PrefixFilter.empty(shift)
        items = iter(txn.cursor(self.tier(txn) if tier == FRESH else self.index))
        while chunk := list(islice(items, _MARK_CHUNK)):
            self.probe.mark(held.bits, held.shift, chunk)
        return held

    def scan_wide(
        self, txn: Txn, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> list[IndexCell]:
        """:meth:`scan` of one long list of prefixes (a batch's lookups): each
        distinct bucket read once per tier (two multi-gets), cells matched to
        their prefixes (:func:`_matched`), and one multi-get of the names rows
        of the cells matched. A cell whose number is not a document's
        (:data:`MAX_DOCUMENTS`: a hot row's mark, :data:`SPILLED`) leaves its
        prefix wholly to :meth:`scan` (with ``row_cap``)."""
        want = np.frombuffer(b"".join(prefixes), dtype=codec.PREFIX_DTYPE)
        field = want["field"].astype(np.uint64)
        bucket = want["flag"].astype(np.uint64) << np.uint64(16) | field >> np.uint64(16)
        buckets = _distinct(bucket)
        keys = (buckets << np.uint64(8)).astype(">u4").view(np.uint8).reshape(-1, 4)[:, :3]
        asked = np.ascontiguousarray(keys).view("V3").reshape(-1).tolist()
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        tiers = [txn.cursor(db).getmulti(asked) for db in (self.index, fresh) if db is not None]
        which, nums = _matched(tiers, bucket << np.uint64(16) | field & np.uint64(0xFFFF))
        if not len(which):
            return []
        odd = np.isin(which, which[nums == MAX_DOCUMENTS])  # a marked prefix: scan's
        named = np.unique(nums[~odd])
        rows = dict(txn.cursor(self.names).getmulti(named.astype(">u4").view("V4").tolist()))
        # Each cell's names row (None: not committed, or its document removed), then
        # its cell, by C-level maps: no Python call per candidate (~2 a lookup at 10 M).
        names = list(map(rows.get, nums[~odd].astype(">u4").view("V4").tolist()))
        held = list(filter(None, names))  # a names row is never empty (fingerprint first)
        heads = map(prefixes.__getitem__, compress(which[~odd].tolist(), names))
        result: list[IndexCell] = list(
            zip(
                map(bytes.__add__, heads, map(itemgetter(slice(0, 8)), held)),
                map(bytes.decode, map(itemgetter(slice(8, None)), held), _UTF8, _ESCAPE),
            )
        )
        for p in dict.fromkeys(which[odd].tolist()):
            (more,) = self.scan(txn, [[prefixes[p]]], row_cap)
            result += more
        return result

    def _spilled(
        self,
        txn: Txn,
        head: bytes,
        prefix: bytes,
        row_cap: int | None,
        held: dict[bytes, tuple[bytes, str] | None],
    ) -> list[IndexCell]:
        """The visible cells of a spilled lead (keys ``head`` + fingerprint + id),
        each row's first ``row_cap`` of them (its smallest ids)."""
        cursor = txn.cursor(self.hot_rows())
        cells: list[IndexCell] = []
        found = cursor.set_range(head)
        row, taken = b"", 0
        while found:
            key = cursor.key()
            if not key.startswith(head):
                break
            fp = key[_HEAD_BYTES : _HEAD_BYTES + 8]
            if fp != row:
                row, taken = fp, 0
            elif row_cap is not None and taken >= row_cap:  # the rest of a hot row
                found = cursor.set_range(codec.prefix_stop(key[: _HEAD_BYTES + 8]))
                continue
            num = cursor.value()
            if num not in held:
                name = txn.get(num, db=self.names)
                held[num] = None if name is None else (name[:8], decode_id(name[8:]))
            visible = held[num]
            if visible is not None:
                cells.append((prefix + visible[0], visible[1]))
                taken += 1
            found = cursor.next()
        return cells

    def row_size(self, txn: Txn, row: bytes) -> int:
        """Cells held in an index row: its bucket cells, and its spilled keys
        counted by walking them undecoded (as format 1 counts a row)."""
        prefix, fp = row[: codec.PREFIX_BYTES], row[codec.PREFIX_BYTES :]
        bucket, lead = prefix[4:5] + prefix[0:2], prefix[2:4]
        packed = self.buckets(txn, [bucket]).get(bucket, b"")
        count = 0
        for pos in find_cells(packed, lead):
            name = txn.get(packed[pos + 2 : pos + 6], db=self.names)
            count += name is not None and name[:8] == fp
        head = bucket + lead + fp
        hot = self.hot_rows()
        if hot is None:
            return count
        cursor = txn.cursor(hot)
        if cursor.set_range(head):
            for key in cursor.iternext(keys=True, values=False):
                if not key.startswith(head):
                    break
                count += 1
        return count

    def iter_index(self, txn: Txn) -> Iterator[IndexCell]:
        get_name = txn.cursor(self.names).get
        fresh = self.tier()
        tiers = [txn.cursor(self.index)] + ([] if fresh is None else [txn.cursor(fresh)])
        for bucket, packed in heapq.merge(*tiers, key=itemgetter(0)):
            if len(bucket) != 3 or len(packed) % CELL_BYTES:
                raise StoreCorrupt(
                    f"the embedded index at {self.h.path} holds an index entry of "
                    f"{len(bucket)}+{len(packed)} bytes; {self.h.rebuild}"
                )
            for pos in range(0, len(packed), CELL_BYTES):
                name = get_name(packed[pos + 2 : pos + 6])
                if name is not None:
                    row = bucket[1:3] + packed[pos : pos + 2] + bucket[0:1] + name[:8]
                    yield row, decode_id(name[8:])
        hot = self.hot_rows()
        for key, num in [] if hot is None else txn.cursor(hot):
            if len(key) <= _HEAD_BYTES + 8 or len(num) != _NUM.size:
                raise StoreCorrupt(
                    f"the embedded index at {self.h.path} holds a hot-row entry of "
                    f"{len(key)}+{len(num)} bytes; {self.h.rebuild}"
                )
            name = get_name(num)
            if name is not None:
                yield key[1:5] + key[0:1] + name[:8], decode_id(name[8:])

    def iter_docs(self, txn: Txn) -> Iterator[tuple[bytes, Document | StoreCorrupt]]:
        for key, value in txn.cursor(self.docs):
            if len(value) == _NUM.size or not self.committed(txn, value):
                continue  # an id numbered by its cells alone, or a row not committed
            try:
                yield key, self.doc_from(key, value)
            except StoreCorrupt as exc:
                yield key, exc

    def counts(self, txn: Txn) -> tuple[int, int]:
        state = self.state(txn)
        return state["documents"], state["cells"]


def _held_id(value: bytes) -> bytes | None:
    """The full id a folded docs row holds (None if damaged)."""
    pos = _HEAD.size
    while pos + 5 <= len(value):
        name_len, value_len = struct.unpack_from(">BI", value, pos)
        pos += 5
        if value[pos : pos + name_len] == _ID_COLUMN:
            return value[pos + name_len : pos + name_len + value_len]
        pos += name_len + value_len
    return None


class CompactBatch:
    """One batch: mutations are recorded, then written by :meth:`commit`."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self._ops: list[tuple[str, Any]] = []
        self.prewritten: dict[bytes, bytes] = {}  # docs rows written ahead of the last commit
        # The docs rows (None: none) this batch saw; a different row at its commit
        # was written by another process meanwhile (see _Commit.run).
        self._observed: dict[bytes, bytes | None] = {}

    # -- protocol (recording) -------------------------------------------------
    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        raws = {doc_id.encode("utf-8", "surrogateescape"): doc_id for doc_id in doc_ids}
        with self._t.env.begin() as txn:
            found = self._t.lookup(txn, raws)
        self._observed.update(dict.fromkeys(raws))
        self._observed.update(found)
        return {
            raws[raw]: self._t.doc_from(self._t.h.fold(raw), value)
            for raw, value in found.items()
            if len(value) != _NUM.size
        }

    def claim_docs(
        self, intents: Mapping[str, Document | None], cells_of: CellsOf
    ) -> dict[str, Document]:
        """The rows read are the rows observed: a row another process changed by the
        commit is handled there (see :class:`_Commit`), in the one write transaction."""
        return self.get_docs(list(intents))

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        if isinstance(cells, CellBlock):
            rows, ids = cells.rows, list(cells.doc_ids)
            if rows.ndim == 1:
                rows = rows.reshape(len(ids), -1)
        else:
            listed = list(cells)
            rows, ids = cell_rows(listed).reshape(-1, 1), [doc_id for _, doc_id in listed]
        if ids:
            self._ops.append(("put", (rows, [i.encode("utf-8", "surrogateescape") for i in ids])))

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        listed = list(cells)
        if listed:
            rows = cell_rows(listed).reshape(-1, 1)
            self._ops.append(("delete", (rows, [encode_id(doc_id) for _, doc_id in listed])))

    def put_docs(self, docs: Iterable[Document]) -> None:
        # The last one wins; ids were checked by the index (surrogates: a damaged id read back).
        latest = {doc.doc_id.encode("utf-8", "surrogateescape"): doc for doc in docs}
        if latest:
            self._ops.append(("docs", latest))

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        raws = [encode_id(doc_id) for doc_id in doc_ids]
        if raws:
            self._ops.append(("undocs", raws))

    # -- writing --------------------------------------------------------------
    def commit(self) -> None:
        """New documents' cells in parts, then everything else in one commit."""
        fresh = self._fresh()
        nums: dict[bytes, int] = {}
        written: Buckets = ([], [])
        if fresh:
            nums = self._reserve(fresh)
            written = self._write_fresh(nums)
        with self._t.env.begin(write=True) as txn:
            commit = _Commit(self._t, txn, nums, written, self.prewritten)
            commit.run(self._ops, self._observed)
        self._t.mine = commit.saved  # committed: the file holds that filter now
        merge_fresh(self._t)

    def _fresh(self) -> list[bytes]:
        """Ids whose cells can go ahead of the last commit: ids put with many cells
        that have no docs row and that no other op of the batch touches."""
        puts = [arg[1] for op, arg in self._ops if op == "put"]
        if sum(map(len, puts)) < PART_MIN_CELLS or self._parts() < 2:
            return []
        touched = {raw for op, arg in self._ops if op == "delete" for raw in arg[1]}
        touched.update(raw for op, arg in self._ops if op == "undocs" for raw in arg)
        candidates = list(dict.fromkeys(raw for raws in puts for raw in raws))
        if touched:
            candidates = [raw for raw in candidates if raw not in touched]
        unknown = [raw for raw in candidates if raw not in self._observed]
        if unknown:  # rows get_docs did not look for
            with self._t.env.begin() as txn:
                found = self._t.lookup(txn, unknown)
            self._observed.update(dict.fromkeys(unknown))
            self._observed.update(found)
        return [raw for raw in candidates if self._observed[raw] is None]

    def _parts(self) -> int:
        """How many commits a batch's new cells take: more as the index grows."""
        with self._t.env.begin() as txn:
            state = self._t.state(txn)
        cells = state["cells"] if self._t.fresh is None else state.get("fresh", 0)
        return int(min(MAX_PARTS, cells * (CELL_BYTES + 1) // PART_BYTES))

    def _reserve(self, fresh: list[bytes]) -> dict[bytes, int]:
        with self._t.env.begin(write=True) as txn:
            state = self._t.state(txn)
            start = state["next"]
            _check_room(self._t, start, len(fresh))
            state["next"] = start + len(fresh)
            self._t.put_state(txn, state)
        return dict(zip(fresh, range(start, start + len(fresh))))

    def _write_fresh(self, nums: dict[bytes, int]) -> Buckets:
        """The cells of the reserved numbers, in :meth:`_parts` commits: the keys
        of the buckets written and their packed cells."""
        blocks = []
        for i, (op, arg) in enumerate(self._ops):
            if op != "put":
                continue
            rows, raws = arg
            count = sum(map(nums.__contains__, raws))
            if count == len(raws):  # the common case: a block of new documents
                blocks.append((rows, raws))
                self._ops[i] = ("put", (rows[:0], []))
            elif count:
                mine = [raw in nums for raw in raws]
                picked = np.array(mine)
                blocks.append((rows[picked], [raw for raw, m in zip(raws, mine) if m]))
                rest = [raw for raw, m in zip(raws, mine) if not m]
                self._ops[i] = ("put", (rows[~picked], rest))
        rows = np.concatenate([r.reshape(-1) for r, _ in blocks])
        per_cell = np.concatenate(
            [
                np.repeat(
                    np.fromiter(map(nums.__getitem__, raws), dtype=np.uint32, count=len(raws)),
                    r.shape[1],
                )
                for r, raws in blocks
            ]
        )
        keys, packed = grouped(rows.reshape(-1, 1), per_cell)
        parts = self._parts()
        step = -(-len(keys) // parts)
        for at in range(0, len(keys), step):
            part = slice(at, at + step)
            with self._t.env.begin(write=True) as txn:
                tier = self._t.new_cells_tier()
                dropped, moved = _append_cells(self._t, txn, tier, keys[part], packed[part])
                if dropped or moved:  # hot leads spilled: the counts, in the same commit
                    state = self._t.state(txn)
                    state["cells"] -= dropped
                    if tier is self._t.fresh:
                        state["fresh"] = state.get("fresh", 0) - moved
                    self._t.put_state(txn, state)
        self._write_fresh_docs(nums, parts)
        return keys, packed

    def _write_fresh_docs(self, nums: dict[bytes, int], parts: int) -> None:
        """The docs rows of reserved numbers (bare ones: number and fingerprint), in
        parts by id; they count once their names rows exist (the last commit)."""
        latest: dict[bytes, Document] = {}
        for op, arg in self._ops:
            if op == "docs":
                latest.update(arg)
        raws = sorted(raw for raw in latest if raw in nums)
        if not raws or max(map(len, raws)) >= self._t.h.max_key:
            return
        docs = [latest[raw] for raw in raws]
        if not all(map(_NO_COLUMNS.__eq__, map(_COLUMNS, docs))):
            return
        heads = np.empty(len(raws), dtype=_BARE)
        heads["num"] = np.fromiter(map(nums.__getitem__, raws), dtype=np.uint32, count=len(raws))
        heads["fp"] = np.fromiter((d.fingerprint for d in docs), dtype=np.uint64, count=len(raws))
        buf, size = heads.tobytes(), _BARE.itemsize
        values = [buf[i : i + size] for i in range(0, len(buf), size)]
        step = -(-len(raws) // parts)
        for at in range(0, len(raws), step):
            with self._t.env.begin(write=True) as txn:
                chunk = dict(zip(raws[at : at + step], values[at : at + step]))
                for raw in self._t.lookup(txn, chunk):  # written by another process since
                    del chunk[raw]  # the last commit replaces it (see _Commit.run)
                txn.cursor(self._t.docs).putmulti(chunk.items())
            self.prewritten.update(chunk)


#: Called after each commit of a merge with (parts done, parts, cells moved so far).
OnMergePart = Callable[[int, int, int], None]


def merge_fresh(tables: Tables, *, force: bool = False, on_part: OnMergePart | None = None) -> int:
    """Move the fresh tier's cells into the index once it is due (or ``force``), in
    up to :data:`MAX_PARTS` commits of one key range each; the cells moved.

    Each commit moves whole buckets (their fresh cells deleted, appended to the
    index's) and is atomic, so a reader sees every cell exactly once whenever it
    looks, and a merge cut short leaves a valid file (the rest stays fresh)."""
    if tables.fresh is None:
        return 0
    with tables.env.begin() as txn:
        state = tables.state(txn)
        held = state.get("fresh", 0)
        if held == 0 or (held < fresh_due(state) and not force):
            return 0
        keys = list(txn.cursor(tables.fresh).iternext(keys=True, values=False))
    parts = int(max(1, min(MAX_PARTS, state["cells"] * (CELL_BYTES + 1) // PART_BYTES)))
    step = max(1, -(-len(keys) // parts))
    moved = 0
    starts = range(0, len(keys), step)
    merge = _MergeFilter(tables)
    for done, at in enumerate(starts, 1):
        with tables.env.begin(write=True) as txn:
            merge.check(txn, first=done == 1)
            moved += _merge_part(tables, txn, keys[at : at + step], merge)
            if done == len(starts):
                merge.finish(txn)
        if on_part is not None:
            on_part(done, len(starts), moved)
    return moved


class _MergeFilter:
    """The index tier's filter through a merge: removed at its first commit (until
    the last, readers read every index bucket), the cells moved marked in a copy,
    written at its last commit. Another merge in between (another process) takes
    the token: the copy then misses its cells, and the tier is read whole instead."""

    _TOKEN = b"merging"  # in FILTERS: the id of the first commit of the merge under way

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self.bits: PrefixFilter | None = None
        self._token = b""

    def check(self, txn: Txn, *, first: bool) -> None:
        if self._t.kept is None:
            return
        if first:
            self.bits = self._t.load_filter(txn, b"index")
            self._t.drop_filter(txn, b"index")
            self._token = _FILTER_HEAD.pack(txn.id(), 0)
            txn.put(self._TOKEN, self._token, db=self._t.kept)
        elif txn.get(self._TOKEN, db=self._t.kept) != self._token:
            self.bits = None

    def mark(self, taken: list[tuple[bytes, bytes]]) -> None:
        if self.bits is not None:
            self._t.probe.mark(self.bits.bits, self.bits.shift, taken)

    def finish(self, txn: Txn) -> None:
        t = self._t
        if t.kept is None:
            return
        held = self.bits
        state = t.state(txn)
        need = t.shift_for(state, b"index")
        if held is None or held.shift > need:
            held = t._filter(txn, b"index", need)
        t.save_filter(txn, b"index", held)
        if txn.get(self._TOKEN, db=t.kept) == self._token:
            txn.delete(self._TOKEN, db=t.kept)
        if not txn.stat(t.fresh)["entries"]:  # sized for the cells it will take until the next
            size = filter_shift(fresh_due(state), TIER_FILTER_BITS[FRESH])
            t.save_filter(txn, FRESH, PrefixFilter.empty(size))


def _merge_part(tables: Tables, txn: Txn, keys: list[bytes], merge: _MergeFilter) -> int:
    """The fresh cells of the buckets ``keys`` (re-read here: another writer may
    have added some since they were listed) appended to the index's."""
    taken = txn.cursor(tables.fresh).getmulti(keys)
    if not taken:
        return 0
    merge.mark(taken)
    held, cells = map(list, zip(*taken))
    index = txn.cursor(tables.index)
    old = dict(index.getmulti(held))
    values, dropped, _ = _grown_all(tables, txn, held, list(map(old.get, held, repeat(b""))), cells)
    index.putmulti(zip(held, values))
    deque(map(txn.delete, held, repeat(b""), repeat(tables.fresh)), maxlen=0)  # no loop in Python
    moved = sum(map(len, cells)) // CELL_BYTES - _marks(cells)  # marks: counted in no tier
    state = tables.state(txn)
    state["fresh"] = state.get("fresh", 0) - moved
    state["cells"] -= dropped
    tables.put_state(txn, state)
    return moved


def _marks(buckets: list[bytes]) -> int:
    """The leads marked spilled in ``buckets`` (each bucket's cells), found in one
    NumPy pass; only a bucket that holds a mark is searched for its leads."""
    sizes = np.fromiter(map(len, buckets), dtype=np.int64, count=len(buckets)) // CELL_BYTES
    nums = np.frombuffer(b"".join(buckets), dtype=CELL)["num"]
    marked = np.flatnonzero(nums == _NUM.unpack(SPILLED)[0])
    if not len(marked):
        return 0
    owners = np.unique(np.searchsorted(np.cumsum(sizes), marked, side="right"))
    return sum(len(spilled_leads(buckets[i])) for i in owners.tolist())


def _check_room(tables: Tables, start: int, count: int) -> None:
    if start + count > MAX_DOCUMENTS:
        raise StoreError(
            f"the embedded index at {tables.h.path} has numbered {start:,} documents, the "
            "most one embedded index holds; split the corpus or use HBase"
        )


def _append_cells(
    tables: Tables, txn: Txn, db: Any, keys: list[bytes], packed: list[bytes]
) -> tuple[int, int]:
    """Add cells that cannot be held yet (new numbers) to their buckets in the tier
    ``db``, in key order; a bucket grown past a multiple of CHECK_BYTES moves its hot
    leads out (:func:`_spill_hot`). (cells dropped, cells moved out of ``db``)."""
    cursor = txn.cursor(db)
    old = dict(cursor.getmulti(keys))
    values, dropped, moved = _grown_all(
        tables, txn, keys, list(map(old.get, keys, repeat(b""))), packed
    )
    cursor.putmulti(zip(keys, values))
    return dropped, moved


def _grown_all(
    tables: Tables, txn: Txn, keys: list[bytes], befores: list[bytes], added: list[bytes]
) -> tuple[list[bytes], int, int]:
    """Each bucket ``keys[i]`` grown from ``befores[i]`` by ``added[i]``, with no
    Python work per bucket: only those that have just grown past a multiple of
    CHECK_BYTES are checked for hot leads (:func:`_spill_hot`). (the buckets'
    new values, cells dropped, cells moved out)."""
    values = list(map(bytes.__add__, befores, added))
    before = np.fromiter(map(len, befores), dtype=np.int64, count=len(befores))
    after = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    dropped = moved = 0
    for i in np.flatnonzero(after // CHECK_BYTES > before // CHECK_BYTES).tolist():
        values[i], gone, out = _spill_hot(tables, txn, keys[i], values[i])
        dropped += gone
        moved += out
    return values, dropped, moved


def _spill_hot(tables: Tables, txn: Txn, bucket: bytes, value: bytes) -> tuple[bytes, int, int]:
    """Move the committed cells of each lead holding HOT cells or more to keys of
    their own in ``hot`` (flag, field, fingerprint, id -> number: a row in id
    order, read to its cap and counted by walking keys), and mark the lead with a
    SPILLED cell. Cells not committed yet (no names row) and ids too long for a key
    stay. (the bucket's new value, cells dropped: an id's older spilled cell
    replaced by its newer, cells moved)."""
    cells = np.frombuffer(value, dtype=CELL)
    lo, nums = cells["lo"], cells["num"]
    leads, counts = np.unique(lo, return_counts=True)
    hot = leads[counts >= HOT]
    if not len(hot):
        return value, 0, 0
    mark = np.uint32(_NUM.unpack(SPILLED)[0])
    marked = set(lo[nums == mark].tolist())
    move = np.flatnonzero(np.isin(lo, hot) & (nums != mark))
    num_keys = [_NUM.pack(num) for num in nums[move].tolist()]
    names = dict(txn.cursor(tables.names).getmulti(sorted(set(num_keys))))
    room = tables.h.max_key - _HEAD_BYTES - 8
    keep = np.ones(len(cells), dtype=bool)
    items: list[tuple[bytes, bytes]] = []
    moved: set[int] = set()
    for at, lead, num in zip(move.tolist(), lo[move].tolist(), num_keys):
        name = names.get(num)
        if name is None or len(name) - 8 > room:
            continue
        keep[at] = False
        moved.add(lead)
        items.append((bucket + lead.to_bytes(2, "big") + name, num))  # name: fingerprint, id
    if not items:
        return value, 0, 0
    items.sort()
    consumed, added = txn.cursor(tables.hot_rows()).putmulti(items)
    marks = b"".join(lead.to_bytes(2, "big") + SPILLED for lead in sorted(moved - marked))
    return cells[keep].tobytes() + marks, consumed - added, len(items)


class _Commit:
    """The last commit of a batch: its ops in order, in one write transaction."""

    def __init__(
        self,
        tables: Tables,
        txn: Txn,
        reserved: dict[bytes, int],
        written: Buckets,
        prewritten: dict[bytes, bytes],
    ) -> None:
        self._prewritten = prewritten
        # (bucket key, packed cells) put in the tier of new cells, by this batch:
        # their bits go in its filter at this commit, where they become visible.
        self._added = written
        self.saved: tuple[bytes, bytes, PrefixFilter] | None = None  # see Tables.mine
        self._t = tables
        self._txn = txn
        self._h = tables.h
        self._state = tables.state(txn)
        count = sum(map(len, written[1])) // CELL_BYTES
        self._state["cells"] += count  # the reserved numbers' cells, visible from here
        self._fresh_cells(count)
        self._reserved = reserved
        self._nums: dict[bytes, int] = {}
        self._documented: set[bytes] = set()  # ids given a docs row in this commit
        self._docs_ids: set[bytes] = set()  # ids the commit's ops give a docs row
        self._first_new = self._state["next"]  # numbers from here on have no cells held yet
        self._rows: dict[bytes, bytes | None] = {}  # raw id -> its docs row now (None: none)
        self._named: dict[int, tuple[int, bytes]] = {}  # number -> (fp, raw id) to write

    def _fresh_cells(self, count: int) -> None:
        if self._t.fresh is not None:
            self._state["fresh"] = self._state.get("fresh", 0) + count

    def run(self, ops: list[tuple[str, Any]], observed: dict[bytes, bytes | None]) -> None:
        """``observed``: the docs rows the batch read before this commit began."""
        written: set[bytes] = set()
        for op, arg in ops:
            if op in ("put", "docs"):
                written.update(arg[1] if op == "put" else arg)
            if op == "docs":
                self._docs_ids.update(arg)
        seen = written.intersection(observed)
        self._rows.update(zip(seen, map(observed.__getitem__, seen)))
        for raw, current in self._t.lookup(self._txn, seen).items():
            if current != observed[raw]:
                # Another process wrote this id since the batch read it: the
                # batch's version replaces it, under a new number.
                self._unname(_NUM.unpack_from(current)[0])
                self._rows[raw] = None
                self._prewritten.pop(raw, None)  # theirs replaced ours: write it again
        self._nums.update(self._reserved)
        for op, arg in ops:
            getattr(self, "_" + op)(arg)
        self._finish()

    def _row(self, raws: Iterable[bytes]) -> None:
        missing = [raw for raw in dict.fromkeys(raws) if raw not in self._rows]
        if missing:
            found = self._t.lookup(self._txn, missing)
            for raw in missing:
                self._rows[raw] = found.get(raw)

    def _number(self, raws: Sequence[bytes], create: bool) -> list[int | None]:
        """The numbers of ``raws`` (None: none, unless ``create`` gives one)."""
        pending = [raw for raw in dict.fromkeys(raws) if raw not in self._nums]
        if pending:
            self._row(pending)
            rows = map(self._rows.__getitem__, pending)
            self._nums.update(
                (raw, _NUM.unpack_from(row)[0]) for raw, row in zip(pending, rows) if row
            )
            new = [raw for raw in pending if raw not in self._nums]
            if create and new:
                start = self._state["next"]
                _check_room(self._t, start, len(new))
                self._state["next"] = start + len(new)
                self._nums.update(zip(new, range(start, start + len(new))))
        return list(map(self._nums.get, raws))

    def _put(self, arg: tuple[np.ndarray, list[bytes]]) -> None:
        rows, raws = arg
        if not raws:
            return
        numbered = self._number(raws, create=True)
        nums = np.array(numbered, dtype=np.uint32)
        # An id without a document gets the fingerprint of its cells in its names
        # row; a document's names row carries its own, whatever a cell says.
        if not self._docs_ids.issuperset(raws):
            fps = rows[:, 0]["fp"].astype(np.uint64).tolist()
            for raw, num, fp in zip(raws, numbered, fps):
                row = self._rows.get(raw)
                if (row is None or len(row) == _NUM.size) and raw not in self._docs_ids:
                    self._named.setdefault(num, (fp, raw))  # type: ignore[arg-type]
        self._state["cells"] += self._put_new(rows, nums)

    def _put_new(self, rows: np.ndarray, nums: np.ndarray) -> int:
        """Cells of numbers given in this commit are appended unchecked; the others
        are added where their bucket does not hold them yet. All go to the tier of
        new cells (the index changes only by merges, bulk loads and removals, so
        that its filter is rewritten only then). The cells added."""
        new = nums >= self._first_new
        added = 0
        tier = self._t.new_cells_tier()
        if new.any():
            keys, packed = grouped(rows[new], nums[new])
            dropped, moved = _append_cells(self._t, self._txn, tier, keys, packed)
            self._added[0].extend(keys)
            self._added[1].extend(packed)
            appended = int(new.sum()) * rows.shape[1]
            added += appended - dropped
            self._fresh_cells(appended - moved)
        if new.all():
            return added
        keys, packed = grouped(rows[~new], nums[~new])
        found = self._t.buckets(self._txn, keys)
        for key, cells in zip(keys, packed):
            both = found.get(key, b"")
            new = [cells[i : i + CELL_BYTES] for i in range(0, len(cells), CELL_BYTES)]
            spilled = spilled_leads(both)
            extra = b"".join(
                c
                for c in dict.fromkeys(new)
                if not _holds(both, c) and not (c[:2] in spilled and self._spilled_holds(key, c))
            )
            if extra:
                self._txn.put(key, (self._txn.get(key, db=tier) or b"") + extra, db=tier)
                self._added[0].append(key)
                self._added[1].append(extra)
                added += len(extra) // CELL_BYTES
                self._fresh_cells(len(extra) // CELL_BYTES)
        return added

    def _delete(self, arg: tuple[np.ndarray, list[bytes]]) -> None:
        rows, raws = arg
        nums = self._number(raws, create=False)
        held = [i for i, num in enumerate(nums) if num is not None]
        if not held:
            return
        keys, packed = grouped(rows[held], np.array([nums[i] for i in held], dtype=np.uint32))
        spilled = {
            key: spilled_leads(cells) for key, cells in self._t.buckets(self._txn, keys).items()
        }
        removed = _remove_cells(self._txn, self._t.index, keys, packed)
        if self._t.fresh is not None:
            from_fresh = _remove_cells(self._txn, self._t.fresh, keys, packed)
            self._state["fresh"] = self._state.get("fresh", 0) - from_fresh
            removed += from_fresh
        for key, cells in zip(keys, packed):
            leads = spilled.get(key)
            if leads:
                for at in range(0, len(cells), CELL_BYTES):
                    if cells[at : at + 2] in leads:
                        removed += self._unspill(key, cells[at : at + CELL_BYTES])
        self._state["cells"] -= removed

    def _spilled_key(self, bucket: bytes, cell: bytes) -> bytes | None:
        """The key ``cell`` (lead, number) has if its lead is spilled (None: its
        number has no names row)."""
        name = self._txn.get(cell[2:], db=self._t.names)
        return None if name is None else bucket + cell[:2] + name

    def _spilled_holds(self, bucket: bytes, cell: bytes) -> bool:
        key = self._spilled_key(bucket, cell)
        hot = self._t.hot_rows()
        return key is not None and hot is not None and self._txn.get(key, db=hot) == cell[2:]

    def _unspill(self, bucket: bytes, cell: bytes) -> int:
        """Delete a cell held under a spilled lead; 1 if it was there."""
        if not self._spilled_holds(bucket, cell):
            return 0
        key = self._spilled_key(bucket, cell)
        return int(self._txn.delete(key, db=self._t.hot_rows()))

    def _docs(self, latest: dict[bytes, Document]) -> None:
        short = max(map(len, latest)) < self._h.max_key  # keys are the ids themselves
        raws = sorted(latest) if short else sorted(latest, key=self._h.fold)
        fps = [latest[raw].fingerprint for raw in raws]
        nums = self._number(raws, create=True)
        self._named.update(zip(nums, zip(fps, raws)))  # type: ignore[arg-type]
        bare = short and all(map(_NO_COLUMNS.__eq__, map(_COLUMNS, latest.values())))
        if bare:  # number and fingerprint only: packed in one NumPy pass
            rows = np.empty(len(raws), dtype=_BARE)
            rows["num"] = np.array(nums, dtype=np.uint32)
            rows["fp"] = np.array(fps, dtype=np.uint64)
            buf, step = rows.tobytes(), _BARE.itemsize
            keys, values = raws, [buf[i : i + step] for i in range(0, len(buf), step)]
        else:
            keys = [self._h.fold(raw) for raw in raws]
            values = [
                self._t.doc_value(num, latest[raw], raw, key)  # type: ignore[arg-type]
                for raw, num, key in zip(raws, nums, keys)
            ]
        self._row(raws)
        held = [row for row in map(self._rows.__getitem__, raws) if row is not None]
        self._state["documents"] += len(raws) - sum(len(row) != _NUM.size for row in held)
        self._rows.update(zip(raws, values))
        self._documented.update(raws)
        items = list(zip(keys, values))
        if self._prewritten:  # rows written ahead in parts, unchanged since: done
            items = [(k, v) for k, v in items if self._prewritten.get(k) != v]
        if items:
            cursor = self._txn.cursor(self._t.docs)
            append = not cursor.last() or bytes(cursor.key()) < items[0][0]
            cursor.putmulti(items, append=append)

    def _undocs(self, raws: list[bytes]) -> None:
        self._row(raws)
        for raw in raws:
            row = self._rows[raw]
            if row is None:
                continue
            self._txn.delete(self._h.fold(raw), db=self._t.docs)
            self._unname(_NUM.unpack_from(row)[0])  # its cells, if any are left, vanish
            self._state["documents"] -= len(row) != _NUM.size
            self._rows[raw] = None
            self._nums.pop(raw, None)

    def _unname(self, num: int) -> None:
        self._named.pop(num, None)
        self._txn.delete(_NUM.pack(num), db=self._t.names)

    def _finish(self) -> None:
        """Names rows (the commit record of the batch's cells), number-only docs rows
        of ids that got cells but no document, the store's record, the filter of
        the tier the cells went to."""
        if self._named:
            nums = sorted(self._named)
            fps, raws = zip(*map(self._named.__getitem__, nums))
            heads = np.empty(len(nums), dtype=_BARE)
            heads["num"] = nums
            heads["fp"] = np.array(fps, dtype=np.uint64)
            buf = heads.tobytes()
            keys = [buf[i : i + 4] for i in range(0, len(buf), _BARE.itemsize)]
            values = [buf[i + 4 : i + 12] + raw for i, raw in zip(range(0, len(buf), 12), raws)]
            cursor = self._txn.cursor(self._t.names)
            append = not cursor.last() or bytes(cursor.key()) < keys[0]
            cursor.putmulti(zip(keys, values), append=append)
            for raw in set(raws) - self._documented:
                if self._rows.get(raw) is None:  # cells but no document: number the id
                    num = self._nums[raw]
                    self._txn.put(self._h.fold(raw), _NUM.pack(num), db=self._t.docs)
            self._state["next"] = max(self._state["next"], nums[-1] + 1)
        self._t.put_state(self._txn, self._state)
        tier = FRESH if self._t.new_cells_tier() is self._t.fresh else b"index"
        self.saved = self._t.add_to_filter(self._txn, tier, self._added)


#: A wide scan matches cells to prefixes this many cells at a time (memory: ~30
#: bytes a cell), through a table of 2**bits flags, bits in this range: a cell of
#: no prefix passes it with P ~ prefixes / 2**bits (<= 1/32 up to the top).
MATCH_CHUNK = 1 << 22
FILTER_BITS = (10, 26)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * this


def _matched(
    tiers: Sequence[list[tuple[bytes, bytes]]], probe: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(prefix position, cell number) of each cell of the ``tiers`` (each a list
    of (bucket key, cells)) whose bucket and lead are a prefix's (``probe``:
    bucket << 16 | lead), tier by tier in the order of the cells, each of a
    prefix listed twice twice: by the C extension's one pass over the cells
    where it is built (its cost was most of a batch lookup's at 10 M documents),
    else by :func:`_matched_py`."""
    fast = native.module()
    if fast is None:
        found = [_matched_py(pairs, probe) for pairs in tiers if pairs]
    else:
        order = np.argsort(probe, kind="stable")
        probes, positions = probe[order], order.astype(np.int64)
        found = [
            (np.frombuffer(w, dtype=np.int64), np.frombuffer(n, dtype=np.uint32))
            for w, n in (fast.match_cells(pairs, probes, positions) for pairs in tiers if pairs)
        ]
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
    return np.concatenate([w for w, _ in found]), np.concatenate([n for _, n in found])


def _matched_py(
    found: list[tuple[bytes, bytes]], probe: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_matched` of one tier in NumPy (the reference of the C extension's).

    Linear in the cells read and without Python work per prefix or per cell: a
    cell's key (bucket << 16 | lead) is looked up in a table of flags set at the
    probes' hashes, where most cells of no prefix fail, and those that pass are
    matched exactly by a binary search of the sorted probes (each of a prefix
    listed twice gets the cell twice)."""
    order = np.argsort(probe, kind="stable")
    probes = probe[order]
    lo_bits, hi_bits = FILTER_BITS
    bits = int(min(hi_bits, max(lo_bits, len(probes).bit_length() + 5)))
    table = np.zeros(1 << bits, dtype=bool)
    table[(probes * _GOLDEN) >> np.uint64(64 - bits)] = True
    values = [value for _, value in found]
    sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) // CELL_BYTES
    held = np.frombuffer(b"".join(b"\x00" + key for key, _ in found), dtype=">u4").astype(np.uint64)
    held <<= np.uint64(16)
    ends = np.cumsum(sizes)
    cuts = np.unique(np.searchsorted(ends, np.arange(MATCH_CHUNK, ends[-1], MATCH_CHUNK)))
    which: list[np.ndarray] = []
    nums: list[np.ndarray] = []
    for a, b in pairwise([0, *cuts.tolist(), len(values)]):
        cells = np.frombuffer(b"".join(values[a:b]), dtype=CELL)
        key = np.repeat(held[a:b], sizes[a:b]) | cells["lo"].astype(np.uint64)
        cand = np.flatnonzero(table[(key * _GOLDEN) >> np.uint64(64 - bits)])
        key = key[cand]
        left = np.searchsorted(probes, key, side="left")
        count = np.searchsorted(probes, key, side="right") - left
        pair = np.repeat(np.arange(len(cand)), count)  # each (cell, prefix) pair
        first = np.repeat(left - (np.cumsum(count) - count), count) + np.arange(len(pair))
        which.append(order[first])
        nums.append(cells["num"][cand[pair]].astype(np.uint32))
    return np.concatenate(which), np.concatenate(nums)


def _distinct(bucket: np.ndarray) -> np.ndarray:
    """The distinct bucket numbers (flag << 16 | top 16 bits: 24 bits), ascending:
    many of them by marking a table of all 2**24 (linear, no sort of them)."""
    if len(bucket) < 1 << 16:
        return np.unique(bucket)
    seen = np.zeros(1 << 24, dtype=bool)
    seen[bucket] = True
    return np.flatnonzero(seen).astype(np.uint64)


def _buckets_of(tiers: list[Any], prefixes: Sequence[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """(prefix, cells of its bucket in one tier) for each prefix and tier holding
    its bucket: one multi-get a tier. A prefix listed twice comes twice."""
    keys = [prefix[4:5] + prefix[0:2] for prefix in prefixes]
    by_key = dict(zip(keys, prefixes))
    if len(by_key) == len(keys):  # the common case: one prefix a bucket
        for tier in tiers:
            for key, packed in tier.getmulti(keys):
                yield by_key[key], packed
        return
    listed: dict[bytes, list[bytes]] = {}  # probes of one bucket, or a prefix listed twice
    for key, prefix in zip(keys, prefixes):
        listed.setdefault(key, []).append(prefix)
    for tier in tiers:
        for key, packed in tier.getmulti(list(listed)):
            for prefix in listed[key]:
                yield prefix, packed


def _remove_cells(txn: Txn, db: Any, keys: list[bytes], packed: list[bytes]) -> int:
    """Remove each of the cells ``packed`` (by bucket ``keys``) from the tier ``db``
    where it is held; the cells removed."""
    cursor = txn.cursor(db)
    removed = 0
    for key, cells in zip(keys, packed):
        old = cursor.get(key)
        if old is None:
            continue
        kept = old
        for i in range(0, len(cells), CELL_BYTES):
            at = next((p for p in find_cells(kept, cells[i : i + CELL_BYTES])), -1)
            if at >= 0:
                kept = kept[:at] + kept[at + CELL_BYTES :]
        if kept != old:
            removed += (len(old) - len(kept)) // CELL_BYTES
            cursor.put(key, kept) if kept else cursor.delete()
    return removed


def _holds(packed: bytes, cell: bytes) -> bool:
    return next(find_cells(packed, cell), None) is not None


# -- bulk load ------------------------------------------------------------------
_SPILL = np.dtype([("hi", "<u2"), ("lo", "<u2"), ("num", "<u4")])  # a flag's cell
_LOAD_CELLS = 1 << 22  # cells a commit while appending the sorted index


def bulk_load(
    tables: Tables, blocks: Iterable[tuple[Sequence[CellBlock], Sequence[Document]]], work: Path
) -> int:
    """Fill an empty index from ``blocks`` of (cell blocks, their documents) without
    a B+tree insert per cell: numbers are given in order (names rows are
    appended), each block's docs rows are sorted and put in one sweep, and each
    flag's cells are spilled to a file in ``work``, sorted there by bucket, and
    appended to the index bucket by bucket. The index pages are written full and
    once. Ids must be unique across the blocks. The first cell block of a block
    holds every document's cells in order (the pigeonhole's); the others, some of
    the documents' in order (the band rows of those that have band keys)."""
    with tables.env.begin(write=True) as txn:
        state = tables.state(txn, loading=True)
        if state.get(LOADING):  # a load that was killed: start over
            _empty(tables, txn)
            state = {**{k: v for k, v in state.items() if k != LOADING}, **new_state()}
        elif state["next"] or txn.stat(tables.docs)["entries"]:
            raise StoreError(
                f"a bulk load needs an empty index, and {tables.h.path} holds documents; "
                "ingest into it instead, or load into a new folder"
            )
        tables.put_state(txn, {**state, LOADING: True})
    empty = dict(state)
    spills: dict[int, Any] = {}
    count = 0
    loaded = False
    try:
        for cell_blocks, docs in blocks:
            nums = np.arange(count, count + len(docs), dtype=np.uint32)
            _check_room(tables, count, len(docs))
            with tables.env.begin(write=True) as txn:
                _load_rows(tables, txn, docs, nums, cell_blocks[0].rows[:, 0]["fp"])
            for cells in cell_blocks:
                _spill(cells.rows, _numbers(cells.doc_ids, docs, nums), spills, work)
            count += len(docs)
        for handle in spills.values():
            handle.close()
        paths = [work / f"flag-{flag}" for flag in sorted(spills)]
        spilled = sum(path.stat().st_size for path in paths) // _SPILL.itemsize
        main = PrefixFilter.empty(filter_shift(spilled, TIER_FILTER_BITS[b"index"]))
        cells_held = sum(_append_flag(tables, path, main) for path in paths)
        with tables.env.begin(write=True) as txn:
            state.update(next=count, cells=cells_held, documents=count)
            tables.put_state(txn, state)  # without LOADING: the rows are one index from here
            if tables.kept is not None:  # the index's filter, marked as it was appended
                tables.save_filter(txn, b"index", main)
                tables.save_filter(txn, FRESH, PrefixFilter.empty(tables.shift_for(state, FRESH)))
        loaded = True
    finally:
        for handle in spills.values():
            handle.close()
        if not loaded:  # an error or Ctrl-C: the index is left empty, as it was
            with tables.env.begin(write=True) as txn:
                _empty(tables, txn)
                tables.put_state(txn, empty)
    return count


def _empty(tables: Tables, txn: Txn) -> None:
    """Every row of a load's tables deleted (the tables stay)."""
    tiers = (tables.index, tables.tier(txn), tables.hot_rows())
    for db in (tables.docs, tables.names, *tiers, tables.kept):
        if db is not None:
            txn.drop(db, delete=False)


def _load_rows(
    tables: Tables, txn: Txn, docs: Sequence[Document], nums: np.ndarray, fps: np.ndarray
) -> None:
    """Names rows appended; docs rows sorted and put in one sweep (appended to an
    empty table: its pages full; the next blocks' go between them). Rows are made
    from NumPy views (no slicing per document)."""
    raws = [doc_id.encode("utf-8", "surrogateescape") for doc_id in map(_DOC_ID, docs)]
    heads = np.empty(len(docs), dtype=_BARE)
    heads["num"] = nums
    heads["fp"] = fps
    keys = np.ascontiguousarray(heads["num"]).view("V4").tolist()
    fp8 = np.ascontiguousarray(heads["fp"]).view("V8").tolist()
    txn.cursor(tables.names).putmulti(zip(keys, map(bytes.__add__, fp8, raws)), append=True)
    bare = max(map(len, raws)) < tables.h.max_key and all(
        map(_NO_COLUMNS.__eq__, map(_COLUMNS, docs))
    )
    if bare:  # number and fingerprint only: the head is the whole row
        keys, values = raws, heads.view(f"V{_BARE.itemsize}").tolist()
    else:
        keys = [tables.h.fold(raw) for raw in raws]
        values = [
            tables.doc_value(num, doc, raw, key)
            for doc, raw, num, key in zip(docs, raws, nums.tolist(), keys)
        ]
    items = sorted(zip(keys, values))
    cursor = txn.cursor(tables.docs)
    # A key put twice (in this block, or one before) is not added: appended, it is
    # not past the last key; put between, it is there already.
    if cursor.putmulti(items, overwrite=False, append=not cursor.last())[1] != len(items):
        raise StoreError(
            f"a bulk load into {tables.h.path} was given one id twice; ids must be "
            "unique (ingest replaces documents, a bulk load does not)"
        )


def _numbers(ids: Sequence[str], docs: Sequence[Document], nums: np.ndarray) -> np.ndarray:
    """The numbers of ``ids``: all of the block's documents in order, or some of
    them in order (a lookup only then)."""
    if len(ids) == len(docs):
        return nums
    at = {doc.doc_id: i for i, doc in enumerate(docs)}
    return nums[np.fromiter((at[doc_id] for doc_id in ids), dtype=np.intp, count=len(ids))]


def _spill(rows: np.ndarray, nums: np.ndarray, spills: dict[int, Any], work: Path) -> None:
    """Append each flag's cells of one block to that flag's spill file."""
    c = rows.shape[1]
    for j in range(c):
        column = rows[:, j]
        flag = int(column["flag"][0]) if len(column) else j + 1
        field = column["field"].astype(np.uint32)
        out = np.empty(len(column), dtype=_SPILL)
        out["hi"] = field >> np.uint32(16)
        out["lo"] = field & np.uint32(0xFFFF)
        out["num"] = nums
        if flag not in spills:
            spills[flag] = (work / f"flag-{flag}").open("wb")
        out.tofile(spills[flag])


def _append_flag(tables: Tables, spill: Path, main: PrefixFilter) -> int:
    """One flag's cells, grouped by bucket, appended to the index (their prefixes
    marked in ``main``); the cells held."""
    flag = int(spill.name.rsplit("-", 1)[1])
    spilled = np.fromfile(spill, dtype=_SPILL)
    spill.unlink()
    # A radix sort of the 16-bit bucket numbers (the order within a bucket is free).
    order = np.argsort(spilled["hi"], kind="stable")
    hi = spilled["hi"][order]
    cells = np.empty(len(spilled), dtype=CELL)
    cells["lo"] = spilled["lo"][order]
    cells["num"] = spilled["num"][order]
    del spilled, order
    for at in range(0, len(cells), _LOAD_CELLS):
        part, bucket = cells[at : at + _LOAD_CELLS], hi[at : at + _LOAD_CELLS]
        # A bucket cut by the part boundary continues in the next commit.
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        keys = np.empty(len(starts), dtype=[("flag", "u1"), ("hi", ">u2")])
        keys["flag"] = flag
        keys["hi"] = bucket[starts]
        buf = part.tobytes()
        bounds = [*(starts * CELL_BYTES).tolist(), len(buf)]
        values = [buf[a:b] for a, b in pairwise(bounds)]
        names = keys.view("V3").tolist()
        tables.probe.mark(main.bits, main.shift, list(zip(names, values)))
        with tables.env.begin(write=True) as txn:
            cursor = txn.cursor(tables.index)
            if at and cursor.last() and cursor.key() == names[0]:
                values[0] = cursor.value() + values[0]
                cursor.delete()
            cursor.putmulti(zip(names, values), append=True)
    return len(cells)
