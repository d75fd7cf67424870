"""Reading buckets: one query's probes (bucket keys and document numbers, with
the walk of LMDB's pages the C probe prefetches) and a batch's cells matched to its
prefixes. The pure-Python functions here are the references of the C kernels
(simhash_hbase/_native/probes.c and match.c; tests/test_native_probe.py and
tests/test_compact.py compare them).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import lmdb
import numpy as np

from simhash_hbase import _native as native
from simhash_hbase.store.lmdb.cells import CELL, CELL_BYTES, SPILLED
from simhash_hbase.store.lmdb.filters import PrefixFilter, mark_prefixes


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
