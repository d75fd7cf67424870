"""Writing a bucket: appending cells (checking for hot leads as it grows),
spilling a hot lead's cells to keys of their own, and removing cells.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, cast

import numpy as np

from simhash_hbase import _native as native
from simhash_hbase.errors import StoreError
from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.cells import (
    _HEAD_BYTES,
    _NUM,
    CELL,
    CELL_BYTES,
    MAX_DOCUMENTS,
    SPILLED,
    Txn,
    find_cells,
    spilled_leads,
)
from simhash_hbase.store.lmdb.tables import Tables


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
    for i in np.flatnonzero(after // tuning.CHECK_BYTES > before // tuning.CHECK_BYTES).tolist():
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
    hot = leads[counts >= tuning.HOT]
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


#: A removal's bucket edits: (changed: (key, cells kept), emptied keys, cells
#: removed, marked: the (key, cells) read that hold a spilled lead's mark).
Edits = tuple[list[tuple[bytes, bytes]], list[bytes], int, list[tuple[bytes, bytes]]]


def _remove_cells(
    txn: Txn, db: Any, keys: list[bytes], packed: list[bytes], marks: dict[bytes, set[bytes]]
) -> int:
    """Remove every copy of the cells ``packed`` (by distinct bucket ``keys``) from
    the tier ``db`` where it is held; the cells removed. ``marks`` gets the spilled
    leads of each bucket read (as it was), whose cells may be held in ``hot``
    instead. One multi-get, the edits in C (:func:`_edited`), one multi-put: a
    bulk removal makes no Python call per bucket or per cell."""
    changed, emptied, removed, marked = _edited(txn.cursor(db).getmulti(keys), keys, packed)
    if changed:
        txn.cursor(db).putmulti(changed)
    for key in emptied:  # LMDB's bindings have no multi-delete
        txn.delete(key, db=db)
    for key, old in marked:
        marks.setdefault(key, set()).update(spilled_leads(old))
    return removed


def _edited(found: list[tuple[bytes, bytes]], keys: list[bytes], packed: list[bytes]) -> Edits:
    """The edits that take the cells ``packed[i]`` out of bucket ``keys[i]``, of the
    buckets ``found`` held (a multi-get of ``keys``): by the C extension where it is
    built, else by :func:`_edited_py`."""
    fast = native.module()
    if fast is None:
        return _edited_py(found, keys, packed)
    return cast(Edits, fast.remove_cells(found, keys, packed))


def _edited_py(found: list[tuple[bytes, bytes]], keys: list[bytes], packed: list[bytes]) -> Edits:
    """:func:`_edited` in Python (the reference of the C extension's)."""
    wanted = dict(zip(keys, packed))
    changed: list[tuple[bytes, bytes]] = []
    emptied: list[bytes] = []
    marked: list[tuple[bytes, bytes]] = []
    removed = 0
    for key, old in found:
        if spilled_leads(old):
            marked.append((key, old))
        cells = wanted[key]
        gone = {cells[i : i + CELL_BYTES] for i in range(0, len(cells), CELL_BYTES)}
        kept = b"".join(
            cell
            for cell in (old[i : i + CELL_BYTES] for i in range(0, len(old), CELL_BYTES))
            if cell not in gone
        )
        if len(kept) == len(old):
            continue
        removed += (len(old) - len(kept)) // CELL_BYTES
        if kept:
            changed.append((key, kept))
        else:
            emptied.append(key)
    return changed, emptied, removed, marked


def _holds(packed: bytes, cell: bytes) -> bool:
    return next(find_cells(packed, cell), None) is not None
