"""Mass copies and hot rows (issue 21): bounded results, nearest first, counted.

A fingerprint held by many documents is one wide index row per combination; a
bounded query reads each row only to its limit and still counts what it holds
(exactly where the store can count, else as a lower bound, and says which).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints
from simhash_hbase.jobs.prepared import record_chunks
from simhash_hbase.records import DEFAULT_LIMIT, Lookup, Record
from simhash_hbase.store.lmdb import tuning

BASE = 0x5A5A_1234_9876_F00D


def _flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


_held = st.lists(  # (bits flipped off BASE, copies)
    st.tuples(st.lists(st.integers(0, 63), max_size=5, unique=True), st.integers(1, 40)),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_held, st.integers(1, 15), st.integers(0, 3))
def test_a_bounded_query_is_the_nearest_of_all_and_counts_them(
    store_url: str, held: list[tuple[list[int], int]], limit: int, k: int
) -> None:
    items = []
    for g, (bits, copies) in enumerate(held):
        fp = _flip(BASE, bits)
        items += [(f"g{g}-{c:03d}", fp) for c in range(copies)]
    with SimhashIndex.open(store_url) as index:
        for doc in list(index.documents()):  # what earlier examples left
            index.remove(doc.doc_id)
        index_fingerprints(index, items, IngestOptions(find_k=None))
        for query in (BASE, _flip(BASE, [7])):
            everyone = sorted(
                ((fp ^ query).bit_count(), doc_id)
                for doc_id, fp in items
                if (fp ^ query).bit_count() <= k
            )
            got = index.query_fingerprint(query, k, limit=limit)
            assert [(m.distance, m.doc_id) for m in got] == everyone[:limit]
            assert got.total <= len(everyone)
            assert got.total == len(everyone) or not got.total_exact
            if store_url.startswith("/") or "://" not in store_url:  # embedded counts rows
                assert got.total_exact
            (many,) = index.query_fingerprints([query] * 6, k, limit=limit)[:1]
            assert list(many) == list(got) and many.total == got.total


@pytest.mark.parametrize("hot", [False, True])
def test_ingest_of_mass_copies_reports_each_document_once_bounded(
    store_url: str, hot: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical and one-bit-off copies, across batches: one line per copy, the
    limit nearest earlier ones, and the count of all earlier ones. ``hot``: the
    embedded store spills a lead of 8 cells to its hot rows (a batch's lookups then
    meet marked buckets in the wide scan)."""
    if hot:
        monkeypatch.setattr(tuning, "HOT", 8)
        monkeypatch.setattr(tuning, "CHECK_BYTES", 6)
    copies = [
        (f"c{(i * 7919) % 1000:04d}-{i}", BASE if i % 3 else BASE ^ 1 << 9) for i in range(260)
    ]
    found: list[Lookup] = []
    with SimhashIndex.open(store_url) as index:
        summary = index_fingerprints(
            index, copies, IngestOptions(find_k=3, batch_size=64), on_duplicate=found.append
        )
    assert summary.duplicates == len(found) == len(copies) - 1
    for n, lookup in enumerate(found, start=1):
        assert lookup.doc_id == copies[n][0]
        assert len(lookup.matches) == min(n, DEFAULT_LIMIT)
        assert lookup.matches.total <= n and (
            lookup.matches.total == n or not lookup.matches.total_exact
        )
        mine = copies[n][1]
        want = sorted(((fp ^ mine).bit_count(), i) for i, fp in copies[:n])[:DEFAULT_LIMIT]
        assert [(m.distance, m.doc_id) for m in lookup.matches] == want
    queries = [BASE ^ 1 << bit for bit in range(30)]  # 300 prefixes: one wide scan
    with SimhashIndex.open(store_url) as index:
        for query, got in zip(queries, index.query_fingerprints(queries, 3)):
            near = sorted(((fp ^ query).bit_count(), i) for i, fp in copies)
            want = [(d, i) for d, i in near if d <= 3]
            assert [(m.distance, m.doc_id) for m in got] == want[:DEFAULT_LIMIT]
            assert got.total == len(want) or not got.total_exact


def test_a_cut_count_is_exact_on_the_embedded_store(tmp_path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index_fingerprints(
            index, ((f"d{i:05d}", BASE) for i in range(3000)), IngestOptions(find_k=None)
        )
        got = index.query_fingerprint(BASE, 3)
        assert len(got) == DEFAULT_LIMIT and got.total == 3000 and got.total_exact
        assert index.cost.candidates <= index.scheme.rows_per_fingerprint * DEFAULT_LIMIT
        assert np.all([m.doc_id for m in got] == [f"d{i:05d}" for i in range(DEFAULT_LIMIT)])


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 8), st.integers(1, 120))
def test_batches_end_at_a_count_or_a_byte_budget(sizes: list[int], count: int, budget: int) -> None:
    """A batch's memory is bounded by bytes as well as by count, and no record is lost."""
    records = [Record(f"r{i}", "x", None, "", size) for i, size in enumerate(sizes)]
    chunks = list(record_chunks(records, count, budget))
    assert [r for c in chunks for r in c] == records
    for chunk in chunks:
        assert len(chunk) <= count
        assert sum(r.size for r in chunk[:-1]) < budget  # only the last record crosses it


def test_a_record_limit_the_machine_cannot_honour_is_refused(tmp_path) -> None:
    from .test_cli import shdb

    path = tmp_path / "a.txt"
    path.write_text("正文", encoding="utf-8")
    result = shdb("ingest", str(path), "-i", str(tmp_path / "ix"), "--max-bytes", str(2**30))
    assert result.exit_code == 2
    assert "1..268435456 bytes (256 MiB)" in result.stderr
    assert "32 bytes of memory per byte" in result.stderr
    assert "~32x its size in memory" in " ".join(shdb("ingest", "--help").stdout.split())
