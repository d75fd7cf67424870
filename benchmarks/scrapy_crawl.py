"""One real Scrapy crawl of a local site through the pipeline (run as a subprocess
by the tests and by the scrapy_pipeline benchmark section).

    python -m benchmarks.scrapy_crawl BASE_URL OUT_DIR [SETTING=VALUE ...]

Writes OUT_DIR/items.jsonl (the items that went on down the pipeline, in order),
OUT_DIR/fetched.txt (every article URL in the order its item reached the pipeline)
and OUT_DIR/stats.json (Scrapy's stats, the ``shdb/`` counters among them).
Settings given as SETTING=VALUE override the defaults below (values are JSON
when they parse as JSON).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.exceptions import DropItem
from scrapy.http import Response

# What a crawl team sets for a large crawl (docs/scrapy.md, "Settings for a fast
# crawl"): Scrapy's own broad-crawl advice, and CONCURRENT_ITEMS at the items one
# response yields (one article a page here). Scrapy 2.13+ on asyncio starts
# CONCURRENT_ITEMS tasks for every response: its default of 100 was 40 % of the
# crawl's CPU here.
CRAWL_SETTINGS: dict[str, Any] = {
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,  # one site: the whole budget
    "CONCURRENT_ITEMS": 1,
    "COOKIES_ENABLED": False,
    "RETRY_ENABLED": False,
    "REDIRECT_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    # Scrapy 2.19's remote-control HTTP server, a debugging aid like the telnet console
    # (None: not started; Scrapy still imports it, and aiohttp, to resolve the setting)
    "EXTENSIONS": {
        "scrapy.extensions.remote_control.RemoteControl": None,
        "benchmarks.scrapy_crawl.CollectorTuning": 0,
    },
    "ROBOTSTXT_OBEY": False,
}


class CollectorTuning:
    """Python's cyclic garbage collector tuned for a crawl process, at spider open:
    the start-up heap (Scrapy, Twisted, their settings and components) frozen out of
    every later collection, and the youngest generation collected every 10,000
    allocations rather than 700. A crawl holds its frontier and every response whose
    items are in the pipelines alive, and with the defaults the collector kept
    rescanning them: 14 % of the crawl process's CPU with the pipeline here.

    ``EXTENSIONS = {"benchmarks.scrapy_crawl.CollectorTuning": 0}`` (docs/scrapy.md).
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CollectorTuning:
        tuning = cls()
        crawler.signals.connect(tuning.spider_opened, signal=signals.spider_opened)
        return tuning

    def spider_opened(self) -> None:
        gc.collect()  # the start-up's garbage is not frozen with it
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)


class SiteSpider(scrapy.Spider):
    """Follows the index pages' links; every other page is an article item."""

    name = "site"

    def __init__(self, base: str, fetched: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [base + "/index.html"]
        self._fetched = open(fetched, "w", encoding="utf-8")  # noqa: SIM115 (closed below)

    def parse(self, response: Response) -> Iterator[Any]:
        if response.url.endswith("index.html"):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)
            return
        self._fetched.write(response.url + "\n")
        self._fetched.flush()
        yield {"url": response.url, "html": response.text}

    def closed(self, reason: str) -> None:
        self._fetched.close()


class OneByOnePipeline:
    """What a hand-written pipeline does, for comparison: each item fingerprinted,
    checked and committed on its own, in ``process_item`` on the reactor.

    ``ITEM_PIPELINES={"benchmarks.scrapy_crawl.OneByOnePipeline": 300}``, with SHDB_INDEX.
    """

    def __init__(self, index: str) -> None:
        self._path = index
        self._index: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> OneByOnePipeline:
        return cls(crawler.settings["SHDB_INDEX"])

    def open_spider(self, spider: Any = None) -> None:
        from simhash_hbase.index.client import SimhashIndex  # not in the crawls without it

        self._index = SimhashIndex.open(self._path)

    def close_spider(self, spider: Any = None) -> None:
        assert self._index is not None
        self._index.close()

    def process_item(self, item: Any, spider: Any = None) -> Any:
        assert self._index is not None
        (matches,) = self._index.check_and_add_texts([(item["url"], item["html"])], fmt="html")
        if matches:
            raise DropItem(f"near-duplicate of {matches[0].doc_id}", log_level="DEBUG")
        return item


def settings_from(args: list[str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for arg in args:
        key, _, raw = arg.partition("=")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    return overrides


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    base, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        # the pipeline, its index opening as the crawler starts (docs/scrapy.md)
        "ADDONS": {"simhash_hbase.integrations.scrapy.NearDuplicateAddon": 0},
        "SHDB_CREATE": True,  # the first crawl of a run makes its index
        "FEEDS": {str(out / "items.jsonl"): {"format": "jsonlines", "encoding": "utf-8"}},
        **CRAWL_SETTINGS,
        **settings_from(sys.argv[3:]),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)
    process.crawl(crawler, base=base, fetched=str(out / "fetched.txt"))
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if not hasattr(v, "isoformat")}
    start, finish = crawler.stats.get_value("start_time"), crawler.stats.get_value("finish_time")
    stats["elapsed_seconds"] = (finish - start).total_seconds()
    stats["cpu_seconds_crawl"] = _cpu(resource.RUSAGE_SELF)
    stats["cpu_seconds_children"] = _cpu(resource.RUSAGE_CHILDREN)  # the pipeline's preparer
    (out / "stats.json").write_text(json.dumps(stats, default=str, indent=1), "utf-8")


if __name__ == "__main__":
    main()
