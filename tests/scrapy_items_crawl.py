"""A real Scrapy crawl whose one response yields given items (run as a subprocess by
tests/test_scrapy_doors.py: Twisted's reactor runs once a process).

    python -m tests.scrapy_items_crawl ITEMS.pickle OUT.pickle SETTING=VALUE ...

The items (a pickled list of dicts, odd values surviving, or of UntaggedPage) are
yielded by the response to one ``data:`` URL, so they reach the pipeline together and
share a batch. OUT.pickle gets the items that went on down the pipeline and the
crawl's stats.
"""

from __future__ import annotations

import importlib
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response

from benchmarks.scrapy_crawl import settings_from


class ItemsSpider(scrapy.Spider):
    name = "items"
    start_urls: ClassVar[list[str]] = ["data:,start"]

    def __init__(self, items: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._items = items

    def parse(self, response: Response) -> Iterator[Any]:
        yield from self._items


class UntaggedPage(scrapy.Item):
    """An item class without the tag field (tests/test_scrapy_fields.py)."""

    url = scrapy.Field()
    text = scrapy.Field()


class Collect:
    """The last pipeline: keeps what the shdb pipeline let through."""

    passed: ClassVar[list[dict[str, Any]]] = []

    def process_item(self, item: Any, spider: Any = None) -> Any:
        Collect.passed.append(dict(item))
        return item


def main() -> None:
    items = pickle.loads(Path(sys.argv[1]).read_bytes())
    settings = {
        "ITEM_PIPELINES": {
            "simhash_hbase.integrations.scrapy.NearDuplicatePipeline": 300,
            "tests.scrapy_items_crawl.Collect": 900,
        },
        "SHDB_ACTION": "tag",
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "EXTENSIONS": {"scrapy.extensions.remote_control.RemoteControl": None},
        **settings_from(sys.argv[3:]),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(ItemsSpider)
    process.crawl(crawler, items=items)
    process.start()
    assert crawler.stats is not None
    collected = importlib.import_module(__spec__.name).Collect  # Scrapy's, not __main__'s
    out = {"passed": collected.passed, "stats": crawler.stats.get_stats()}
    Path(sys.argv[2]).write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    main()
