"""The Scrapy pipeline never stops a crawl for one bad item, and never hangs: real
crawls (tests/scrapy_items_crawl.py, a subprocess with a timeout, so that a hang fails
the test instead of holding the suite) with odd items among good ones, and a store
that fails."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simhash_hbase.index.client import SimhashIndex

from .serve_server import live_server

ROOT = Path(__file__).resolve().parent.parent
TEXTS = [
    "区块链技术在金融行业的应用越来越广泛，多家银行已经开始试点跨境支付业务。" * 3,
    "今年夏天南方多地持续高温，气象部门提醒市民注意防暑降温，减少午后户外活动。" * 3,
    "国家统计局今天发布数据，上个月全国居民消费价格同比上涨，食品价格涨幅回落。" * 3,
    "新学期开始，多所高校推出人工智能课程，吸引了大量学生报名参加。" * 3,
]
GOOD = [{"url": f"https://site.example/good/{i}", "text": text} for i, text in enumerate(TEXTS)]
GOOD.append({"url": "https://site.example/good/page", "html": f"<html><p>{TEXTS[0]}。</p></html>"})
LONG_URL = "https://site.example/" + "a" * 2000  # 2,020 bytes: over the 1,024-byte id limit
#: One bad item of each kind, and the problem the log names for it.
BAD: dict[str, dict[str, Any]] = {
    "id too long": {"url": LONG_URL, "text": TEXTS[0]},
    "id holds a lone surrogate": {"url": "https://site.example/\udc80", "text": TEXTS[1]},
    "text holds a lone surrogate": {
        "url": "https://site.example/s",
        "text": "中文\ud800" + TEXTS[2],
    },
    "html holds a lone surrogate": {"url": "https://site.example/h", "html": "<p>\udfff正文</p>"},
    "text is not a string": {"url": "https://site.example/b", "text": TEXTS[3].encode()},
    "id is not a string": {"url": 42, "text": TEXTS[0]},
    "html is not a string or bytes": {"url": "https://site.example/l", "html": ["<p>x</p>"]},
}
#: Bad in a way the index has always skipped quietly, under its own counters.
SKIPPED = [{"url": None, "text": TEXTS[0]}, {"url": "https://site.example/n", "text": None}]
CRAWL_SECONDS = 120  # a crawl of one response here takes 2-5 s: beyond this, it hung


def run_crawl(
    tmp_path: Path, items: list[Any], *settings: str, seconds: float = CRAWL_SECONDS
) -> tuple[int, dict[str, Any] | None, str]:
    """A real crawl of ``items``: its exit code, its passed items and stats (None if
    it wrote none), and its log; a crawl that does not end fails the test."""
    (tmp_path / "items.pickle").write_bytes(pickle.dumps(items))
    out = tmp_path / "out.pickle"
    argv = [sys.executable, "-m", "tests.scrapy_items_crawl", str(tmp_path / "items.pickle"),
            str(out), "SHDB_FLUSH_SECONDS=0.05", "SHDB_CREATE=True", *settings]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        _, log = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the crawl and its index process
        _, log = proc.communicate()
        pytest.fail(f"the crawl did not end within {seconds} s:\n{log[-3000:]}")
    result = pickle.loads(out.read_bytes()) if out.exists() else None
    return proc.returncode, result, log


def crawl(
    tmp_path: Path, items: list[dict[str, Any]], *settings: str
) -> tuple[dict[str, Any], str]:
    """The crawl's passed items and stats, and its log; a crawl that does not end fails."""
    code, result, log = run_crawl(tmp_path, items, *settings)
    assert code == 0, log[-3000:]
    assert result is not None, log[-3000:]
    return result, log


@pytest.fixture(params=["embedded", "service"])
def index_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An index the crawl writes to: a folder (the pipeline's index process), or the
    same behind ``shdb serve`` (RemoteIndex)."""
    folder = str(tmp_path / "idx")
    if request.param == "embedded":
        yield folder
        return
    with live_server(folder, tmp_path / "serve.log", "--fingerprint-workers", "0") as server:
        yield server.url


def held(index_url: str, tmp_path: Path) -> set[str]:
    folder = index_url if not index_url.startswith("http") else str(tmp_path / "idx")
    with SimhashIndex.open(folder, readonly=True) as index:
        return {doc.doc_id for doc in index.documents()}


def test_one_bad_item_of_each_kind_among_good_ones_leaves_every_good_one_indexed(
    tmp_path: Path, index_url: str
) -> None:
    """Every kind of bad item, and a second of one kind, in the batch of the good ones
    (one response yields them all): the good ones are checked and indexed, the bad
    ones pass through unchecked, each kind is logged once, and the crawl ends as a
    crawl does."""
    items = [*GOOD[:2], *BAD.values(), dict(BAD["id too long"]), *SKIPPED, *GOOD[2:]]
    result, log = crawl(tmp_path, items, f"SHDB_INDEX={index_url}")
    stats = result["stats"]
    assert stats["finish_reason"] == "finished", log[-3000:]
    assert "stopping the crawl" not in log and "shdb/errors" not in stats
    assert stats["shdb/checked"] == len(GOOD)
    assert stats["shdb/skipped_invalid"] == len(BAD) + 1
    assert stats["shdb/skipped_no_id"] == stats["shdb/skipped_no_text"] == 1
    assert held(index_url, tmp_path) == {item["url"] for item in GOOD}
    assert len(result["passed"]) == len(items)  # tag mode: none dropped, bad ones unchecked
    tagged = {i["url"]: [m["id"] for m in i["near_duplicates"]] for i in result["passed"]
              if "near_duplicates" in i}  # fmt: skip
    assert tagged.keys() == {item["url"] for item in GOOD}
    assert tagged["https://site.example/good/page"] == ["https://site.example/good/0"]
    for kind in BAD:
        assert log.count(f"not checked: {kind}") == 1, kind


def test_a_store_outage_stops_the_crawl_and_the_process_exits(tmp_path: Path) -> None:
    """The index is a service that cannot be reached (a port bound but not listening):
    the first batch is retried SHDB_RETRIES times, then the crawl stops
    (``shdb_store_error``), its items are errors, and the process exits: the close
    the pipeline asked for no longer waits for itself."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # held, never listening: connections are refused
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        result, log = crawl(tmp_path, GOOD, f"SHDB_INDEX={url}")
    stats = result["stats"]
    assert stats["finish_reason"] == "shdb_store_error", log[-3000:]
    assert stats["shdb/errors"] == len(GOOD) and result["passed"] == []
    assert log.count("stopping the crawl") == 1
