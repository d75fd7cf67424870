"""The embedded store's fast paths give the same bytes and answers as the plain ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex, codec
from simhash_hbase.ingest import index_fingerprints
from simhash_hbase.records import Document
from simhash_hbase.scheme import SCHEMES
from simhash_hbase.store.embedded import EmbeddedStore

ROWS = st.binary(min_size=13, max_size=13)
FPS = st.integers(min_value=0, max_value=2**64 - 1)


@given(st.lists(st.tuples(st.sampled_from([b"\x00" * 13, b"\xff" * 13]) | ROWS, st.binary())))
def test_sorted_keys_is_bytewise_order(cells: list[tuple[bytes, bytes]]) -> None:
    rows, tails = [r for r, _ in cells], [t for _, t in cells]
    assert codec.sorted_keys(rows, tails) == sorted(r + t for r, t in cells)


@given(FPS)
def test_one_query_prefixes_equal_the_scalar_encoding(fp: int) -> None:
    for scheme in SCHEMES.values():
        assert scheme.prefix_terms is not None
        expected = [codec.encode_prefix(f, flag) for flag, f in enumerate(scheme.fields(fp), 1)]
        assert codec.encode_prefixes(fp, scheme.prefix_terms) == expected
        fields = scheme.fields_many(np.array([fp], dtype=np.uint64))
        assert codec.encode_prefixes_many(fields) == [expected]


@given(st.lists(FPS, max_size=20))
def test_fingerprint_rows_pack_like_pack_columns(fps: list[int]) -> None:
    expected = [codec.pack_columns(codec.doc_to_columns(Document("x", fp))) for fp in fps]
    assert codec.pack_fingerprint_columns(fps) == expected


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
