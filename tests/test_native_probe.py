"""The C path of one query's probes of the embedded store gives what the
pure-Python path gives: ``codec.encode_prefixes``, ``bucket_keys`` and
``bucket_nums`` (the reference) against ``_native``'s, on arbitrary
fingerprints, filters and buckets (cells of other leads, cut cells, marks of
spilled leads, a lead in both tiers, caps); and the store answers as the plain
scan on either path.
"""

from __future__ import annotations

import bisect
import ctypes
import sys
from pathlib import Path
from types import ModuleType

import lmdb
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.layout import codec
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, SCHEMES
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb import pages, tuning
from simhash_hbase.store.lmdb.cells import CELL_BYTES, SPILLED
from simhash_hbase.store.lmdb.filters import PrefixFilter, mark_prefixes
from simhash_hbase.store.lmdb.probes import (
    _DB_RECORD,
    _NO_ROOT,
    _WALKABLE,
    Probe,
    Trees,
    bucket_keys,
    bucket_nums,
)
from tests.test_native import compiled  # noqa: F401 (a fixture)

_FP = st.integers(0, (1 << 64) - 1)
_SETTINGS = settings(max_examples=400, deadline=None)


@_SETTINGS
@given(fp=_FP, scheme=st.sampled_from(sorted(SCHEMES)))
def test_prefixes_in_c_are_pythons(compiled: ModuleType, fp: int, scheme: str) -> None:  # noqa: F811
    terms = SCHEMES[scheme].prefix_terms
    if terms is None:
        pytest.skip(f"scheme {scheme} has no prefix terms")
    assert compiled.encode_prefixes(fp, terms) == codec.encode_prefixes(fp, terms)


@st.composite
def _query(draw: st.DrawFn) -> list[bytes]:
    """The 10 prefixes of a fingerprint, or arbitrary 5-byte prefixes (some of one bucket)."""
    if draw(st.booleans()):
        return codec.encode_prefixes(draw(_FP), SCHEMES[DEFAULT_SCHEME].prefix_terms or ())
    heads = draw(st.lists(st.binary(min_size=3, max_size=3), min_size=1, max_size=4))
    return [
        draw(st.sampled_from(heads))[:2] + draw(st.binary(min_size=2, max_size=2)) + head[2:]
        for head in draw(st.lists(st.sampled_from(heads), max_size=12))
    ]


_FILTER = st.none() | st.binary(min_size=1 << 4, max_size=1 << 6).map(
    lambda bits: PrefixFilter(64 - (len(bits) * 8).bit_length() + 1, bytearray(bits))
)


@_SETTINGS
@given(prefixes=_query(), main=_FILTER, fresh=_FILTER)
def test_bucket_keys_in_c_are_pythons(
    compiled: ModuleType,  # noqa: F811
    prefixes: list[bytes],
    main: PrefixFilter | None,
    fresh: PrefixFilter | None,
) -> None:
    assert compiled.bucket_keys(prefixes, main, fresh) == bucket_keys(prefixes, main, fresh)


@_SETTINGS
@given(
    chunk=st.lists(
        st.tuples(
            st.binary(min_size=3, max_size=3),
            st.binary(max_size=40).map(lambda b: b[: len(b) - len(b) % 6] if len(b) % 3 else b),
        ),
        max_size=20,
    ),
    size=st.integers(3, 10),
)
def test_mark_prefixes_in_c_is_pythons(
    compiled: ModuleType,  # noqa: F811
    chunk: list[tuple[bytes, bytes]],
    size: int,
) -> None:
    """Bits of whole cells (a cut last cell is skipped), and every cell's prefix
    then holds (a filter misses no cell)."""
    fast, slow = bytearray(1 << (size - 3)), bytearray(1 << (size - 3))
    compiled.mark_prefixes(fast, 64 - size, chunk)
    mark_prefixes(slow, 64 - size, chunk)
    assert fast == slow
    held = PrefixFilter(64 - size, fast)
    for key, packed in chunk:
        for pos in range(0, len(packed) - 5, CELL_BYTES):
            assert held.holds(key[1:3] + packed[pos : pos + 2] + key[0:1])


@st.composite
def _found(draw: st.DrawFn) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """Prefixes of distinct buckets, and (key, packed cells) for some of their
    buckets in one or two tiers: cells of the prefix's lead or of another, few
    numbers (a document in many buckets), the spilled mark, a cut last cell."""
    prefixes = list({p[4:5] + p[0:2]: p for p in draw(_query())}.values())
    nums = draw(st.lists(st.binary(min_size=4, max_size=4), min_size=1, max_size=4))
    nums.append(SPILLED)
    found = []
    for prefix in draw(st.lists(st.sampled_from(prefixes), max_size=12)) if prefixes else []:
        leads = [prefix[2:4], draw(st.binary(min_size=2, max_size=2))]
        cells = b"".join(
            draw(st.sampled_from(leads)) + draw(st.sampled_from(nums))
            for _ in range(draw(st.integers(0, 8)))
        )
        cells += draw(st.sampled_from([b"", prefix[2:4], prefix[2:5], prefix[2:4] + nums[0][:3]]))
        found.append((prefix[4:5] + prefix[0:2], cells))
    return prefixes, found


@_SETTINGS
@given(case=_found(), row_cap=st.none() | st.integers(1, 12))
def test_bucket_nums_in_c_are_pythons(
    compiled: ModuleType,  # noqa: F811
    case: tuple[list[bytes], list[tuple[bytes, bytes]]],
    row_cap: int | None,
) -> None:
    prefixes, found = case
    assert compiled.bucket_nums(prefixes, found, row_cap) == bucket_nums(prefixes, found, row_cap)


def test_bad_probes_are_refused_in_c(compiled: ModuleType) -> None:  # noqa: F811
    """Wrong shapes raise (never read past a buffer)."""
    with pytest.raises(ValueError, match="5 bytes"):
        compiled.bucket_keys([b"abcd"], None, None)
    with pytest.raises(ValueError, match="cover"):
        compiled.bucket_keys([b"abcde"], PrefixFilter(40, bytearray(1)), None)
    with pytest.raises(ValueError, match="cover"):
        compiled.mark_prefixes(bytearray(1), 40, [])
    with pytest.raises(TypeError):
        compiled.bucket_nums([b"abcde"], [(b"eab", 7)], None)
    with pytest.raises(KeyError):
        compiled.bucket_nums([b"abcde"], [(b"xyz", b"")], None)
    with pytest.raises(ValueError, match="row_cap"):
        compiled.bucket_nums([b"abcde"], [], 0)
    with pytest.raises(ValueError, match="40 bits"):
        compiled.encode_prefixes(1, [(0, 1 << 40, 0, 0, 1)])


@pytest.mark.parametrize("path", ["c", "python"])
def test_either_path_answers_as_the_scan(
    path: str,
    tmp_path: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """query_fingerprint on the C probes and on the Python ones gives what the
    plain scan gives (near copies in both tiers, a removed one, hot rows), with
    and without the tiers' filters (warm())."""
    if path == "python":
        monkeypatch.setenv("SHDB_NATIVE", "0")
    elif Probe.best().keys is bucket_keys:
        pytest.skip("the C extension is not built")
    monkeypatch.setattr(tuning, "HOT", 3)
    monkeypatch.setattr(tuning, "CHECK_BYTES", 1)
    q = 0x0123_4567_89AB_CDEF
    docs = [Document(f"c{i}", q) for i in range(5)]
    docs += [Document(f"n{b}", q ^ 1 << b ^ 1 << (b * 7 % 64)) for b in range(64)]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:  # type: ignore[operator]
        index.add_documents(docs[::2])
        monkeypatch.setattr(tuning, "FRESH_MIN_CELLS", 1)
        index.add_documents(docs[1::2])
        index.remove("n3")
        probe = index._store._compact.probe  # type: ignore[attr-defined]
        assert (probe.keys is bucket_keys) == (path == "python")
        for x, warm in ((q, False), (q ^ 1 << 40, True), (q ^ 7, True), (q, True)):
            if warm:
                index.warm()
            for k in range(4):
                for limit in (None, 1, 3, 10):
                    got = index.query_fingerprint(x, k, limit=limit)
                    (want,) = index.query_probed([[x]], k, limit=limit)
                    assert (got, got.total, got.total_exact) == (want, want.total, want.total_exact)


# -- the C probe's prefetching walk of LMDB's trees (Trees) ----------------
def _leaf_keys(trees: Trees, page: int) -> list[bytes]:
    """The keys of a leaf page, read by LMDB 0.9's page layout (mdb.c)."""
    raw = ctypes.string_at(trees.base + page * trees.psize, trees.psize)

    def u16(at: int) -> int:
        return int.from_bytes(raw[at : at + 2], sys.byteorder)

    assert u16(10) & 0x02, f"page {page} is not a leaf"
    nodes = [u16(16 + 2 * i) for i in range((u16(12) - 16) // 2)]
    return [raw[off + 8 : off + 8 + u16(off + 6)] for off in nodes]


def _trees_of(env: lmdb.Environment, txn: lmdb.Transaction, name: bytes) -> Trees:
    base = pages.mapped_at(Path(env.path()) / pages.DATA_FILE)
    if base is None or not _WALKABLE:
        pytest.skip("no walkable map of the file here (Linux, LMDB 0.9, 64-bit)")
    (root,) = _DB_RECORD.unpack(txn.get(name))[-1:]
    psize, none = env.stat()["psize"], _NO_ROOT
    return Trees(base, env.info()["last_pgno"] + 1, psize, root, none, none)


@settings(max_examples=25, deadline=None)
@given(
    count=st.sampled_from([1, 300, 5_000, 40_000]) | st.integers(1, 40_000),
    widths=st.tuples(st.integers(1, 12), st.integers(0, 12)) | st.just((150, 300)),
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8),
    seed=st.integers(0, 2**32 - 1),
    probes=st.lists(st.binary(max_size=12), max_size=40),
)
def test_the_walk_reaches_the_leaf_lmdb_searches(
    compiled: ModuleType,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    count: int,
    widths: tuple[int, int],
    sizes: list[int],
    seed: int,
    probes: list[bytes],
) -> None:
    """Each key's walk ends at the leaf holding the greatest key <= it (the
    first key where none is): LMDB's own search's leaf, in trees of depth 1 to
    5, keys of 1-450 bytes, values on overflow pages too."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(widths[0], widths[0] + widths[1] + 1, count)
    keys = list({rng.bytes(int(n)) for n in lengths})
    folder = tmp_path_factory.mktemp("walk")
    with lmdb.open(str(folder), map_size=1 << 32, max_dbs=2) as env:
        db = env.open_db(b"t")
        with env.begin(write=True) as txn:
            for i, key in enumerate(keys):
                txn.put(key, bytes(sizes[i % len(sizes)] if i % 7 == 0 else 20), db=db)
        ordered = sorted(keys)
        asked = probes + keys[:24]  # at most 64 (the C probe's limit)
        event(f"depth {env.stat()['depth'] and env.begin().stat(db)['depth']}")
        with env.begin() as txn:
            trees = _trees_of(env, txn, b"t")
            leaves = compiled.lmdb_leaves(trees, 0, asked)
            for key, leaf in zip(asked, leaves):
                assert leaf is not None
                below = bisect.bisect_right(ordered, key) - 1
                assert ordered[max(below, 0)] in _leaf_keys(trees, leaf)


@settings(max_examples=25, deadline=None)
@given(roots=st.lists(st.integers(0, 1 << 70), min_size=1, max_size=20), data=st.data())
def test_a_walk_from_any_page_stays_in_the_file(
    compiled: ModuleType,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    roots: list[int],
    data: st.DataObject,
) -> None:
    """A walk from a page that is no root (a leaf, an overflow page, a meta or
    free page, past the file's end: a walk never trusts what it reads) ends
    without a crash, at None or at a page of the file."""
    folder = tmp_path_factory.mktemp("any")
    with lmdb.open(str(folder), map_size=1 << 30, max_dbs=2) as env:
        db = env.open_db(b"t")
        with env.begin(write=True) as txn:
            for i in range(2000):
                txn.put(i.to_bytes(4, "big"), bytes(i % 700), db=db)
        with env.begin() as txn:
            trees = _trees_of(env, txn, b"t")
            keys = data.draw(st.lists(st.binary(max_size=8), max_size=10))
            for root in roots:
                walk = trees._replace(index_root=min(root, (1 << 64) - 1) % (trees.pages + 3))
                for leaf in compiled.lmdb_leaves(walk, 0, keys):
                    assert leaf is None or leaf < trees.pages


_NEAR = 0x0123_4567_89AB_CDEF  # the store below holds near copies of it in both tiers


@settings(max_examples=60, deadline=None)
@given(prefixes=_query() | _FP.map(lambda x: _prefixes(_NEAR ^ x & 0x8421)), data=st.data())
def test_bucket_keys_with_the_stores_trees_are_pythons(
    compiled: ModuleType,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    prefixes: list[bytes],
    data: st.DataObject,
) -> None:
    """The store's own Trees: the prefetching probes give what the references
    give (queries finding several documents too), and each walk, of a bucket
    in either tier or of a number in ``names``, reaches the leaf holding it."""
    folder = tmp_path_factory.mktemp("store") / "ix"
    rng = np.random.default_rng(data.draw(st.integers(0, 3)))
    near = [Document(f"n{b}", _NEAR ^ 1 << b) for b in range(0, 64, 3)]
    with SimhashIndex.open(str(folder)) as index:  # type: ignore[operator]
        loaded = [Document(f"b{i}", int(fp)) for i, fp in enumerate(_fps(rng, 3000))]
        index.bulk_load(loaded + near[::2])
        added = [Document(f"a{i}", int(fp)) for i, fp in enumerate(_fps(rng, 300))]
        index.add_documents(added + near[1::2])
        tables = index._store._compact  # type: ignore[attr-defined]
        with tables.env.begin() as txn:
            main, fresh, trees = tables.query_probe(txn)
            if trees is None:
                pytest.skip("no walkable map of the file here (Linux, LMDB 0.9, 64-bit)")
            want = bucket_keys(prefixes, main, fresh)
            assert compiled.bucket_keys(prefixes, main, fresh, trees) == want
            if want is not None:
                got = txn.cursor(tables.index).getmulti(want[0])
                got += txn.cursor(tables.fresh).getmulti(want[1])
                nums = bucket_nums(prefixes, got, None)
                assert compiled.bucket_nums(prefixes, got, None, trees) == nums
                event(f"numbers found: {min(len(nums[0]), 2) if nums else None}")
            for tier, db in enumerate((tables.index, tables.fresh, tables.names)):
                held = [key for key, _ in txn.cursor(db)]
                asked = data.draw(st.lists(st.sampled_from(held), max_size=20))
                for key, leaf in zip(asked, compiled.lmdb_leaves(trees, tier, asked)):
                    assert key in _leaf_keys(trees, leaf)


def _prefixes(fp: int) -> list[bytes]:
    return codec.encode_prefixes(fp, SCHEMES[DEFAULT_SCHEME].prefix_terms or ())


def _fps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2)


def test_bad_trees_are_refused_in_c(compiled: ModuleType) -> None:  # noqa: F811
    with pytest.raises(TypeError, match="trees"):
        compiled.bucket_keys([b"abcde"], None, None, (1, 2))
    with pytest.raises(ValueError, match="page size"):
        compiled.bucket_keys([b"abcde"], None, None, Trees(1 << 20, 1, 1000, 0, 0, 0))
    with pytest.raises(ValueError, match="no map"):
        compiled.lmdb_leaves(Trees(0, 1, 4096, 0, 0, 0), 0, [b"a"])
    with pytest.raises(ValueError, match="table"):
        compiled.lmdb_leaves(Trees(1 << 20, 1, 4096, 0, 0, 0), 3, [b"a"])
    with pytest.raises(TypeError, match="trees"):
        compiled.bucket_nums([b"abcde"], [], None, (1, 2, 3, 4, 5))
