"""The time order of a retained embedded index (table ``times``, docs/SPEC.md): a
key per document that has a time, ``time + 2**63`` (8 bytes, big-endian: unsigned
order is time order) and its number (4 bytes), no value. Expiry reads its head,
so finding the documents due costs a seek however many are held, and nothing when
none is due. Every commit that puts or deletes a docs row keeps it exact; only an
index created with a retention has the table (others pay nothing).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb.cells import _HEAD, _NUM, Txn, decode_id

_KEY = struct.Struct(">QI")  # time + 2**63, number
_OFFSET = 1 << 63


def time_key(ms: int, num: int) -> bytes:
    return _KEY.pack(ms + _OFFSET, num)


def row_time(tables: Any, row: bytes | None) -> int | None:
    """The time a docs row holds (None: no row, a number-only row, or no time)."""
    if row is None or len(row) == _NUM.size:
        return None
    cols = tables.h.unpack_columns(row[_HEAD.size :])
    raw = cols.get(codec.COL_TIME)
    return None if raw is None else codec.decode_time(raw)


def untime(tables: Any, txn: Txn, rows: Iterable[bytes | None]) -> None:
    """Delete the time keys of docs rows that go or change."""
    for row in rows:
        ms = row_time(tables, row)
        if ms is not None:
            txn.delete(time_key(ms, _NUM.unpack_from(row)[0]), db=tables.times)  # type: ignore[arg-type]


def retime(
    tables: Any,
    txn: Txn,
    olds: Sequence[bytes | None],
    nums: Sequence[int],
    docs: Sequence[Document],
) -> None:
    """The time keys of docs rows put: ``olds`` (the rows they replace, or None)."""
    for old, num, doc in zip(olds, nums, docs):
        held = row_time(tables, old)
        if held == doc.time:
            continue
        if held is not None:
            txn.delete(time_key(held, num), db=tables.times)
        if doc.time is not None:
            txn.put(time_key(doc.time, num), b"", db=tables.times)


def due(tables: Any, txn: Txn, before: int, limit: int) -> list[str]:
    """The ids of at most ``limit`` documents whose time is before ``before``, oldest
    first: a walk of the table's head and a names row each."""
    if tables.times is None:
        return []
    end = before + _OFFSET
    nums: list[bytes] = []
    cursor = txn.cursor(tables.times)
    if cursor.first():
        for key in cursor.iternext(values=False):
            if len(nums) >= limit or _KEY.unpack(key)[0] >= end:
                break
            nums.append(bytes(key[8:]))
    names = [txn.get(num, db=tables.names) for num in nums]
    return [decode_id(bytes(name[8:])) for name in names if name is not None]
