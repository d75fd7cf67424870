"""How the embedded store writes rows as LMDB keys and values (docs/SPEC.md, "The
embedded store"), in both formats: document ids as key bytes, a docs row's packed
columns, keys folded past LMDB's key limit, and many index keys made in key order.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence

import numpy as np

from simhash_hbase.errors import StoreError
from simhash_hbase.layout import codec

_ID_COLUMN = b"_id"  # full id of a docs row whose key had to be folded
_REBUILD = "restore it from a backup, or rebuild it by ingesting into a new folder"


def _decode_id(raw: bytes) -> str:
    # surrogateescape: a damaged id still round-trips to its key, so it can be deleted
    return raw.decode("utf-8", "surrogateescape")


def _encode_id(doc_id: str) -> bytes:
    """The key bytes of an id. Ids were checked against SPEC.md by the index
    (codec.check_document); surrogates (ids read back from a damaged row) map
    back to the bytes they came from, so such a row can still be deleted."""
    return doc_id.encode("utf-8", "surrogateescape")


# -- file format (docs/SPEC.md, "The embedded store") ---------------------------
# LMDB caps keys at 511 bytes, below docs/SPEC.md's 1024-byte ids. Longer keys are
# folded to a fixed-length head + digest; the full key is then kept in the value.

_CELL_HEAD = struct.Struct(">BI")
_FINGERPRINT_ROW = np.dtype(
    [("name_len", "u1"), ("value_len", ">u4"), ("name", "S3"), ("fp", ">u8")]
)


def pack_columns(cols: Mapping[bytes, bytes]) -> bytes:
    """Column map -> bytes: per column, u8 name length, u32 value length, name, value."""
    parts: list[bytes] = []
    for name, value in cols.items():
        parts += (_CELL_HEAD.pack(len(name), len(value)), name, value)
    return b"".join(parts)


def pack_fingerprint_columns(fps: Sequence[int]) -> list[bytes]:
    """``pack_columns`` of many docs rows holding only ``f:h``, in one NumPy pass."""
    rows = np.empty(len(fps), dtype=_FINGERPRINT_ROW)
    rows["name_len"] = len(codec.COL_FINGERPRINT)
    rows["value_len"] = codec.FINGERPRINT_BYTES
    rows["name"] = codec.COL_FINGERPRINT
    rows["fp"] = np.fromiter(fps, dtype=np.uint64, count=len(fps))
    buf, step = rows.tobytes(), _FINGERPRINT_ROW.itemsize
    return [buf[i : i + step] for i in range(0, len(buf), step)]


def unpack_columns(raw: bytes) -> dict[bytes, bytes]:
    cols: dict[bytes, bytes] = {}
    pos, end = 0, len(raw)
    while pos < end:
        if pos + _CELL_HEAD.size > end:
            raise StoreError("an embedded docs row is corrupt (truncated)")
        name_len, value_len = _CELL_HEAD.unpack_from(raw, pos)
        pos += _CELL_HEAD.size
        name = raw[pos : pos + name_len]
        pos += name_len
        cols[name] = raw[pos : pos + value_len]
        pos += value_len
    if pos != end:
        raise StoreError("an embedded docs row is corrupt (truncated)")
    return cols


def fold_key(key: bytes, limit: int) -> tuple[bytes, bool]:
    """(stored key, folded?) for a key that may exceed the store's key limit.

    A key of ``limit`` bytes or more is folded to exactly ``limit`` bytes, and only
    a folded key has that length: a stored key is never both an id's own bytes
    and another id's fold, so two distinct ids never share a key (issue 22.3).
    """
    if len(key) < limit:
        return key, False
    digest = hashlib.sha256(key).digest()
    return key[: limit - len(digest) - 1] + b"\x00" + digest, True


def sorted_keys(rows: np.ndarray, tails: Sequence[bytes]) -> list[bytes]:
    """The keys ``rows[i, j] + tails[i]`` in byte order: ``rows`` is an (n, c) array
    of 13-byte row keys (:data:`codec.ROWKEY_DTYPE`), ``tails`` n byte strings.

    NumPy sorts the keys by their first 8 bytes as one big-endian number and
    builds them in that order, all tails of one length at once; only runs that
    tie on those bytes (rare, and always for one fingerprint held under several
    ids) are then sorted in Python. No Python code runs per key otherwise.
    """
    n, c = rows.shape
    flat = np.ascontiguousarray(rows).reshape(-1)
    head = (
        flat["field"].astype(np.uint64) << np.uint64(32)
        | flat["flag"].astype(np.uint64) << np.uint64(24)
        | flat["fp"].astype(np.uint64) >> np.uint64(40)
    )
    order = np.argsort(head)
    doc = order // c  # the tail of each key, in key order
    lengths = np.fromiter(map(len, tails), dtype=np.intp, count=n)
    groups = np.unique(lengths).tolist()
    if len(groups) == 1:  # one id length (hashes, numbered ids): no merge needed
        out = _joined(flat[order], doc, tails, lengths, groups[0])
    else:
        keys = np.empty(n * c, dtype=object)
        for length in groups:
            at = np.flatnonzero(lengths[doc] == length)
            made = _joined(flat[order[at]], doc[at], tails, lengths, length)
            keys[at] = np.fromiter(made, dtype=object, count=len(made))
        out = keys.tolist()
    head = head[order]
    ties = np.flatnonzero(head[1:] == head[:-1]).tolist()
    start = None
    for i, pos in enumerate(ties):  # pos and pos + 1 tie on their first 8 bytes
        if start is None:
            start = pos
        if i + 1 == len(ties) or ties[i + 1] != pos + 1:
            out[start : pos + 2] = sorted(out[start : pos + 2])
            start = None
    return out


def _joined(
    rows: np.ndarray, doc: np.ndarray, tails: Sequence[bytes], lengths: np.ndarray, length: int
) -> list[bytes]:
    """``rows[i] + tails[doc[i]]`` for tails of ``length`` bytes, made in NumPy."""
    width = codec.ROWKEY_BYTES + length
    block = np.empty((len(rows), width), dtype=np.uint8)
    block[:, : codec.ROWKEY_BYTES] = rows.view(np.uint8).reshape(-1, codec.ROWKEY_BYTES)
    if length:
        held = np.flatnonzero(lengths == length)  # the tails of this length, once each
        ids = np.frombuffer(b"".join([tails[i] for i in held.tolist()]), dtype=np.uint8)
        rank = np.empty(len(lengths), dtype=np.intp)
        rank[held] = np.arange(len(held))
        block[:, codec.ROWKEY_BYTES :] = ids.reshape(-1, length)[rank[doc]]
    return block.view(f"V{width}").reshape(-1).tolist()
