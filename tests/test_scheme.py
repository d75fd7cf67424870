"""Pigeonhole schemes per docs/SPEC.md, and the exactness of queries."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import InvalidInput, InvalidQuery
from simhash_hbase.layout.scheme import SCHEMES, get_scheme
from simhash_hbase.records import Document


def test_5x10_flags_are_lexicographic_pairs() -> None:
    scheme = SCHEMES["5x10"]
    letters = "ABCDE"
    named = ["".join(letters[i] for i in combo) for combo in scheme.combos]
    assert named == ["AB", "AC", "AD", "AE", "BC", "BD", "BE", "CD", "CE", "DE"]
    assert scheme.widths == (13, 13, 13, 13, 12)
    assert scheme.k == 3 and scheme.rows_per_fingerprint == 10


def test_4x4_flags_are_single_segments() -> None:
    scheme = SCHEMES["4x4"]
    assert scheme.combos == ((0,), (1,), (2,), (3,))
    assert scheme.k == 3 and scheme.rows_per_fingerprint == 4


@pytest.mark.parametrize(
    ("name", "fp", "fields"),
    [
        ("4x4", 0x1111_2222_3333_4444, [0x11110000, 0x22220000, 0x33330000, 0x44440000]),
        ("5x10", 0, [0] * 10),
        # all ones: 26-bit pairs shift by 6, pairs with E (25 bits) by 7
        (
            "5x10",
            (1 << 64) - 1,
            [0xFFFFFFC0] * 3
            + [0xFFFFFF80]
            + [0xFFFFFFC0] * 2
            + [0xFFFFFF80, 0xFFFFFFC0, 0xFFFFFF80, 0xFFFFFF80],
        ),
    ],
)
def test_fields_table(name: str, fp: int, fields: list[int]) -> None:
    assert SCHEMES[name].fields(fp) == fields


@given(st.integers(0, (1 << 64) - 1), st.sampled_from(sorted(SCHEMES)))
def test_segments_reassemble_the_fingerprint(fp: int, name: str) -> None:
    scheme = SCHEMES[name]
    value = 0
    for seg, width in zip(scheme.segments(fp), scheme.widths):
        value = (value << width) | seg
    assert value == fp


@given(st.integers(0, (1 << 64) - 1))
def test_first_key_byte_spans_the_whole_range(fp: int) -> None:
    """Left alignment: the first byte of a field is the top 8 bits of its first segment."""
    scheme = SCHEMES["5x10"]
    segs = scheme.segments(fp)
    for combo, field in zip(scheme.combos, scheme.fields(fp)):
        assert field >> 24 == segs[combo[0]] >> (scheme.widths[combo[0]] - 8)


def test_unknown_scheme_and_k_range() -> None:
    with pytest.raises(InvalidInput, match="unknown scheme"):
        get_scheme("3x3")
    with pytest.raises(InvalidQuery, match="k=4 is out of range"):
        SCHEMES["5x10"].check_k(4)
    with pytest.raises(InvalidQuery):
        SCHEMES["4x4"].check_k(-1)


def _flip(fp: int, rng: random.Random, bits: int) -> int:
    for pos in rng.sample(range(64), bits):
        fp ^= 1 << pos
    return fp


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_index_is_exact_against_brute_force(store_url: str, scheme: str) -> None:
    """Planted neighbours at distances 0..k+2: the index returns exactly brute force."""
    rng = random.Random(20261122)
    k_max = SCHEMES[scheme].k
    fps: dict[str, int] = {}
    queries = [rng.getrandbits(64) for _ in range(25)]
    for qi, q in enumerate(queries):
        for dist in range(k_max + 3):
            for rep in range(2):
                fps[f"q{qi}-d{dist}-{rep}"] = _flip(q, rng, dist)
    for i in range(300):
        fps[f"noise{i}"] = rng.getrandbits(64)
    ids = list(fps)
    arr = np.array([fps[i] for i in ids], dtype=np.uint64)
    with SimhashIndex.open(store_url, scheme=scheme) as index:
        for doc_id, fp in fps.items():
            index.add_fingerprint(doc_id, fp)
        for q in queries:
            dists = np.bitwise_count(arr ^ np.uint64(q))
            for k in range(k_max + 1):
                expected = sorted((int(d), ids[i]) for i, d in enumerate(dists) if d <= k)
                got = [(m.distance, m.doc_id) for m in index.query_fingerprint(q, k)]
                assert got == expected, (scheme, k)
        batch = index.query_fingerprints(queries, k_max)
        assert batch == [index.query_fingerprint(q, k_max) for q in queries]


def _mask(bits: set[int]) -> int:
    return sum(1 << b for b in bits)


NEAR = st.tuples(st.integers(0, 7), st.sets(st.integers(0, 63), max_size=5))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=8),
    st.lists(NEAR, max_size=40),
    st.lists(NEAR, min_size=5, max_size=30),
    st.integers(0, 3),
    st.sampled_from(sorted(SCHEMES)),
)
def test_batch_queries_equal_single_queries_and_brute_force(
    bases: list[int],
    docs: list[tuple[int, set[int]]],
    queries: list[tuple[int, set[int]]],
    k: int,
    scheme: str,
) -> None:
    """The batched path (distinct prefixes in key order, NumPy confirm) against one
    query at a time and brute force: near copies, one fingerprint under several
    ids, queries that repeat or share prefixes."""
    fps = {f"b{i}": fp for i, fp in enumerate(bases)}
    fps.update({f"b{i}-again": fp for i, fp in enumerate(bases)})
    fps.update({f"n{j}": bases[i % len(bases)] ^ _mask(bits) for j, (i, bits) in enumerate(docs)})
    qs = [bases[i % len(bases)] ^ _mask(bits) for i, bits in queries]
    ids = list(fps)
    arr = np.array([fps[i] for i in ids], dtype=np.uint64)
    with (
        tempfile.TemporaryDirectory() as tmp,
        SimhashIndex.open(f"{tmp}/ix", scheme=scheme) as index,
    ):
        index.add_documents([Document(i, fp) for i, fp in fps.items()])
        batch = index.query_fingerprints(qs, k, limit=None)
        assert batch == [index.query_fingerprint(q, k, limit=None) for q in qs]
    for q, got in zip(qs, batch):
        dists = np.bitwise_count(arr ^ np.uint64(q))
        want = sorted((int(d), ids[i]) for i, d in enumerate(dists) if d <= k)
        assert [(m.distance, m.doc_id) for m in got] == want


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_query_with_many_candidates_is_exact(tmp_path: Path, scheme: str) -> None:
    """Hundreds of cells under one query's prefixes (its confirm runs in NumPy)."""
    rng = random.Random(13)
    q = rng.getrandbits(64)
    top = q >> 38 << 38  # q's first 26 bits: 4x4's first field, 5x10's AB
    fps = {f"s{i}": top | rng.getrandbits(38) for i in range(300)}
    fps.update({f"near{d}-{i}": _flip(q, rng, d) for d in range(5) for i in range(3)})
    ids = list(fps)
    arr = np.array([fps[i] for i in ids], dtype=np.uint64)
    with SimhashIndex.open(str(tmp_path / "ix"), scheme=scheme) as index:
        index.add_documents([Document(i, fp) for i, fp in fps.items()])
        (cells,) = index.candidates([q])
        assert len(cells) > 100
        dists = np.bitwise_count(arr ^ np.uint64(q))
        for k in range(4):
            want = sorted((int(d), ids[i]) for i, d in enumerate(dists) if d <= k)
            got = index.query_fingerprint(q, k, limit=None)
            assert [(m.distance, m.doc_id) for m in got] == want
