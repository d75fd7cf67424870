"""The tiers' prefix filters (format 4): a bit per hashed 5-byte prefix, kept
exact by every commit, so that a query skips the buckets of a tier that holds none
of its prefixes; and the size and merge rules of the tiers they depend on.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.cells import CELL, CELL_BYTES, FRESH


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
    return max(tuning.FRESH_MIN_CELLS, tier_cells(state, b"index") // tuning.FRESH_RATIO)


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
