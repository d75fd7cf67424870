"""Every byte of the storage contract, fixed-width and big-endian (docs/SPEC.md):
row keys, prefixes, fingerprints, document ids and columns, meta records.

Keeping them in one module means the contract every store holds is readable in
one place and tested in one place. How the embedded store lays these bytes out
in LMDB (folded keys, packed columns) is its own file format, in store/lmdb/columns.py.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from simhash_hbase import _native as native
from simhash_hbase.errors import InvalidInput, StoreCorrupt, StoreError
from simhash_hbase.records import MAX_TIME_MS, MIN_TIME_MS, Document

FINGERPRINT_BYTES = 8
TIME_BYTES = 8
ROWKEY_BYTES = 13
PREFIX_BYTES = 5
MAX_DOC_ID_BYTES = 1024
BLOB_PART_BYTES = 4 << 20  # base64 characters per meta record

_PREFIX = struct.Struct(">IB")
_ROWKEY = struct.Struct(">IBQ")
# A row key as a NumPy record, for encoding many at once.
ROWKEY_DTYPE = np.dtype([("field", ">u4"), ("flag", "u1"), ("fp", ">u8")])
assert ROWKEY_DTYPE.itemsize == ROWKEY_BYTES

# Docs table columns (family ``f``), as HBase names them.
COL_FINGERPRINT = b"f:h"
COL_TEXT = b"f:text"
COL_META = b"f:meta"
COL_SKETCH = b"f:s"  # the b-bit MinHash sketch (64 bytes), then its evidence (optional)
COL_BANDS = b"f:b"  # the LSH band keys, 4 bytes each, big-endian
COL_CLUSTER = b"f:c"  # its cluster's representative, when another document (UTF-8 id)
COL_TIME = b"f:t"  # when the document arrived: ms since the epoch, 8 bytes big-endian signed
#: The manifest key of an index's retention in whole seconds (absent: it keeps every
#: document; docs/lifecycle.md): stores read it too (the embedded store's time order,
#: HBase's TTLs).
RETAIN = "retain_s"
COL_OWNER = b"f:o"  # HBase: the token of the writer that owns the row (SPEC, "Writers")
MAX_SKETCH_BYTES = 64 + 2048  # the largest b-bit sketch and evidence (MinHashParams)
BAND_BYTES = 4


def fingerprint_to_bytes(fp: int) -> bytes:
    return fp.to_bytes(FINGERPRINT_BYTES, "big")


def fingerprint_from_bytes(raw: bytes) -> int:
    if len(raw) != FINGERPRINT_BYTES:
        raise StoreError(f"a stored fingerprint has {len(raw)} bytes, expected 8")
    return int.from_bytes(raw, "big")


def encode_rowkey(field: int, flag: int, fp: int) -> bytes:
    return _ROWKEY.pack(field, flag, fp)


def decode_rowkey(key: bytes) -> tuple[int, int, int]:
    """(segment field, flag, fingerprint) of a 13-byte index row key."""
    if len(key) != ROWKEY_BYTES:
        raise StoreError(f"an index row key has {len(key)} bytes, expected 13")
    field, flag, fp = _ROWKEY.unpack(key)
    return field, flag, fp


def rowkey_fingerprint(key: bytes) -> int:
    """The fingerprint in an index row key (bytes 5..12); hot on every query."""
    return int.from_bytes(key[PREFIX_BYTES:ROWKEY_BYTES], "big")


def encode_prefix(field: int, flag: int) -> bytes:
    return _PREFIX.pack(field, flag)


def encode_prefixes(fp: int, terms: Sequence[tuple[int, int, int, int, int]]) -> list[bytes]:
    """The scan prefixes of one fingerprint, from its scheme's ``prefix_terms``.

    One query's hot path: a comprehension of integer ops, ~3x cheaper than
    computing the fields and packing each prefix.
    """
    wide = fp << 40
    return [
        ((wide >> r1 & m1) | (wide >> r2 & m2) | flag).to_bytes(PREFIX_BYTES, "big")
        for r1, m1, r2, m2, flag in terms
    ]


def prefix_encoder() -> Callable[[int, Sequence[tuple[int, int, int, int, int]]], list[bytes]]:
    """:func:`encode_prefixes`, in C where the extension is built (the same bytes;
    ``$SHDB_NATIVE=0``: in Python)."""
    c = native.module()
    return encode_prefixes if c is None else c.encode_prefixes  # type: ignore[no-any-return]


def bucket_cell(row: bytes, doc_id: str) -> tuple[bytes, bytes]:
    """The bucket layout's (row, qualifier) of index cell (13-byte ``row``, ``doc_id``):
    the row is the key's 5-byte prefix, the qualifier its fingerprint then the id."""
    return row[:PREFIX_BYTES], row[PREFIX_BYTES:] + encode_doc_id(doc_id)


def cell_of_bucket(prefix: bytes, qualifier: bytes) -> tuple[bytes, str]:
    """The index cell (13-byte row key, doc id) a bucket row's qualifier holds."""
    if len(prefix) != PREFIX_BYTES or len(qualifier) <= FINGERPRINT_BYTES:
        raise StoreError(
            f"an index bucket cell has a {len(prefix)}-byte row and a {len(qualifier)}-byte "
            f"qualifier, expected {PREFIX_BYTES} and more than {FINGERPRINT_BYTES}"
        )
    return prefix + qualifier[:FINGERPRINT_BYTES], qualifier[FINGERPRINT_BYTES:].decode("utf-8")


def cells_of_bucket(prefix: bytes, qualifiers: Sequence[bytes]) -> list[tuple[bytes, str]]:
    """:func:`cell_of_bucket` of each of one bucket row's ``qualifiers``, checked at once."""
    fp = FINGERPRINT_BYTES
    shortest = min(qualifiers, key=len, default=b"\0" * (fp + 1))
    if len(prefix) != PREFIX_BYTES or len(shortest) <= fp:
        cell_of_bucket(prefix, shortest)  # raises, naming the sizes
    return [(prefix + q[:fp], q[fp:].decode("utf-8")) for q in qualifiers]


def document_of_bucket(qualifier: bytes) -> tuple[str, int]:
    """(doc id, fingerprint) of a bucket row's qualifier: a query's documents
    without the 13-byte key of :func:`cell_of_bucket`."""
    if len(qualifier) <= FINGERPRINT_BYTES:
        raise StoreError(
            f"an index bucket cell has a {len(qualifier)}-byte qualifier, expected more "
            f"than {FINGERPRINT_BYTES}"
        )
    fp = int.from_bytes(qualifier[:FINGERPRINT_BYTES], "big")
    return qualifier[FINGERPRINT_BYTES:].decode("utf-8"), fp


def prefix_stop(prefix: bytes) -> bytes:
    """Smallest key above every key that starts with ``prefix`` (HBase row_stop)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of only 0xff bytes has no upper bound")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def rowkeys_array(fps: np.ndarray, fields: np.ndarray, first_flag: int = 1) -> np.ndarray:
    """Row keys of many fingerprints as an (n, c) ROWKEY_DTYPE array: [i, j] is
    flag ``first_flag + j`` of fp i (a batch's keys without a bytes object each):
    the segment combinations from flag 1, or the LSH bands after them."""
    n, c = fields.shape
    rows = np.empty((n, c), dtype=ROWKEY_DTYPE)
    rows["field"] = fields
    rows["flag"] = np.arange(first_flag, first_flag + c, dtype=np.uint8)
    rows["fp"] = np.asarray(fps, dtype=np.uint64)[:, None]
    return rows


def encode_rowkeys_many(fps: np.ndarray, fields: np.ndarray) -> list[bytes]:
    """Row keys of many fingerprints at once: row i*c + j is combination j+1 of fp i."""
    return rowkeys_array(fps, fields).reshape(-1).view(f"V{ROWKEY_BYTES}").tolist()


PREFIX_DTYPE = np.dtype([("field", ">u4"), ("flag", "u1")])


def encode_prefixes_many(fields: np.ndarray) -> list[list[bytes]]:
    """Scan prefixes (field + flag) of many fingerprints: row i holds fp i's prefixes."""
    n, c = fields.shape
    rows = np.empty((n, c), dtype=PREFIX_DTYPE)
    rows["field"] = fields
    rows["flag"] = np.arange(1, c + 1, dtype=np.uint8)
    flat = rows.reshape(-1).view(f"V{PREFIX_BYTES}").tolist()  # bytes, made in C
    return [flat[i : i + c] for i in range(0, n * c, c)]


def prefix_values(fields: np.ndarray, first_flag: int = 1) -> np.ndarray:
    """Scan prefixes of many fingerprints as the numbers their 5 big-endian bytes
    spell (field << 8 | flag), an (n, c) uint64 array: number order is byte order."""
    flags = np.arange(first_flag, first_flag + fields.shape[1], dtype=np.uint64)
    return fields.astype(np.uint64) << np.uint64(8) | flags


def rowkey_prefix_values(rows: np.ndarray) -> np.ndarray:
    """The :func:`prefix_values` of row keys (a ROWKEY_DTYPE array)."""
    return rows["field"].astype(np.uint64) << np.uint64(8) | rows["flag"].astype(np.uint64)


def encode_prefix_values(values: np.ndarray) -> list[bytes]:
    """The 5-byte scan prefixes of :func:`prefix_values`, made in C."""
    wide = (np.asarray(values, dtype=np.uint64).reshape(-1) << np.uint64(24)).astype(">u8")
    head = np.ascontiguousarray(wide.view(np.uint8).reshape(-1, 8)[:, :PREFIX_BYTES])
    return head.view(f"V{PREFIX_BYTES}").reshape(-1).tolist()


def encode_bands(bands: np.ndarray) -> bytes:
    """LSH band keys (uint32) as stored in ``f:b``: 4 bytes each, big-endian."""
    return np.asarray(bands, dtype=">u4").tobytes()


def decode_bands(raw: bytes) -> np.ndarray:
    if len(raw) % BAND_BYTES:
        raise StoreError(f"stored band keys have {len(raw)} bytes, not a multiple of 4")
    return np.frombuffer(raw, dtype=">u4").astype(np.uint32)


def band_prefixes(bands: bytes, first_flag: int) -> list[bytes]:
    """The 5-byte scan prefixes (band key, flag) of one document's stored band keys
    (``f:b``): each 4-byte key and its flag, by slicing (a query's hot path)."""
    return [
        bands[at : at + BAND_BYTES] + bytes((first_flag + b,))
        for b, at in enumerate(range(0, len(bands), BAND_BYTES))
    ]


def encode_doc_id(doc_id: str) -> bytes:
    """UTF-8 id, checked against docs/SPEC.md: non-empty, at most 1024 bytes."""
    if not isinstance(doc_id, str):
        raise InvalidInput(f"document id {doc_id!r} is a {type(doc_id).__name__}, not a string")
    raw = _utf8(doc_id, "document id")
    if not raw:
        raise InvalidInput("document id is empty; give every document a non-empty id")
    if len(raw) > MAX_DOC_ID_BYTES:
        raise InvalidInput(
            f"document id {doc_id[:40]!r}... is {len(raw)} bytes; ids are at most "
            f"{MAX_DOC_ID_BYTES} bytes of UTF-8 (hash long ids, e.g. URLs, before ingest)"
        )
    return raw


def check_document(doc: Document) -> None:
    """:class:`InvalidInput` unless ``doc`` can be stored as docs/SPEC.md says:
    a valid id, a 64-bit fingerprint, text that is a string of encodable
    characters, meta a JSON object."""
    encode_doc_id(doc.doc_id)
    fp = doc.fingerprint
    if isinstance(fp, bool) or not isinstance(fp, int) or not 0 <= fp < 1 << 64:
        raise InvalidInput(
            f"fingerprint {fp!r} of {doc.doc_id!r} is not an unsigned 64-bit integer"
        )
    if doc.text is not None:
        if not isinstance(doc.text, str):
            raise InvalidInput(f"the text of {doc.doc_id!r} is a {type(doc.text).__name__}")
        _utf8(doc.text, f"the text of {doc.doc_id!r}")
    if doc.meta is not None:
        encode_meta(doc.meta, doc.doc_id)
    for name, value, limit in (("sketch", doc.sketch, MAX_SKETCH_BYTES), ("bands", doc.bands, 512)):
        if value is not None and (not isinstance(value, bytes) or not value or len(value) > limit):
            raise InvalidInput(
                f"the {name} of {doc.doc_id!r} must be 1..{limit} bytes, got {value!r:.40}"
            )
    if doc.bands is not None and len(doc.bands) % BAND_BYTES:
        raise InvalidInput(f"the band keys of {doc.doc_id!r} are not 4 bytes each")
    if doc.cluster is not None:
        encode_doc_id(doc.cluster)
    if doc.time is not None and not _valid_time(doc.time):
        raise InvalidInput(
            f"the time of {doc.doc_id!r} must be ms since the epoch in the years 1 to 9999, "
            f"got {doc.time!r:.40}"
        )


def _valid_time(ms: object) -> bool:
    return isinstance(ms, int) and not isinstance(ms, bool) and MIN_TIME_MS <= ms <= MAX_TIME_MS


def check_fingerprints(fps: list[int]) -> None:
    """:func:`check_fingerprint` of each: a list of ints in range in a few C-level
    passes (a batch's lookups), else one by one (the error names the first bad one)."""
    if set(map(type, fps)) <= {int} and (not fps or (min(fps) >= 0 and max(fps) < 1 << 64)):
        return
    for fp in fps:
        check_fingerprint(fp)


def check_fingerprint(fp: int) -> int:
    if isinstance(fp, bool) or not isinstance(fp, int) or not 0 <= fp < 1 << 64:
        raise InvalidInput(f"fingerprint {fp!r} is not an unsigned 64-bit integer")
    return fp


#: A document's optional columns, and their values when it has none: the one list
#: that every "bare document" fast path tests (a copy of it forgot the cluster).
EXTRAS = attrgetter("text", "meta", "sketch", "bands", "cluster")
NO_EXTRAS = (None, None, None, None, None)  # == compares each: "" or {} is a column


def bare(docs: Iterable[Document]) -> bool:
    """True if no document of ``docs`` has an optional column (fingerprint and id only)."""
    return all(map(NO_EXTRAS.__eq__, map(EXTRAS, docs)))


def check_documents(docs: Sequence[Document]) -> None:
    """:func:`check_document` of each of ``docs``; a batch of the common kind
    (string ids, int fingerprints, no other column) is checked in a few C-level
    passes, anything else document by document (so errors read the same)."""
    if not plain_documents_valid(docs):
        for doc in docs:
            check_document(doc)


def plain_documents_valid(docs: Sequence[Document]) -> bool:
    """True if ``docs`` are all of the common kind (string ids, int fingerprints,
    no other column than a time) and all valid, found in a few C-level passes;
    False says nothing (check them one by one)."""
    ids = [doc.doc_id for doc in docs]
    fps = [doc.fingerprint for doc in docs]
    times = [doc.time for doc in docs if doc.time is not None]
    if not (
        docs
        and set(map(type, ids)) == {str}
        and set(map(type, fps)) == {int}
        and bare(docs)
        and min(fps) >= 0
        and max(fps) < 1 << 64
        and (
            not times
            or (
                set(map(type, times)) == {int}
                and min(times) >= MIN_TIME_MS
                and max(times) <= MAX_TIME_MS
            )
        )
    ):
        return False
    return _ids_valid(ids)


def check_doc_ids(doc_ids: Sequence[str]) -> None:
    """:func:`encode_doc_id`'s check of each of ``doc_ids``: in a few C-level
    passes where all are valid (a bulk removal's batch), else one by one (so the
    error names the bad one as it always does)."""
    if doc_ids and not _ids_valid(doc_ids):
        for doc_id in doc_ids:
            encode_doc_id(doc_id)


def _ids_valid(ids: Sequence[str]) -> bool:
    """True if every one of ``ids`` (at least one) is a valid id; False says nothing."""
    if set(map(type, ids)) != {str}:
        return False
    try:
        sizes = list(map(len, map(str.encode, ids)))
    except UnicodeEncodeError:
        return False
    return min(sizes) > 0 and max(sizes) <= MAX_DOC_ID_BYTES


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{what} has a character that is not valid Unicode text at {exc.start} "
            f"({text[exc.start]!r})"
        ) from None


def encode_meta(meta: Any, doc_id: str) -> bytes:
    """Meta as stored: a JSON object, keys sorted, UTF-8."""
    if not isinstance(meta, dict):
        raise InvalidInput(f"the meta of {doc_id!r} is a {type(meta).__name__}, not an object")
    try:
        raw = json.dumps(meta, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"the meta of {doc_id!r} cannot be stored as JSON: {exc}") from None
    return _utf8(raw, f"the meta of {doc_id!r}")


def doc_to_columns(doc: Document) -> dict[bytes, bytes]:
    cols = {COL_FINGERPRINT: fingerprint_to_bytes(doc.fingerprint)}
    if doc.text is not None:
        cols[COL_TEXT] = _utf8(doc.text, f"the text of {doc.doc_id!r}")
    if doc.meta is not None:
        cols[COL_META] = encode_meta(doc.meta, doc.doc_id)
    if doc.sketch is not None:
        cols[COL_SKETCH] = doc.sketch
    if doc.bands is not None:
        cols[COL_BANDS] = doc.bands
    if doc.cluster is not None and doc.cluster != doc.doc_id:
        cols[COL_CLUSTER] = encode_doc_id(doc.cluster)
    if doc.time is not None:
        cols[COL_TIME] = encode_time(doc.time)
    return cols


def encode_time(ms: int) -> bytes:
    return ms.to_bytes(TIME_BYTES, "big", signed=True)


def decode_time(raw: bytes) -> int:
    if len(raw) != TIME_BYTES:
        raise StoreError(f"a stored time has {len(raw)} bytes, expected 8")
    return int.from_bytes(raw, "big", signed=True)


def doc_from_columns(doc_id: str, cols: Mapping[bytes, bytes]) -> Document:
    """A docs row read back; a damaged one (no fingerprint, bad UTF-8 or JSON) is a StoreCorrupt."""
    text = cols.get(COL_TEXT)
    meta = cols.get(COL_META)
    cluster = cols.get(COL_CLUSTER)
    time = cols.get(COL_TIME)
    try:
        return Document(
            doc_id=doc_id,
            fingerprint=fingerprint_from_bytes(cols[COL_FINGERPRINT]),
            text=None if text is None else text.decode("utf-8"),
            meta=None if meta is None else json.loads(meta),
            sketch=cols.get(COL_SKETCH),
            bands=cols.get(COL_BANDS),
            cluster=None if cluster is None else cluster.decode("utf-8"),
            time=None if time is None else decode_time(time),
        )
    except KeyError:
        reason = f"column {COL_FINGERPRINT.decode()} is missing"
    except (StoreError, ValueError) as exc:  # ValueError: bad UTF-8 or JSON
        reason = str(exc)
    raise StoreCorrupt(f"the docs row {doc_id!r} is damaged ({reason})")


def encode_blob_parts(raw: bytes, part_bytes: int = BLOB_PART_BYTES) -> list[dict[str, Any]]:
    """A blob (e.g. an IDF table) as meta records: zlib, base64, cut in parts so
    that no HBase cell exceeds its size limit."""
    packed = base64.b64encode(zlib.compress(raw, 6)).decode("ascii")
    return [
        {"zlib_base64": packed[i : i + part_bytes]}
        for i in range(0, max(len(packed), 1), part_bytes)
    ]


def decode_blob_parts(parts: list[dict[str, Any]]) -> bytes:
    try:
        return zlib.decompress(base64.b64decode("".join(p["zlib_base64"] for p in parts)))
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        raise StoreError(f"a stored blob is corrupt: {exc}") from exc


def encode_json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")


def decode_json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise StoreCorrupt(f"stored JSON is corrupt: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreCorrupt(f"stored JSON is not an object (found {type(value).__name__})")
    return value
