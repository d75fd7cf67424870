"""The Scrapy pipeline: settings, items of every kind, batching, outages, and real crawls.

The crawl tests run ``CrawlerProcess`` in a subprocess (tests/scrapy_crawl.py) against a
generated site served on 127.0.0.1 (tests/crawl_site.py), and compare what the pipeline
found with ``shdb ingest --report`` on the same pages in the same order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import scrapy
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler
from typer.testing import CliRunner

from benchmarks.site import Page, build_pages, serve, write_site
from simhash_hbase.cli import app
from simhash_hbase.errors import InvalidSetting, StoreError
from simhash_hbase.fingerprint.workers import frame
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.integrations import indexer
from simhash_hbase.integrations import scrapy as pipeline_module
from simhash_hbase.integrations.indexer import IndexProcess
from simhash_hbase.integrations.scrapy import (
    IndexUnavailable,
    NearDuplicateAddon,
    NearDuplicatePipeline,
    PipelineSettings,
)
from simhash_hbase.text.extract import to_text

ROOT = Path(__file__).resolve().parent.parent
ORIGINAL = "区块链技术在金融行业的应用越来越广泛，多家银行已经开始试点跨境支付业务。" * 3
COPY = ORIGINAL + "本文转载自网络。"
OTHER = "今年夏天南方多地持续高温，气象部门提醒市民注意防暑降温，减少午后户外活动。" * 3


def pipeline_for(index: str, **settings: Any) -> NearDuplicatePipeline:
    values = {"SHDB_INDEX": index, "SHDB_CREATE": True, "SHDB_FLUSH_SECONDS": 0.05, **settings}
    return NearDuplicatePipeline.from_crawler(get_crawler(settings_dict=values))


def run(pipeline: NearDuplicatePipeline, items: list[Any]) -> list[Any]:
    """Open, process ``items`` concurrently (one batch), close; DropItem kept as results."""

    async def go() -> list[Any]:
        await pipeline.open_spider()
        try:
            return await asyncio.gather(
                *(pipeline.process_item(item) for item in items), return_exceptions=True
            )
        finally:
            await pipeline.close_spider()

    return asyncio.run(go())


def stats(pipeline: NearDuplicatePipeline) -> dict[str, Any]:
    return {k: v for k, v in pipeline._crawler.stats.get_stats().items() if k.startswith("shdb/")}


# -- settings -------------------------------------------------------------------
def test_settings_come_from_scrapy_alone_with_documented_defaults() -> None:
    crawler = get_crawler(settings_dict={"SHDB_INDEX": "x"})
    assert PipelineSettings.from_scrapy(crawler.settings) == PipelineSettings(index="x")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "SHDB_INDEX is not set"),
        ({"SHDB_INDEX": "x", "SHDB_ACTION": "delete"}, "use 'drop' or 'tag'"),
        ({"SHDB_INDEX": "x", "SHDB_LIMIT": 0}, "SHDB_LIMIT is 0: it must be at least 1"),
    ],
)
def test_bad_settings_are_named(values: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSetting, match=message):
        PipelineSettings.from_scrapy(get_crawler(settings_dict=values).settings)


ADDON = {"simhash_hbase.integrations.scrapy.NearDuplicateAddon": 0}


@pytest.mark.parametrize("addon", [{}, ADDON], ids=["pipeline", "addon"])
def test_an_index_that_cannot_be_opened_stops_the_crawl_naming_the_url(
    tmp_path: Path, addon: dict[str, int]
) -> None:
    url = "hbase://127.0.0.1:1/nothing"
    pipeline = pipeline_for(url, ADDONS=addon)
    with pytest.raises(IndexUnavailable, match=r"SHDB_INDEX='hbase://127\.0\.0\.1:1/nothing'"):
        asyncio.run(pipeline.open_spider())


def test_the_addon_enables_the_pipeline_and_opens_the_index_as_the_crawler_starts(
    tmp_path: Path,
) -> None:
    index = str(tmp_path / "idx")
    settings = {"ADDONS": ADDON, "SHDB_INDEX": index, "SHDB_CREATE": True, "SHDB_ACTION": "tag"}
    crawler = get_crawler(settings_dict={**settings, "SHDB_FLUSH_SECONDS": 0.05})
    assert crawler.settings.getdict("ITEM_PIPELINES") == {
        "simhash_hbase.integrations.scrapy.NearDuplicatePipeline": 300
    }
    addon = crawler.get_addon(NearDuplicateAddon)
    assert addon is not None
    started = addon._started
    assert started is not None  # before any pipeline exists
    pipeline = NearDuplicatePipeline.from_crawler(crawler)
    original, copy, other = run(pipeline, make_items("dict"))
    assert pipeline._indexer is started
    assert near(original) == [] and near(other) == []
    assert [m["id"] for m in near(copy)] == ["u/original"]


@pytest.mark.parametrize("own_index", [False, True], ids=["runner's", "spider's own"])
def test_the_addon_starts_the_index_process_with_the_runner_for_the_crawler_to_take(
    tmp_path: Path, own_index: bool
) -> None:
    """The process starts before any crawler exists; the crawler whose SHDB_INDEX it
    opens takes it, and one whose spider names another index closes it and starts
    its own."""
    runner_index, spider_index = str(tmp_path / "runner"), str(tmp_path / "spider")
    spider = type("OwnIndexSpider", (scrapy.Spider,),
                  {"name": "own", "custom_settings": {"SHDB_INDEX": spider_index}})  # fmt: skip
    crawler = get_crawler(spider if own_index else None,
                          {"ADDONS": ADDON, "SHDB_INDEX": runner_index,
                           "SHDB_CREATE": True})  # fmt: skip
    assert NearDuplicateAddon._early == {}  # taken or closed by the crawler's add-on
    addon = crawler.get_addon(NearDuplicateAddon)
    assert addon is not None and addon._started is not None
    assert addon._started.url == (spider_index if own_index else runner_index)
    addon._engine_stopped()  # ends the process no pipeline took
    assert addon._started is None
    assert Path(runner_index).exists()  # the early process opened the runner's index


def test_without_scrapy_the_import_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['scrapy'] = None; sys.modules['itemadapter'] = None\n"
        "import simhash_hbase.integrations.scrapy"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "pip install 'simhash-hbase[scrapy]'" in done.stderr


# -- items ----------------------------------------------------------------------
@dataclasses.dataclass
class DataItem:
    url: str
    text: str
    near_duplicates: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@attrs.define
class AttrsItem:
    url: str
    text: str
    near_duplicates: list[dict[str, Any]] = attrs.field(factory=list)


class PageItem(scrapy.Item):
    url = scrapy.Field()
    text = scrapy.Field()
    near_duplicates = scrapy.Field()


def make_items(kind: str) -> list[Any]:
    pairs = [("u/original", ORIGINAL), ("u/copy", COPY), ("u/other", OTHER)]
    if kind == "dict":
        return [{"url": u, "text": t} for u, t in pairs]
    if kind == "dataclass":
        return [DataItem(u, t) for u, t in pairs]
    if kind == "attrs":
        return [AttrsItem(u, t) for u, t in pairs]
    return [PageItem(url=u, text=t) for u, t in pairs]


def near(item: Any) -> list[dict[str, Any]]:
    if isinstance(item, (dict, scrapy.Item)):
        return list(item["near_duplicates"])
    return list(item.near_duplicates)


@pytest.mark.parametrize("kind", ["dict", "dataclass", "attrs", "scrapy.Item"])
def test_tag_mode_tags_every_kind_of_item(tmp_path: Path, kind: str) -> None:
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag")
    original, copy, other = run(pipeline, make_items(kind))
    assert near(original) == [] and near(other) == []
    (match,) = near(copy)
    assert match["id"] == "u/original"
    assert match["distance"] <= 3
    assert stats(pipeline) == {"shdb/checked": 3, "shdb/near_duplicates": 1, "shdb/batches": 1}


def test_drop_mode_names_the_nearest_earlier_document(tmp_path: Path) -> None:
    pipeline = pipeline_for(str(tmp_path / "idx"))
    original, copy, other = run(pipeline, make_items("dict"))
    assert isinstance(copy, DropItem)
    assert "near-duplicate of u/original" in str(copy)
    assert original["url"] == "u/original" and other["url"] == "u/other"
    assert stats(pipeline)["shdb/dropped"] == 1


def test_items_without_an_id_or_text_pass_through_and_are_counted(tmp_path: Path) -> None:
    pipeline = pipeline_for(str(tmp_path / "idx"))
    items = [{"text": ORIGINAL}, {"url": "a"}, {"url": "b", "text": "  "}, {"url": 5, "text": "x"}]
    assert run(pipeline, list(items)) == items
    assert stats(pipeline) == {
        "shdb/skipped_no_id": 1,
        "shdb/skipped_no_text": 2,
        "shdb/skipped_invalid": 1,  # an id that is not a string
    }


def test_html_is_read_when_there_is_no_text(tmp_path: Path) -> None:
    page = f"<html><body><nav>首页 新闻</nav><article><p>{ORIGINAL}</p></article></body></html>"
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag")
    _, copy = run(pipeline, [{"url": "p", "html": page}, {"url": "q", "text": ORIGINAL}])
    assert [m["id"] for m in copy["near_duplicates"]] == ["p"]


def test_a_response_body_is_decoded_by_its_declared_charset(tmp_path: Path) -> None:
    page = f"<html><head><meta charset='gbk'></head><body><p>{ORIGINAL}</p></body></html>"
    items = [
        {"url": "gbk", "html": page.encode("gbk")},
        {"url": "utf8", "text": ORIGINAL},
        {"url": "binary", "html": b"\x89PNG\x00\x00"},
    ]
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag")
    _, copy, binary = run(pipeline, items)
    assert [m["id"] for m in copy["near_duplicates"]] == ["gbk"]
    assert "near_duplicates" not in binary
    assert stats(pipeline)["shdb/skipped_undecodable"] == 1


def test_a_text_with_no_usable_terms_passes_and_the_batch_is_still_indexed(
    tmp_path: Path,
) -> None:
    items = [{"url": "a", "text": ORIGINAL}, {"url": "p", "text": "。，！？"},
             {"url": "b", "text": ORIGINAL}]  # fmt: skip
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag")
    _, punct, copy = run(pipeline, items)
    assert "near_duplicates" not in punct
    assert [m["id"] for m in copy["near_duplicates"]] == ["a"]
    assert stats(pipeline)["shdb/skipped_unusable"] == 1


def test_a_second_pass_over_the_same_items_finds_each_one_held(tmp_path: Path) -> None:
    index = str(tmp_path / "idx")
    run(pipeline_for(index), make_items("dict"))
    again = run(pipeline_for(index), make_items("dict"))
    assert all(isinstance(result, DropItem) for result in again)


def test_matches_are_bounded_by_the_limit(tmp_path: Path) -> None:
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag", SHDB_LIMIT=2)
    results = run(pipeline, [{"url": f"m{i}", "text": ORIGINAL} for i in range(6)])
    assert [len(r["near_duplicates"]) for r in results] == [0, 1, 2, 2, 2, 2]


# -- items fed ahead of their batch -----------------------------------------------
TEXTS = [ORIGINAL, COPY, OTHER, "。，！？", OTHER + "气象台发布了高温橙色预警。", "一" + ORIGINAL]


@contextmanager
def indexer_open(path: Path) -> Iterator[None]:
    """The index process's calls, run in this process on a fresh index."""
    indexer.open_index(str(path))
    try:
        yield
    finally:
        indexer.close_index()
        indexer._last = None
        indexer._fed.clear()


def answers(results: list[Any]) -> list[Any]:
    return [None if r is None else sorted((m.doc_id, m.distance) for m in r) for r in results]


@settings(max_examples=25)
@given(
    picks=st.lists(st.integers(0, len(TEXTS) - 1), min_size=1, max_size=24),
    cuts=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8)), min_size=24, max_size=24),
)
def test_items_fed_ahead_of_their_batch_get_the_answers_of_items_sent_with_it(
    picks: list[int], cuts: list[tuple[int, int]]
) -> None:
    """However a crawl's items are split into batches, and however many of each batch
    were fed ahead (``prepare``), every item gets the answer of one batch holding
    them all: ``check_and_add``'s, in order (unusable texts None)."""
    items = [(f"d{i}", TEXTS[pick], "text") for i, pick in enumerate(picks)]
    with tempfile.TemporaryDirectory() as tmp:
        with indexer_open(Path(tmp) / "whole"):
            whole = answers(indexer.check_batch(0, 0, items, 10))
        got: list[Any] = []
        with indexer_open(Path(tmp) / "fed"):
            at, seq = 0, 0
            while at < len(items):
                size, fed = cuts[seq]
                batch = items[at : at + size]
                fed = min(fed, len(batch))
                indexer.prepare(batch[:fed])
                got += answers(indexer.check_batch(seq, fed, batch[fed:], 10))
                at, seq = at + len(batch), seq + 1
    assert got == whole


def test_an_item_that_failed_ahead_of_its_batch_is_an_error_in_its_own_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare`` has no reply: an item that broke the extraction (any exception, not
    only ours) is answered as a refusal in its batch's check, and its batch-mates,
    fed before and after it, are checked and written; a store error still fails the
    batch (the pipeline retries it)."""
    with indexer_open(tmp_path / "idx"):
        index = indexer._held()
        prepared = index.prepare_text

        def failing(doc_id: str, raw: str, fmt: str = "auto", probes: int = 0) -> Any:
            if doc_id == "bad":
                raise RuntimeError("the page broke the parser")
            if doc_id == "down":
                raise StoreError("the IDF table is unreachable")
            return prepared(doc_id, raw, fmt, probes)

        monkeypatch.setattr(index, "prepare_text", failing)
        indexer.prepare([("a", ORIGINAL, "text"), ("bad", OTHER, "text"), ("b", COPY, "text")])
        first, refused, copy = indexer.check_batch(0, 3, [], 10)
        assert refused == ("ShdbError", "'bad': RuntimeError: the page broke the parser")
        assert answers([first]) == [[]] and [m.doc_id for m in copy] == ["a"]
        with pytest.raises(StoreError, match="unreachable"):
            indexer.check_batch(1, 0, [("c", OTHER, "text"), ("down", OTHER, "text")], 10)
        (other,) = indexer.check_batch(2, 0, [("c", OTHER, "text")], 10)
    assert answers([other]) == [[]]


def test_a_crawl_feeds_its_items_ahead_of_their_batches_and_answers_as_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the index process: items fed two at a time, batches of five, the
    answers those of one ``check_and_add_texts`` over them all."""
    monkeypatch.setattr(pipeline_module, "FEED_ITEMS", 2)
    fed: list[int] = []
    feed = IndexProcess.feed

    def counted(self: IndexProcess, items: list[Any]) -> None:
        fed.append(len(items))
        feed(self, items)

    monkeypatch.setattr(IndexProcess, "feed", counted)
    sent: list[int] = []  # the items a batch's check carries: those not fed
    call = IndexProcess.call

    def checked(self: IndexProcess, name: str, *args: Any) -> Any:
        if name == "check_batch":
            sent.append(len(args[2]))
        return call(self, name, *args)

    monkeypatch.setattr(IndexProcess, "call", checked)
    texts = [TEXTS[i % len(TEXTS)] for i in (0, 2, 1, 4, 5, 3, 0, 2, 1, 4, 5, 0, 1)]
    items = [{"url": f"u{i}", "text": text} for i, text in enumerate(texts)]
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag", SHDB_BATCH_SIZE=5)
    results = run(pipeline, [dict(item) for item in items])
    assert sum(fed) >= 8 and sum(fed) + sum(sent) == len(items)  # each item sent once
    with SimhashIndex.open(str(tmp_path / "whole")) as whole:
        expected = whole.check_and_add_texts(
            [(i["url"], i["text"]) for i in items if i["text"] != "。，！？"], fmt="text"
        )
    tagged = [r for r in results if r["text"] != "。，！？"]
    assert [sorted(m["id"] for m in r["near_duplicates"]) for r in tagged] == [
        sorted(m.doc_id for m in e) for e in expected
    ]


async def _until(done: Any, seconds: float = 20) -> None:
    async def poll() -> None:
        while not done():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), seconds)


def test_an_idle_index_takes_an_item_at_once_and_a_busy_one_what_arrived_meanwhile(
    tmp_path: Path,
) -> None:
    """Group commit: no item waits for SHDB_FLUSH_SECONDS (a minute here) while the
    index process idles; the items that arrive while it writes go as the next batch."""
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag", SHDB_FLUSH_SECONDS=60,
                            SHDB_LINGER_SECONDS=0)  # fmt: skip
    sizes: list[int] = []
    gate = threading.Event()
    write = pipeline._write_with_retries

    def held_open(batch: Any) -> Any:
        sizes.append(len(batch))
        gate.wait(30)
        return write(batch)

    pipeline._write_with_retries = held_open  # type: ignore[method-assign]

    async def go() -> list[Any]:
        await pipeline.open_spider()
        try:
            first = asyncio.ensure_future(pipeline.process_item({"url": "a", "text": ORIGINAL}))
            await _until(lambda: sizes)
            meanwhile = ({"url": "b", "text": COPY}, {"url": "c", "text": OTHER})
            later = [asyncio.ensure_future(pipeline.process_item(item)) for item in meanwhile]
            await asyncio.sleep(0.05)
            gate.set()
            return await asyncio.wait_for(asyncio.gather(first, *later), 30)
        finally:
            gate.set()
            await pipeline.close_spider()

    original, copy, other = asyncio.run(go())
    assert sizes == [1, 2]
    assert near(original) == [] and near(other) == []
    assert [m["id"] for m in near(copy)] == ["a"]


@pytest.mark.parametrize("linger", [2.0, 4.0])
def test_an_idle_index_waits_for_the_items_that_follow_until_they_stop(
    tmp_path: Path, linger: float
) -> None:
    """Items that follow each other closely go in one batch (a batch's fixed cost is
    spread); once they stop for a tenth of SHDB_LINGER_SECONDS the batch goes, without
    waiting out the linger (the last pages of a crawl) or SHDB_FLUSH_SECONDS."""
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_ACTION="tag", SHDB_FLUSH_SECONDS=60,
                            SHDB_LINGER_SECONDS=linger)  # fmt: skip
    sizes: list[int] = []
    write = pipeline._write_with_retries

    def counted(batch: Any) -> Any:
        sizes.append(len(batch))
        return write(batch)

    pipeline._write_with_retries = counted  # type: ignore[method-assign]
    items = [{"url": "a", "text": ORIGINAL}, {"url": "b", "text": COPY},
             {"url": "c", "text": OTHER}]  # fmt: skip

    async def go() -> tuple[list[Any], float]:
        await pipeline.open_spider()
        try:
            began = time.monotonic()
            tasks = []
            for item in items:
                tasks.append(asyncio.ensure_future(pipeline.process_item(item)))
                await asyncio.sleep(linger / 40)
            results = await asyncio.wait_for(asyncio.gather(*tasks), 30)
            return results, time.monotonic() - began
        finally:
            await pipeline.close_spider()

    (original, copy, other), waited = asyncio.run(go())
    assert sizes == [3]
    assert linger / 10 <= waited < linger
    assert [m["id"] for m in near(copy)] == ["a"] and near(original) == near(other) == []


class FailingIndex:
    """A store that fails every write: the pipeline retries, then stops the crawl."""

    def __init__(self) -> None:
        self.calls = 0

    def check_and_add_texts(self, items: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise StoreError("HBase went away")

    def close(self) -> None:
        pass


def _record_closes(pipeline: Any) -> list[str]:
    """The reasons the pipeline asks the engine to close the spider with, in order."""
    closed: list[str] = []

    class Engine:
        async def close_spider_async(self, *, reason: str) -> None:
            closed.append(reason)

    pipeline._crawler.engine = Engine()
    return closed


def test_a_store_that_keeps_failing_is_retried_then_stops_the_crawl(tmp_path: Path) -> None:
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_RETRIES=2)
    failing = FailingIndex()
    closed = _record_closes(pipeline)

    async def go() -> list[Any]:
        pipeline._index = failing  # type: ignore[assignment]
        results = await asyncio.gather(
            *(pipeline.process_item({"url": f"x{i}", "text": ORIGINAL}) for i in range(3)),
            return_exceptions=True,
        )
        late = await asyncio.gather(pipeline.process_item({"url": "y", "text": OTHER}),
                                    return_exceptions=True)  # fmt: skip
        await pipeline.close_spider()
        return [*results, *late]

    results = asyncio.run(go())
    assert failing.calls == 3  # the first try and two retries, then no more writes
    assert all(isinstance(r, DropItem) for r in results)
    assert closed == ["shdb_store_error"]
    assert stats(pipeline)["shdb/errors"] == 3


def test_an_index_process_whose_crawl_is_gone_closes_its_index_and_exits_quietly(
    tmp_path: Path,
) -> None:
    """A process started with the runner that no crawler took, once the Scrapy process
    ended: its reply to the open has no reader. It closes the index and exits 0,
    without a traceback, and the index opens again."""
    ours, theirs = socket.socketpair()  # as workers.spawn, with stderr kept here
    with theirs:
        proc = subprocess.Popen(
            [sys.executable, "-m", "simhash_hbase.integrations.indexer", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
    ours.sendall(frame(("open_index", (str(tmp_path / "idx"),))))
    ours.close()  # the crawl is gone before the reply
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert b"Traceback" not in err
    SimhashIndex.open(str(tmp_path / "idx")).close()


def test_an_index_process_that_dies_stops_the_crawl_and_its_items_are_errors(
    tmp_path: Path,
) -> None:
    """The index lives in a process of its own: its death is a store failure, named."""
    pipeline = pipeline_for(str(tmp_path / "idx"), SHDB_RETRIES=1)
    closed = _record_closes(pipeline)

    async def go() -> list[Any]:
        await pipeline.open_spider()
        first = await pipeline.process_item({"url": "a", "text": ORIGINAL})
        assert pipeline._indexer is not None
        pipeline._indexer._proc.kill()
        results = await asyncio.gather(
            *(pipeline.process_item({"url": f"x{i}", "text": OTHER}) for i in range(3)),
            return_exceptions=True,
        )
        await pipeline.close_spider()
        return [first, *results]

    first, *results = asyncio.run(go())
    assert first == {"url": "a", "text": ORIGINAL}
    assert all(isinstance(r, DropItem) and "index process died" in str(r) for r in results)
    assert closed == ["shdb_store_error"]
    assert stats(pipeline)["shdb/errors"] == 3
    with SimhashIndex.open(str(tmp_path / "idx"), readonly=True) as index:
        assert [d.doc_id for d in index.documents()] == ["a"]


# -- real crawls ----------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Page]]]:
    root = tmp_path_factory.mktemp("site")
    pages = build_pages(60)
    write_site(root, pages)
    with serve(root) as base:
        yield base, pages


def crawl(base: str, out: Path, index: str, *settings: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scrapy_crawl", base, str(out), f"SHDB_INDEX={index}",
         *settings],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((out / "stats.json").read_text("utf-8"))
    return result


def items_of(out: Path) -> list[dict[str, Any]]:
    lines = (out / "items.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def ingest_report(tmp_path: Path, out: Path, index: str) -> dict[str, set[str]]:
    """``shdb ingest --report`` of the crawled pages, as text, in the pipeline's order."""
    pages = tmp_path / "pages.jsonl"
    with pages.open("w", encoding="utf-8") as sink:
        for item in items_of(out):
            text = to_text(item["html"], "html")
            sink.write(json.dumps({"id": item["url"], "text": text}, ensure_ascii=False) + "\n")
    report = tmp_path / "report.jsonl"
    result = CliRunner().invoke(app, ["ingest", str(pages), "-i", index, "--report", str(report)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in report.read_text("utf-8").splitlines()]
    return {line["id"]: {m["id"] for m in line["matches"]} for line in lines}


def scored(found: dict[str, set[str]], pages: list[Page], base: str) -> tuple[float, float]:
    """Recall of the planted copies and precision of the reported pairs."""
    url = {p.path: f"{base}/{p.path}" for p in pages}
    planted = {frozenset((url[p.path], url[p.source])) for p in pages if p.source}
    reported = {frozenset((a, b)) for a, bs in found.items() for b in bs}
    hits = len(planted & reported)
    return hits / len(planted), (hits / len(reported) if reported else 1.0)


def test_a_crawl_in_tag_mode_finds_what_ingest_finds_on_the_same_pages(
    tmp_path: Path, site: tuple[str, list[Page]], store_url: str
) -> None:
    base, pages = site
    out = tmp_path / "crawl"
    stats_ = crawl(base, out, store_url, "SHDB_ACTION=tag")
    items = items_of(out)
    assert len(items) == len(pages) == stats_["shdb/checked"]
    found = {i["url"]: {m["id"] for m in i["near_duplicates"]} for i in items}
    found = {k: v for k, v in found.items() if v}
    assert found == ingest_report(tmp_path, out, f"{tmp_path}/ingest-index")
    recall, precision = scored(found, pages, base)
    assert recall >= 0.7 and precision >= 0.95, (recall, precision)


def test_a_second_crawl_with_the_same_index_drops_every_page(
    tmp_path: Path, site: tuple[str, list[Page]], store_url: str
) -> None:
    base, pages = site
    first = crawl(base, tmp_path / "first", store_url)
    kept = len(items_of(tmp_path / "first"))
    assert kept + first.get("shdb/dropped", 0) == len(pages)
    second = crawl(base, tmp_path / "second", store_url)
    assert items_of(tmp_path / "second") == []
    assert second["shdb/dropped"] == len(pages)


def test_ctrl_c_stops_the_crawl_and_every_item_it_let_through_is_in_the_index(
    tmp_path: Path, site: tuple[str, list[Page]]
) -> None:
    """Ctrl-C (SIGINT to the crawl's process group) mid-crawl: Scrapy closes gracefully,
    the pipeline's index process (a session of its own) writes the last batch, and no
    item is an error: every item exported is in the index, under its URL."""
    base, pages = site
    out, index = tmp_path / "crawl", str(tmp_path / "idx")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "benchmarks.scrapy_crawl", base, str(out),
            f"SHDB_INDEX={index}", "SHDB_ACTION=tag", "DOWNLOAD_DELAY=0.05",
            "SHDB_FLUSH_SECONDS=5"]  # fmt: skip
    crawl_ = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    fetched = out / "fetched.txt"
    deadline = time.monotonic() + 120
    while not (fetched.exists() and len(fetched.read_text().splitlines()) >= 20):
        assert crawl_.poll() is None and time.monotonic() < deadline, "the crawl did not start"
        time.sleep(0.05)
    os.killpg(crawl_.pid, signal.SIGINT)
    _, err = crawl_.communicate(timeout=300)
    assert crawl_.returncode == 0, err[-3000:]
    result = json.loads((out / "stats.json").read_text("utf-8"))
    assert result["finish_reason"] == "shutdown"
    exported = {item["url"] for item in items_of(out)}
    assert 20 <= len(exported) < len(pages)
    assert "shdb/errors" not in result
    assert result["shdb/checked"] == len(exported)
    with SimhashIndex.open(index, readonly=True) as held:
        assert {doc.doc_id for doc in held.documents()} == exported


def test_two_spiders_feeding_one_index_at_once_leave_it_whole(
    tmp_path: Path, site: tuple[str, list[Page]], store_url: str
) -> None:
    """A fleet: two crawls of the same pages at once; every page is held once, and
    verify finds every cell and document consistent."""
    base, pages = site
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "benchmarks.scrapy_crawl", base]
    settings = [f"SHDB_INDEX={store_url}", "LOG_LEVEL=WARNING"]
    runs = [
        subprocess.Popen(
            [*argv, str(tmp_path / f"c{i}"), *settings],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for run_ in runs:
        _, err = run_.communicate(timeout=600)
        assert run_.returncode == 0, err[-3000:]
    result = CliRunner().invoke(app, ["verify", "-i", store_url])
    assert result.exit_code == 0, result.output
    with SimhashIndex.open(store_url, readonly=True) as index:
        held = {doc.doc_id for doc in index.documents()}
    assert held == {f"{base}/{p.path}" for p in pages}


def test_a_missing_index_stops_the_crawl_unless_shdb_create(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 43.2: a mistyped SHDB_INDEX is not a new, empty index."""
    index = tmp_path / "typo-idx"
    pipeline = pipeline_for(str(index), SHDB_CREATE=False)
    with pytest.raises(IndexUnavailable, match=r"no index at .*SHDB_CREATE"):
        asyncio.run(pipeline.open_spider())
    assert not index.exists()
    created = pipeline_for(str(index))
    with caplog.at_level(logging.WARNING):
        asyncio.run(created.open_spider())
        asyncio.run(created.close_spider())
    assert [r.getMessage() for r in caplog.records].count(
        f"shdb: created a new, empty index at {index} (SHDB_CREATE)"
    ) == 1
