"""The pages LMDB's free list holds, read from its data file without LMDB.

A commit can leave the file shorter than its header's last page: pages taken from
the end of the file and given back before the commit are on the free list and
were never written. Only the pages the snapshot uses must lie in the file, so a
file shorter than its header says is truncated only if a page past its end is
not free (:func:`tail_is_free`). The layout read is LMDB 0.9's (mdb.c: MDB_page,
MDB_node; 64-bit, little-endian), as :mod:`~simhash_hbase.store.lmdb.store` reads
its header.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

_PAGE_HEAD = struct.Struct("<Q2xHHH")  # page number, flags, lower (or overflow count), upper
_NODE_HEAD = struct.Struct("<HHHH")  # lo, hi, flags, key size
_HEAD_BYTES = 16
P_BRANCH, P_LEAF, P_OVERFLOW = 0x01, 0x02, 0x04
F_BIGDATA = 0x01
P_INVALID = (1 << 64) - 1


def tail_is_free(f: BinaryIO, psize: int, free_root: int, last_page: int, size: int) -> bool:
    """True if every page from the file's end (``size`` bytes) to ``last_page`` is on
    the free list rooted at ``free_root``; False if one is not, or if the free list
    itself reaches past the end (then the file is truncated)."""
    held = size // psize
    free: set[int] = set()
    pending = [] if free_root == P_INVALID else [free_root]
    while pending:
        pgno = pending.pop()
        if pgno >= held:
            return False
        page = _page(f, pgno, psize)
        _, flags, lower, _ = _PAGE_HEAD.unpack_from(page)
        for at in struct.unpack_from(f"<{(lower - _HEAD_BYTES) // 2}H", page, _HEAD_BYTES):
            lo, hi, nflags, ksize = _NODE_HEAD.unpack_from(page, at)
            if flags & P_BRANCH:
                pending.append(lo | hi << 16 | nflags << 32)
                continue
            data = at + _NODE_HEAD.size + ksize
            if nflags & F_BIGDATA:
                (over,) = struct.unpack_from("<Q", page, data)
                if over >= held:
                    return False
                raw = _page(f, over, psize, count=True)
                free.update(_ids(raw, _HEAD_BYTES))
            else:
                free.update(_ids(page, data))
    return all(pgno in free for pgno in range(held, last_page + 1))


def _page(f: BinaryIO, pgno: int, psize: int, count: bool = False) -> bytes:
    """Page ``pgno`` (with ``count``, an overflow page and the pages it spans)."""
    f.seek(pgno * psize)
    page = f.read(psize)
    if count:
        _, _, pages = struct.unpack_from("<Q2xHI", page)
        page += f.read((pages - 1) * psize)
    return page


def _ids(raw: bytes, at: int) -> tuple[int, ...]:
    """An IDL: a count, then as many page numbers."""
    (n,) = struct.unpack_from("<Q", raw, at)
    return struct.unpack_from(f"<{n}Q", raw, at + 8)
