"""The client API on every store."""

from __future__ import annotations

import pytest

from simhash_hbase import (
    BadRecord,
    Document,
    FingerprintParams,
    InvalidInput,
    InvalidQuery,
    ManifestMismatch,
    Match,
    OnError,
    Record,
    SimhashIndex,
)
from simhash_hbase.fingerprint.simhash import Fingerprinter
from simhash_hbase.jobs.ingest import IngestOptions, index_records
from simhash_hbase.layout.scheme import SCHEMES

ARTICLE = (
    "SimHash 是谷歌提出的局部敏感哈希算法，常用于海量网页去重。它先对文本分词，"
    "再用 TF-IDF 计算每个词的权重，取权重最高的若干个词，把每个词哈希成 64 位整数，"
    "按位加权求和之后取符号，得到文本的指纹。两篇文章的指纹汉明距离不超过三，就认为是近似重复。"
    "为了在海量指纹中快速查找，可以利用抽屉原理把指纹切成若干段建立索引，查询时只比较少量候选。"
)
OTHER = "今天股市大幅上涨，银行板块领涨，成交量创下年内新高，分析师认为市场情绪明显回暖。"


def test_add_query_get_remove(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        fp = index.add("a", ARTICLE, {"src": "t"}, store_text=True)
        index.add("b", ARTICLE + "本文转载自网络。")
        index.add("c", OTHER)
        hits = index.query(ARTICLE)
        held = index.get("a")
        assert held is not None and held.time is not None  # it arrived when added
        assert hits[0] == Match("a", fp, 0, 1.0, held.time)
        assert [m.doc_id for m in hits] == ["a", "b"]
        sig = index.signature(ARTICLE)
        assert sig is not None and len(sig.sketch) == 64 + 1024  # b-bit part, evidence
        bands = sig.bands.astype(">u4").tobytes()
        assert held == Document("a", fp, ARTICLE, {"src": "t"}, sig.sketch, bands, time=held.time)
        assert index.get("b") is not None and index.get("b").text is None  # type: ignore[union-attr]
        assert index.remove("a") is True
        assert index.remove("a") is False
        assert [m.doc_id for m in index.query(ARTICLE)] == ["b"]
        assert index.get("a") is None


def test_results_sort_by_distance_then_id(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        for doc_id, fp in [("z", 0b1), ("y", 0b0), ("x", 0b1), ("w", 0b111)]:
            index.add_documents([Document(doc_id, fp, time=1000)])
        assert index.query_fingerprint(0) == [
            Match("y", 0, 0, time=1000),
            Match("x", 1, 1, time=1000),
            Match("z", 1, 1, time=1000),
            Match("w", 7, 3, time=1000),
        ]


def test_re_adding_an_id_replaces_its_rows(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        index.add_fingerprint("a", 0xAAAA)
        index.add_documents([Document("a", 0x5555_0000_0000_0000, time=1767225600000)])
        assert index.query_fingerprint(0xAAAA) == []
        assert index.query_fingerprint(0x5555_0000_0000_0000) == [
            Match("a", 0x5555_0000_0000_0000, 0, time=1767225600000)
        ]
        assert sum(1 for _ in index.index_cells()) == SCHEMES["5x10"].rows_per_fingerprint


def test_k_above_the_scheme_is_an_error(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        with pytest.raises(InvalidQuery, match="k=4"):
            index.query_fingerprint(0, k=4)
        with pytest.raises(InvalidInput, match="64-bit"):
            index.query_fingerprint(1 << 64)


def test_manifest_mismatch_is_a_clear_error(store_url: str) -> None:
    SimhashIndex.open(store_url, scheme="4x4").close()
    with pytest.raises(ManifestMismatch, match="scheme: the index has '4x4', asked for '5x10'"):
        SimhashIndex.open(store_url, scheme="5x10")
    with pytest.raises(ManifestMismatch, match="top_n: the index has 16, asked for 32"):
        SimhashIndex.open(store_url, params=FingerprintParams(top_n=32))
    with SimhashIndex.open(store_url) as index:  # adopts what the index was built with
        assert index.scheme.name == "4x4"


def test_opening_a_missing_index_without_create_fails(tmp_path) -> None:
    with pytest.raises(InvalidInput, match="no index at"):
        SimhashIndex.open(str(tmp_path / "nothing"), create=False)


def test_index_records_finds_duplicates_in_the_batch_and_the_index(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        index.add("old", ARTICLE)
        found = []
        summary = index_records(
            index,
            [("n1", ARTICLE + "！"), ("n2", OTHER), ("n3", OTHER + "。")],
            IngestOptions(batch_size=2, find_k=3),
            on_duplicate=found.append,
        )
        assert summary.added == 3 and summary.duplicates == len(found) == 2
        assert {(f.doc_id, m.doc_id) for f in found for m in f.matches} == {
            ("n1", "old"),
            ("n3", "n2"),
        }
        assert all(f.matches.total == 1 and f.matches.total_exact for f in found)


def test_index_records_skips_bad_records_and_keeps_the_rest(store_url: str) -> None:
    records = [
        Record("ok1", ARTICLE, None, "in.jsonl:1"),
        BadRecord("in.jsonl:2", "malformed JSON"),
        Record("empty", "  ，。 ", None, "in.jsonl:3"),
        Record("", OTHER, None, "in.jsonl:4"),
        Record("ok2", OTHER, None, "in.jsonl:5"),
    ]
    with SimhashIndex.open(store_url) as index:
        summary = index_records(index, records)
        assert summary.added == 2
        assert [bad.where for bad in summary.skipped] == ["in.jsonl:2", "in.jsonl:3", "in.jsonl:4"]
        assert set(index.get_many(["ok1", "ok2"])) == {"ok1", "ok2"}


def test_index_records_fail_mode_keeps_records_before_the_bad_one(store_url: str) -> None:
    records = [("ok1", ARTICLE), Record("bad", "", None, "x.jsonl:2"), ("never", OTHER)]
    with SimhashIndex.open(store_url) as index:
        with pytest.raises(InvalidInput, match=r"x.jsonl:2: .*no usable terms"):
            index_records(index, records, IngestOptions(on_error=OnError.FAIL))
        assert index.get("ok1") is not None
        assert index.get("never") is None


def test_duplicate_ids_in_one_batch_leave_no_stale_rows(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        index_records(index, [("a", ARTICLE), ("a", OTHER)])
        fp = Fingerprinter().fingerprint(OTHER)
        assert index.get("a").fingerprint == fp  # type: ignore[union-attr]
        assert {doc_id for _, doc_id in index.index_cells()} == {"a"}
        assert sum(1 for _ in index.index_cells()) == 10 + 25  # combinations, bands


def test_query_many_matches_single_queries(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        index_records(index, [("a", ARTICLE), ("c", OTHER)])
        assert index.query_many([ARTICLE, OTHER, "完全不同的内容，讲的是做饭和菜谱"]) == [
            index.query(ARTICLE),
            index.query(OTHER),
            [],
        ]


@pytest.mark.hbase
def test_stale_cells_never_surface(hbase_url: str) -> None:
    """A cell whose docs row says another fingerprint (an interrupted write) is hidden.

    HBase's rows layout only: the embedded store commits cells and docs rows in one
    transaction, so it answers from the cells alone (a damaged file is `verify`'s to
    find), and the bucket layout writes cells after their docs row, so a crash leaves
    none (test_hbase.py::test_a_crash_in_the_bucket_layout_hides_documents_never_shows_stale_ones).
    """
    with SimhashIndex.open(hbase_url + "&layout=rows") as index:
        index.add_fingerprint("a", 0x1000)
        # simulate a crash before the old cells went
        index.write_cells(put=index.cells([Document("a", 0xFFFF_0000_0000_0000)]))
        assert index.query_fingerprint(0xFFFF_0000_0000_0000) == []
        found = index.query_fingerprint(0x1000)
        assert [(m.doc_id, m.fingerprint, m.distance) for m in found] == [("a", 0x1000, 0)]
        # The confirming read takes the fingerprint alone: a row's text and meta do
        # not hide it, and a removed document's row (its owner token only) shows nothing.
        index.add("b", ARTICLE, meta={"url": "http://x/b"}, store_text=True)
        fp = index.get("b").fingerprint  # type: ignore[union-attr]
        assert [m.doc_id for m in index.query_fingerprint(fp)] == ["b"]
        index.remove("a")
        index.write_cells(put=index.cells([Document("a", 0x1000)]))  # a crash left them
        assert index.query_fingerprint(0x1000) == []


def test_stats(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        index_records(index, [("a", ARTICLE), ("c", OTHER)])
        stats = index.stats()
    assert stats["documents"] == 2 and stats["index_cells"] == 2 * (10 + 25)
    assert stats["scheme"] == "5x10" and stats["fingerprint"]["top_n"] == 16
