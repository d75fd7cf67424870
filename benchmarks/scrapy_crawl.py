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

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response


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


def settings_from(args: list[str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for arg in args:
        key, _, raw = arg.partition("=")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    return overrides


def main() -> None:
    base, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        "ITEM_PIPELINES": {"simhash_hbase.integrations.scrapy.NearDuplicatePipeline": 300},
        "FEEDS": {str(out / "items.jsonl"): {"format": "jsonlines", "encoding": "utf-8"}},
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,  # one site: the whole budget
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **settings_from(sys.argv[3:]),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)
    process.crawl(crawler, base=base, fetched=str(out / "fetched.txt"))
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if not hasattr(v, "isoformat")}
    start, finish = crawler.stats.get_value("start_time"), crawler.stats.get_value("finish_time")
    stats["elapsed_seconds"] = (finish - start).total_seconds()
    (out / "stats.json").write_text(json.dumps(stats, default=str, indent=1), "utf-8")


if __name__ == "__main__":
    main()
