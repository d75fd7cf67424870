"""One contract, every store: embedded and HBase must behave identically."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase.layout import codec
from simhash_hbase.records import MAX_TIME_MS, MIN_TIME_MS, Document
from simhash_hbase.store import Store, open_store

LONG_ID = "l" * 1024  # the longest id docs/SPEC.md allows, above LMDB's 511-byte key limit


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with open_store(store_url) as s:
        yield s


def _key(field: int, flag: int, fp: int) -> bytes:
    return codec.encode_rowkey(field, flag, fp)


def test_meta_roundtrip(store: Store) -> None:
    assert store.get_meta("manifest") is None
    store.put_meta("manifest", {"scheme": "5x10", "n": 1})
    store.put_meta("checkpoint/x", {"done": 3})
    assert store.get_meta("manifest") == {"scheme": "5x10", "n": 1}
    store.put_meta("manifest", {"scheme": "4x4"})
    assert store.get_meta("manifest") == {"scheme": "4x4"}
    store.delete_meta("checkpoint/x")
    store.delete_meta("never-there")
    assert store.get_meta("checkpoint/x") is None


def test_docs_put_get_delete(store: Store) -> None:
    docs = [
        Document("a", 1),
        Document("b", 2, "正文 text", {"url": "http://x/1", "n": 3}),
        Document(LONG_ID, 3),
        Document("é/路径.txt", (1 << 64) - 1),
    ]
    with store.batch() as batch:
        batch.put_docs(docs)
    got = store.get_docs(["a", "b", LONG_ID, "é/路径.txt", "missing"])
    assert got == {d.doc_id: d for d in docs}
    # A query's confirming read: the fingerprints alone, whatever else the rows hold.
    fps = store.doc_fingerprints(["a", "b", LONG_ID, "é/路径.txt", "missing"])
    assert fps == {d.doc_id: d.fingerprint for d in docs}
    assert sorted(d.doc_id for d in store.iter_docs()) == sorted(d.doc_id for d in docs)
    with store.batch() as batch:
        assert batch.get_docs(["a"]) == {"a": docs[0]}
        batch.delete_docs(["a", LONG_ID, "never-there"])
    assert set(store.get_docs(["a", "b", LONG_ID])) == {"b"}
    assert store.doc_fingerprints(["a", "b", LONG_ID]) == {"b": 2}


def test_docs_keep_sketches_with_and_without_evidence(store: Store) -> None:
    """A stored sketch is the 64-byte b-bit part, then (new indexes) its evidence:
    both sizes come back byte for byte (docs/SPEC.md, ``f:s``)."""
    bands = bytes(range(100))
    docs = [
        Document("old", 5, sketch=bytes(range(64)), bands=bands),
        Document("new", 6, "text", sketch=bytes(range(256)) * 4 + bytes(range(64)), bands=bands),
    ]
    with store.batch() as batch:
        batch.put_docs(docs)
    assert store.get_docs(["old", "new"]) == {d.doc_id: d for d in docs}


def test_prefix_scans_are_exact_and_keys_only(store: Store) -> None:
    cells = [
        (_key(0x12345600, 1, 10), "x"),
        (_key(0x12345600, 1, 11), "y"),
        (_key(0x12345600, 1, 11), "z"),  # two ids under one row: exact duplicates
        (_key(0x12345600, 2, 12), "other-flag"),
        (_key(0x12345700, 1, 13), "other-field"),
        (_key(0xFFFFFFC0, 10, (1 << 64) - 1), LONG_ID),
        (_key(0, 1, 0), "zero"),
    ]
    with store.batch() as batch:
        batch.put_index(cells)
    prefix = codec.encode_prefix(0x12345600, 1)
    assert sorted(store.scan_prefixes([prefix])) == sorted(cells[:3])
    assert store.scan_prefixes([codec.encode_prefix(0xFFFFFFC0, 10)]) == [cells[5]]
    assert store.scan_prefixes([codec.encode_prefix(0x99999900, 4)]) == []
    many = store.scan_prefixes_many(
        [[prefix, codec.encode_prefix(0, 1)], [], [codec.encode_prefix(0x12345700, 1)]]
    )
    assert [sorted(m) for m in many] == [sorted([*cells[:3], cells[6]]), [], [cells[4]]]
    assert sorted(store.iter_index()) == sorted(cells)


def test_index_deletes_remove_one_qualifier(store: Store) -> None:
    row = _key(0x00010000, 3, 42)
    with store.batch() as batch:
        batch.put_index([(row, "a"), (row, "b")])
    with store.batch() as batch:
        batch.delete_index([(row, "a"), (_key(5, 5, 5), "never-there")])
    assert store.scan_prefixes([row[:5]]) == [(row, "b")]


def test_puts_are_idempotent(store: Store) -> None:
    row = _key(0x00020000, 1, 7)
    for _ in range(2):
        with store.batch() as batch:
            batch.put_index([(row, "a")])
            batch.put_docs([Document("a", 7)])
    assert store.scan_prefixes([row[:5]]) == [(row, "a")]
    assert list(store.iter_docs()) == [Document("a", 7)]


def test_large_batches_flush_completely(store: Store) -> None:
    cells = [(_key(i << 8, 1, i), f"d{i}") for i in range(2500)]
    with store.batch() as batch:
        batch.put_index(cells)
        batch.put_docs(Document(f"d{i}", i) for i in range(2500))
    assert len(list(store.iter_index())) == 2500
    assert len(store.get_docs([f"d{i}" for i in range(0, 2500, 7)])) == len(range(0, 2500, 7))


def test_stats_count_documents_and_cells(store: Store) -> None:
    with store.batch() as batch:
        batch.put_index([(_key(1 << 8, 1, 1), "a"), (_key(2 << 8, 2, 1), "a")])
        batch.put_docs([Document("a", 1)])
    stats = store.stats()
    assert stats["documents"] == 1
    assert stats["index_cells"] == 2


def test_remove_then_re_add_in_one_batch_keeps_the_cell(store: Store) -> None:
    """HBase: a delete at T masks puts at <= T, so deletes and puts of one batch
    must get distinct timestamps (the store's clock gives T and T+1)."""
    row = _key(0x00030000, 4, 9)
    with store.batch() as batch:
        batch.put_index([(row, "a")])
    for _ in range(3):  # back-to-back batches, well within one millisecond apart
        with store.batch() as batch:
            batch.delete_index([(row, "a")])
            batch.put_index([(row, "a")])
        assert store.scan_prefixes([row[:5]]) == [(row, "a")]
        with store.batch() as batch:
            batch.delete_index([(row, "a")])
        assert store.scan_prefixes([row[:5]]) == []
        with store.batch() as batch:
            batch.put_index([(row, "a")])
        assert store.scan_prefixes([row[:5]]) == [(row, "a")]


def test_docs_and_meta_survive_a_quick_delete_then_put(store: Store) -> None:
    for n in range(3):
        with store.batch() as batch:
            batch.put_docs([Document("a", n, "t" if n % 2 else None)])
        with store.batch() as batch:
            batch.delete_docs(["a"])
        with store.batch() as batch:
            batch.put_docs([Document("a", n + 10)])
        assert store.get_docs(["a"]) == {"a": Document("a", n + 10)}
        store.delete_meta("m")
        store.put_meta("m", {"n": n})
        assert store.get_meta("m") == {"n": n}


def test_batched_scans_of_many_prefixes_are_exact(store: Store) -> None:
    """Thousands of prefixes in one call (chunked and run concurrently on HBase),
    duplicates across and within lists, and rows past one scan page."""
    cells = [(_key(i << 12, 1 + i % 10, i), f"d{i}") for i in range(3000)]
    crowded = codec.encode_prefix(0xABCDE000, 7)
    cells += [(crowded + (i).to_bytes(8, "big"), f"c{i}") for i in range(1500)]
    with store.batch() as batch:
        batch.put_index(cells)
    lists = [[c[0][:5], codec.encode_prefix(0xFFFF0000, 3)] for c in cells[:3000:2]]
    lists.append([crowded, crowded, cells[0][0][:5]])
    got = store.scan_prefixes_many(lists)
    expected = [[c for p in prefixes for c in cells if c[0][:5] == p] for prefixes in lists[:-1]]
    assert [sorted(g) for g in got[:-1]] == [sorted(e) for e in expected]
    assert sorted(got[-1]) == sorted(2 * cells[3000:] + [cells[0]])


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), min_size=1, max_size=40),
    st.integers(1, 6),
)
def test_a_row_cap_gives_each_row_its_smallest_ids(
    store: Store, placed: list[tuple[int, int]], cap: int
) -> None:
    """Hot rows: with ``row_cap`` each row key gives its ``cap`` smallest ids (id
    byte order), no other cell; :meth:`row_sizes` counts a row, or is None."""
    prefix = codec.encode_prefix(0x5151_5100, 3)
    rows = [prefix + codec.fingerprint_to_bytes(0xABC0 + r) for r in range(4)]
    cells = sorted({(rows[r], f"r{r}-{i:02d}") for r, i in placed})  # an id: one fingerprint
    with store.batch() as batch:  # what earlier examples left under this prefix goes first
        batch.delete_index(store.scan_prefixes([prefix]))
        batch.put_index(cells)
    (got,) = store.scan_prefixes_many([[prefix]], row_cap=cap)
    want = [c for row in rows for c in sorted(c for c in cells if c[0] == row)[:cap]]
    assert sorted(got) == want
    sizes = store.row_sizes(rows)
    if sizes is not None:
        assert sizes == {row: sum(c[0] == row for c in cells) for row in rows}


def test_a_row_cap_holds_past_a_thousand_copies_under_one_prefix(store: Store) -> None:
    """Mass copies: 1,500 ids of one fingerprint between others under one prefix
    (HBase's bucket layout reads a prefix's row 1,000 columns at a time and skips
    a fingerprint that has given ``row_cap`` ids): every other row still comes
    whole, the hot one gives its smallest ids, and without a cap every cell."""
    prefix = codec.encode_prefix(0x7070_7000, 6)
    hot = prefix + codec.fingerprint_to_bytes(0x5000)
    cells = [(hot, f"h{i:05d}") for i in range(1500)]
    cells += [(prefix + codec.fingerprint_to_bytes(fp), f"o{fp}") for fp in (1, 0x4FFF, 0x5001)]
    cells.append((prefix + codec.fingerprint_to_bytes((1 << 64) - 1), "last"))
    with store.batch() as batch:
        batch.put_index(cells)
    for cap in (1, 7, 1000, 1499):
        (got,) = store.scan_prefixes_many([[prefix]], row_cap=cap)
        assert sorted(got) == sorted(cells[:cap] + cells[1500:])
    assert sorted(store.scan_prefixes([prefix])) == sorted(cells)


def test_swap_meta_writes_only_over_the_value_expected(store: Store) -> None:
    first, second = {"by": "a", "at": 1}, {"by": "b", "at": 2}
    assert store.swap_meta([("lock/x", None, first), ("lock/y", None, second)]) == [True, True]
    assert store.swap_meta([("lock/x", None, second), ("lock/y", first, first)]) == [False, False]
    assert store.swap_meta([("lock/x", first, second)]) == [True]
    assert store.get_meta("lock/x") == second and store.get_meta("lock/y") == second


def test_claims_return_the_held_versions_and_removals_leave_no_document(store: Store) -> None:
    def cells_of(docs: object) -> list[tuple[bytes, str]]:
        return []

    old, new = Document("a", 1, "old"), Document("a", 2, "new")
    with store.batch() as batch:
        assert batch.claim_docs({"a": old, "b": None}, cells_of) == {}
        batch.put_docs([old])
    with store.batch() as batch:
        assert batch.claim_docs({"a": new}, cells_of) == {"a": old}
        batch.put_docs([new])
    assert store.doc_fingerprints(["a", "b"]) == {"a": 2}
    with store.batch() as batch:
        assert batch.claim_docs({"a": None}, cells_of) == {"a": new}
        batch.delete_docs(["a"])
    assert store.get_docs(["a", "b"]) == {}
    assert store.doc_fingerprints(["a", "b"]) == {}  # rows holding only a token
    assert list(store.iter_docs()) == []
    assert store.stats()["documents"] == 0


_TIMES = st.one_of(st.none(), st.integers(MIN_TIME_MS, MAX_TIME_MS))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(_TIMES, st.sampled_from(["bare", "text", "meta", "long"])),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_document_times_round_trip(
    store: Store, kinds: list[tuple[int | None, str]], same: bool
) -> None:
    """docs/SPEC.md ``f:t``: a time (any of the years 1 to 9999, before the epoch
    too) comes back as written, beside any other column, on a row packed alone
    or in a batch of fingerprint-and-time rows (the embedded store's one-pass
    packing); a row without one (written before times) has none; a replaced
    document keeps only its new version's time."""
    if same:  # every row of one kind: the embedded store packs them in one pass
        kinds = [(kinds[0][0], "bare")] * len(kinds)
    docs = [
        Document(
            (LONG_ID[:-4] if kind == "long" else "t") + f"{n:04d}",
            n,
            "正文" if kind == "text" else None,
            {"n": n} if kind == "meta" else None,
            time=time,
        )
        for n, (time, kind) in enumerate(kinds)
    ]
    with store.batch() as batch:
        batch.put_docs(docs)
    ids = [d.doc_id for d in docs]
    assert store.get_docs(ids) == {d.doc_id: d for d in docs}
    assert {d.doc_id: d for d in store.iter_docs() if d.doc_id in ids} == {
        d.doc_id: d for d in docs
    }
    replaced = [replace(d, time=None if d.time is not None else 7) for d in docs]
    with store.batch() as batch:
        batch.put_docs(replaced)
    assert store.get_docs(ids) == {d.doc_id: d for d in replaced}
    with store.batch() as batch:
        batch.delete_docs(ids)
