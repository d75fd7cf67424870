"""Byte layout of docs/SPEC.md: table-driven cases and hypothesis round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase.errors import InvalidInput
from simhash_hbase.layout import codec
from simhash_hbase.layout.scheme import SCHEMES
from simhash_hbase.records import Document, fingerprint_to_hex, parse_fingerprint_hex

fingerprints = st.integers(min_value=0, max_value=(1 << 64) - 1)


@pytest.mark.parametrize(
    ("fp", "raw"),
    [
        (0, b"\x00" * 8),
        (1, b"\x00" * 7 + b"\x01"),
        (0x0123456789ABCDEF, bytes.fromhex("0123456789abcdef")),
        ((1 << 64) - 1, b"\xff" * 8),
    ],
)
def test_fingerprint_bytes_are_big_endian(fp: int, raw: bytes) -> None:
    assert codec.fingerprint_to_bytes(fp) == raw
    assert codec.fingerprint_from_bytes(raw) == fp


@pytest.mark.parametrize(
    ("field", "flag", "fp", "hex_key"),
    [
        (0, 1, 0, "00000000010000000000000000"),
        (0xFFFFFFC0, 10, (1 << 64) - 1, "ffffffc00affffffffffffffff"),
        (0x12345600, 3, 0x0123456789ABCDEF, "12345600030123456789abcdef"),
    ],
)
def test_rowkey_layout(field: int, flag: int, fp: int, hex_key: str) -> None:
    key = codec.encode_rowkey(field, flag, fp)
    assert key.hex() == hex_key
    assert len(key) == codec.ROWKEY_BYTES
    assert codec.decode_rowkey(key) == (field, flag, fp)
    assert key.startswith(codec.encode_prefix(field, flag))


def test_spec_worked_example_5x10_flag1() -> None:
    """docs/SPEC.md: scheme 5x10, flag 1 = (A,B): field = ((A << 13) | B) << 6."""
    a, b = 0x1ABC, 0x0123
    fp = (a << 51) | (b << 38) | 0x2AAAAAAAAA
    field = SCHEMES["5x10"].fields(fp)[0]
    assert field == ((a << 13) | b) << 6
    key = codec.encode_rowkey(field, 1, fp)
    assert key[:4] == (((a << 13) | b) << 6).to_bytes(4, "big")
    assert key[4] == 1
    assert key[5:] == fp.to_bytes(8, "big")


def test_spec_worked_example_bucket_layout() -> None:
    """docs/SPEC.md: `0123456789abcdef` of `d1`, flag 1 of 5x10, in the bucket layout."""
    fp = 0x0123456789ABCDEF
    key = codec.encode_rowkey(SCHEMES["5x10"].fields(fp)[0], 1, fp)
    row, qualifier = codec.bucket_cell(key, "d1")
    assert (row.hex(), qualifier.hex()) == ("0123454001", "0123456789abcdef" + "6431")
    assert codec.cell_of_bucket(row, qualifier) == (key, "d1")


@given(fingerprints, st.integers(0, (1 << 32) - 1), st.integers(1, 255), st.text(min_size=1))
def test_bucket_cells_roundtrip(fp: int, field: int, flag: int, doc_id: str) -> None:
    key = codec.encode_rowkey(field, flag, fp)
    try:
        row, qualifier = codec.bucket_cell(key, doc_id)
    except InvalidInput:  # an id docs/SPEC.md does not allow (lone surrogates, too long)
        return
    assert row == codec.encode_prefix(field, flag)
    assert qualifier == fp.to_bytes(8, "big") + doc_id.encode("utf-8")
    assert codec.cell_of_bucket(row, qualifier) == (key, doc_id)


@given(fingerprints, st.integers(0, (1 << 32) - 1), st.integers(1, 255))
def test_rowkey_roundtrip(fp: int, field: int, flag: int) -> None:
    assert codec.decode_rowkey(codec.encode_rowkey(field, flag, fp)) == (field, flag, fp)


@given(st.lists(fingerprints, min_size=1, max_size=50), st.sampled_from(sorted(SCHEMES)))
def test_vectorised_rowkeys_match_scalar(fps: list[int], name: str) -> None:
    scheme = SCHEMES[name]
    arr = np.array(fps, dtype=np.uint64)
    keys = codec.encode_rowkeys_many(arr, scheme.fields_many(arr))
    expected = [
        codec.encode_rowkey(field, flag, fp)
        for fp in fps
        for flag, field in enumerate(scheme.fields(fp), 1)
    ]
    assert keys == expected


@given(fingerprints)
def test_hex_roundtrip(fp: int) -> None:
    assert parse_fingerprint_hex(fingerprint_to_hex(fp)) == fp


@pytest.mark.parametrize("bad", ["", "0x", "xyz", "1" * 17, "-1", "12 34"])
def test_bad_hex_is_a_clear_error(bad: str) -> None:
    with pytest.raises(InvalidInput, match="hex fingerprint"):
        parse_fingerprint_hex(bad)


@pytest.mark.parametrize(
    ("prefix", "stop"),
    [(b"\x00\x01", b"\x00\x02"), (b"\x01\xff", b"\x02"), (b"ab\xff\xff", b"ac")],
)
def test_prefix_stop(prefix: bytes, stop: bytes) -> None:
    assert codec.prefix_stop(prefix) == stop


@given(
    st.text(min_size=1, max_size=50).filter(lambda s: len(s.encode()) <= 1024),
    fingerprints,
    st.none() | st.text(max_size=100),
    st.none() | st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)),
)
def test_document_columns_roundtrip(
    doc_id: str, fp: int, text: str | None, meta: dict | None
) -> None:
    doc = Document(doc_id, fp, text, meta)
    assert codec.doc_from_columns(doc_id, codec.doc_to_columns(doc)) == doc


@pytest.mark.parametrize(
    ("doc_id", "message"),
    [("", "empty"), ("x" * 1025, "1025 bytes"), ("é" * 513, "1026 bytes"), (7, "not a string")],
)
def test_bad_doc_ids(doc_id: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        codec.encode_doc_id(doc_id)  # type: ignore[arg-type]
