"""The Scrapy pipeline in a window: SHDB_WITHIN (alongside SHDB_SIMILARITY), on an
index the crawl opens itself and on a service."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.utils.test import get_crawler

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import InvalidSetting
from simhash_hbase.integrations.scrapy import PipelineSettings
from simhash_hbase.records import now_ms

from .serve_server import live_server
from .test_scrapy_pipeline import COPY, ORIGINAL, near, pipeline_for, run

DAY_S = 86_400


def test_shdb_within_is_read_and_checked() -> None:
    read = PipelineSettings.from_scrapy(
        get_crawler(settings_dict={"SHDB_INDEX": "x", "SHDB_WITHIN": "30d"}).settings
    )
    assert read.within == 30 * DAY_S * 1000
    for bad in ("30", "thirty days", 5):
        values = {"SHDB_INDEX": "x", "SHDB_WITHIN": bad}
        with pytest.raises(InvalidSetting, match=r"SHDB_WITHIN .*give a duration.*e\.g\. 30d"):
            PipelineSettings.from_scrapy(get_crawler(settings_dict=values).settings)


def _old_original(url: str) -> None:
    with SimhashIndex.open(url) as index:
        index.add("u/old", ORIGINAL, time=now_ms() / 1000 - 40 * DAY_S)


def test_an_item_whose_only_copy_is_older_than_the_window_passes(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _old_original(url)
    (copy,) = run(
        pipeline_for(url, SHDB_ACTION="tag", SHDB_WITHIN="30d"), [{"url": "a", "text": COPY}]
    )
    assert near(copy) == []  # new in the window, and stored
    (again,) = run(pipeline_for(url, SHDB_ACTION="tag"), [{"url": "b", "text": COPY}])
    assert sorted(m["id"] for m in near(again)) == ["a", "u/old"]


def test_a_service_is_asked_the_window(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _old_original(url)
    with live_server(url, tmp_path / "serve.log", "--fingerprint-workers", "0") as server:
        tagged = pipeline_for(server.url, SHDB_ACTION="tag", SHDB_WITHIN="30d")
        (copy,) = run(tagged, [{"url": "a", "text": COPY}])
        assert near(copy) == []
        (again,) = run(
            pipeline_for(server.url, SHDB_ACTION="tag", SHDB_WITHIN="60d"),
            [{"url": "b", "text": COPY}],
        )
        assert sorted(m["id"] for m in near(again)) == ["a", "u/old"]
