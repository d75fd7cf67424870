"""Bulk load of an empty index (a backfill, :func:`bulk_load`): documents
numbered in order, cells spilled to sorted scratch files by flag, then appended.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase.errors import StoreError
from simhash_hbase.records import Document
from simhash_hbase.store.base import CellBlock
from simhash_hbase.store.lmdb.buckets import _check_room
from simhash_hbase.store.lmdb.cells import (
    _BARE,
    _DOC_ID,
    CELL,
    CELL_BYTES,
    FRESH,
    LOADING,
    Txn,
    bare_rows,
    new_state,
)
from simhash_hbase.store.lmdb.filters import TIER_FILTER_BITS, PrefixFilter, filter_shift
from simhash_hbase.store.lmdb.tables import Tables
from simhash_hbase.store.lmdb.times import retime

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
    for db in (tables.docs, tables.names, *tiers, tables.kept, tables.times):
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
    bare = bare_rows(nums.tolist(), docs) if max(map(len, raws)) < tables.h.max_key else None
    if bare is not None:  # number, fingerprint (and time) only: packed in one pass
        keys, values = raws, bare
    else:
        keys = [tables.h.fold(raw) for raw in raws]
        values = [
            tables.doc_value(num, doc, raw, key)
            for doc, raw, num, key in zip(docs, raws, nums.tolist(), keys)
        ]
    if tables.times is not None:
        retime(tables, txn, [None] * len(docs), nums.tolist(), docs)
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
