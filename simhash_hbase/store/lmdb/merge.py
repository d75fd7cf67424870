"""Merging the fresh tier into the index (format 3): in parts of one key range
each, the filters kept exact as cells move (:func:`merge_fresh`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import repeat

import numpy as np

from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.buckets import _grown_all
from simhash_hbase.store.lmdb.cells import (
    _NUM,
    CELL,
    CELL_BYTES,
    FRESH,
    SPILLED,
    Txn,
    spilled_leads,
)
from simhash_hbase.store.lmdb.filters import (
    _FILTER_HEAD,
    TIER_FILTER_BITS,
    PrefixFilter,
    filter_shift,
    fresh_due,
)
from simhash_hbase.store.lmdb.tables import Tables

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
    parts = int(
        max(1, min(tuning.MAX_PARTS, state["cells"] * (CELL_BYTES + 1) // tuning.PART_BYTES))
    )
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
