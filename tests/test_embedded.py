"""The embedded store's fast paths give the same bytes and answers as the plain ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import StoreError
from simhash_hbase.jobs.ingest import index_fingerprints
from simhash_hbase.layout import codec
from simhash_hbase.layout.scheme import SCHEMES
from simhash_hbase.records import MAX_TIME_MS, MIN_TIME_MS, Document
from simhash_hbase.store.lmdb.cells import _HEAD, bare_rows
from simhash_hbase.store.lmdb.columns import (
    fold_key,
    pack_columns,
    pack_fingerprint_columns,
    sorted_keys,
    unpack_columns,
)
from simhash_hbase.store.lmdb.store import EmbeddedStore

ROWS = st.binary(min_size=13, max_size=13)
FPS = st.integers(min_value=0, max_value=2**64 - 1)


@given(st.lists(st.tuples(st.sampled_from([b"\x00" * 13, b"\xff" * 13]) | ROWS, st.binary())))
def test_sorted_keys_is_bytewise_order(cells: list[tuple[bytes, bytes]]) -> None:
    rows = np.frombuffer(b"".join(r for r, _ in cells), dtype=codec.ROWKEY_DTYPE)
    tails = [t for _, t in cells]
    assert sorted_keys(rows.reshape(-1, 1), tails) == sorted(r + t for r, t in cells)


@given(st.lists(st.tuples(st.lists(ROWS, min_size=3, max_size=3), st.binary(max_size=4))))
def test_sorted_keys_of_a_block_is_bytewise_order(docs: list[tuple[list[bytes], bytes]]) -> None:
    """Several row keys per tail (a document's cells), tails of mixed lengths."""
    joined = b"".join(r for rows, _ in docs for r in rows)
    rows = np.frombuffer(joined, dtype=codec.ROWKEY_DTYPE).reshape(-1, 3)
    tails = [t for _, t in docs]
    assert sorted_keys(rows, tails) == sorted(r + t for rs, t in docs for r in rs)


@given(FPS)
def test_one_query_prefixes_equal_the_scalar_encoding(fp: int) -> None:
    for scheme in SCHEMES.values():
        expected = [codec.encode_prefix(f, flag) for flag, f in enumerate(scheme.fields(fp), 1)]
        if scheme.combo_size <= 2:  # triples (6x20) take the NumPy path below only
            assert scheme.prefix_terms is not None
            assert codec.encode_prefixes(fp, scheme.prefix_terms) == expected
        fields = scheme.fields_many(np.array([fp], dtype=np.uint64))
        assert codec.encode_prefixes_many(fields) == [expected]


@given(st.dictionaries(st.binary(min_size=1, max_size=20), st.binary(max_size=300)))
def test_column_packing_roundtrip(cols: dict[bytes, bytes]) -> None:
    assert unpack_columns(pack_columns(cols)) == cols


def test_packed_docs_value_bytes_are_the_spec_layout() -> None:
    """docs/SPEC.md: per column u8 name length, u32 big-endian value length, name, value."""
    cols = {b"f:h": bytes.fromhex("0123456789abcdef"), b"f:text": "hé".encode(), b"_id": b"ab"}
    assert pack_columns(cols) == bytes.fromhex(
        "03 00000008 663a68 0123456789abcdef"
        " 06 00000003 663a74657874 68c3a9"
        " 03 00000002 5f6964 6162"
    )


def test_truncated_columns_are_detected() -> None:
    raw = pack_columns({b"f:h": b"12345678"})
    with pytest.raises(StoreError, match="truncated"):
        unpack_columns(raw[:-1])


def test_fold_key_keeps_short_keys_and_bounds_long_ones() -> None:
    assert fold_key(b"abc", 511) == (b"abc", False)
    long_a, long_b = b"a" * 600, b"a" * 599 + b"b"
    folded_a, was_folded = fold_key(long_a, 511)
    assert was_folded and len(folded_a) <= 511
    assert fold_key(long_b, 511)[0] != folded_a


def test_folded_key_bytes_are_the_spec_layout() -> None:
    """docs/SPEC.md: the first limit - 33 bytes, a 00 byte, the SHA-256 of the whole key."""
    key = bytes(13) + b"x" * 600
    folded, was_folded = fold_key(key, 511)
    assert was_folded
    assert folded == key[:478] + b"\x00" + bytes.fromhex(
        "ea95f056e830df61c9cf27ac60f3369568725bcbd36a8c933612053cfa2439a9"
    )


@given(st.lists(FPS, max_size=20))
def test_fingerprint_rows_pack_like_pack_columns(fps: list[int]) -> None:
    expected = [pack_columns(codec.doc_to_columns(Document("x", fp))) for fp in fps]
    assert pack_fingerprint_columns(fps) == expected


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), FPS), max_size=40), st.integers(1, 7))
def test_batches_in_any_order_hold_the_last_version(
    tmp_path_factory: object, items: list[tuple[str, int]], batch: int
) -> None:
    """Sorted and appended writes, replacements across batches: cells == docs, always."""
    path = tmp_path_factory.mktemp("ix")  # type: ignore[attr-defined]
    with SimhashIndex.open(str(path)) as index:
        for start in range(0, len(items), batch):
            index.add_documents([Document(i, fp) for i, fp in items[start : start + batch]])
        want = dict(items)
        held = {d.doc_id: d.fingerprint for d in index.documents()}
        assert held == want
        assert sorted(index.index_cells()) == sorted(
            index.cells([Document(i, fp) for i, fp in want.items()])
        )


def test_long_ids_are_folded_and_ordered(tmp_path: Path) -> None:
    """Ids above LMDB's key limit mixed with short ones in one sorted batch."""
    ids = ["s", "l" * 1024, "l" * 1023 + "m", "é" * 300, "t"]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents(
            [Document(i, n * 0x9E3779B97F4A7C15 % 2**64) for n, i in enumerate(ids)]
        )
        assert {d.doc_id for d in index.documents()} == set(ids)
        assert {i for _, i in index.index_cells()} == set(ids)
        for n, i in enumerate(ids):
            fp = n * 0x9E3779B97F4A7C15 % 2**64
            assert [m.doc_id for m in index.query_fingerprint(fp, 0)] == [i]


def test_store_reopens_read_only_and_reads_the_same(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index_fingerprints(index, ((f"d{n}", n * 7919) for n in range(500)))
    with EmbeddedStore(tmp_path / "ix", readonly=True) as store:
        assert sum(1 for _ in store.iter_docs()) == 500
        assert store.stats()["index_cells"] == 5000


@given(
    st.lists(st.integers(0, (1 << 32) - 2), min_size=1, max_size=20),
    st.one_of(st.none(), st.integers(MIN_TIME_MS, MAX_TIME_MS)),
)
def test_bare_docs_rows_are_packed_as_one_by_one(nums: list[int], time: int | None) -> None:
    """A batch of fingerprint(-and-time) docs rows, packed in one NumPy pass, holds
    the bytes docs/SPEC.md gives a row (number, fingerprint, then ``f:t`` packed as
    any column); rows of other columns, or times on some only, are left to the
    one-by-one path."""
    docs = [Document(f"d{n}", n * 7919, time=time) for n in nums]
    want = [
        _HEAD.pack(n, d.fingerprint)
        + pack_columns({k: v for k, v in codec.doc_to_columns(d).items() if k != b"f:h"})
        for n, d in zip(nums, docs)
    ]
    assert bare_rows(nums, docs) == want
    assert bare_rows(nums, [*docs[:-1], Document("x", 1, "text", time=time)]) is None
    if len(docs) > 1:
        mixed = [*docs[:-1], Document("x", 1, time=None if time is not None else 5)]
        assert bare_rows(nums, mixed) is None
