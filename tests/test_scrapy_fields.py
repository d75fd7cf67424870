"""Misconfiguration said loudly (issue 43, items 3 and 11): bad settings are refused
naming the setting; items without the fields the pipeline reads get one warning
naming the fields they have, and a crawl none of whose first items has them stops;
tag mode with an item class that cannot carry the tag stops at its first item; and
each dropped near-copy is one INFO line naming it and the page kept. Real crawls run
``tests/scrapy_items_crawl.py`` in a subprocess, as tests/test_scrapy_doors.py does."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.integrations.item_fields import FieldWatch, untaggable
from simhash_hbase.integrations.scrapy import SETTINGS, PipelineSettings

from .scrapy_items_crawl import UntaggedPage
from .test_scrapy_doors import TEXTS, run_crawl

ROOT = Path(__file__).resolve().parent.parent
CRAWL_SECONDS = 120


def crawl(tmp_path: Path, items: list[Any], *settings: str) -> tuple[dict[str, Any], str]:
    """The passed items and stats of a real crawl of ``items``, and its log."""
    _, result, log = run_crawl(
        tmp_path, items, f"SHDB_INDEX={tmp_path / 'idx'}", *settings, seconds=CRAWL_SECONDS
    )
    return result or {}, log


def held(tmp_path: Path) -> set[str]:
    if not (tmp_path / "idx").exists():
        return set()
    with SimhashIndex.open(str(tmp_path / "idx"), readonly=True) as index:
        return {doc.doc_id for doc in index.documents()}


# -- settings -------------------------------------------------------------------
#: Values that are no value of each setting's kind (Scrapy's -s gives strings).
BAD_VALUES = {
    bool: st.sampled_from(["maybe", "yes please", "1.5", [1]]),
    int: st.sampled_from(["ten", "1.5", "", [3], {"n": 1}]),
    float: st.sampled_from(["fast", "0,5", [0.5]]),
    str: st.sampled_from(["", "   ", 3, ["url"]]),
}
KIND = {
    name: str if f.default is dataclasses.MISSING else type(f.default)
    for f, name in zip(dataclasses.fields(PipelineSettings), SETTINGS)
} | {"SHDB_SIMILARITY": float, "SHDB_WITHIN": int}  # None by default (the index's; no window)


@given(st.sampled_from(SETTINGS).flatmap(lambda n: st.tuples(st.just(n), BAD_VALUES[KIND[n]])))
def test_a_value_of_the_wrong_kind_is_refused_naming_the_setting(bad: tuple[str, Any]) -> None:
    name, value = bad
    settings = {"SHDB_INDEX": "idx", name: value}
    with pytest.raises(InvalidSetting, match=f"^{name} ") as raised:
        PipelineSettings.from_scrapy(get_crawler(settings_dict=settings).settings)
    assert raised.value.setting == name


ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers()),
)  # fmt: skip


@given(st.sampled_from(SETTINGS), ANY_VALUE)
@example("SHDB_LIMIT", float("inf"))
@example("SHDB_FLUSH_SECONDS", float("nan"))
@example("SHDB_LINGER_SECONDS", "inf")
def test_any_value_gives_a_setting_of_its_kind_or_an_error_naming_it(name: str, value: Any) -> None:
    """Never another exception, never a value of another kind reaching the pipeline."""
    settings = get_crawler(settings_dict={"SHDB_INDEX": "idx", name: value}).settings
    try:
        made = PipelineSettings.from_scrapy(settings)
    except InvalidSetting as exc:
        assert exc.setting == name and str(exc).startswith(name)
        return
    field = dataclasses.fields(PipelineSettings)[SETTINGS.index(name)]
    got = getattr(made, field.name)
    if got is None:  # only a setting whose default is None (SHDB_SIMILARITY, SHDB_WITHIN)
        assert field.default is None
        return
    assert isinstance(got, KIND[name]) and (KIND[name] is not float or math.isfinite(got))


@given(
    st.sampled_from(SETTINGS),
    st.tuples(st.sampled_from(["drop", "swap", "add"]), st.integers(0, 20)),
)
def test_a_mistyped_setting_name_is_refused_with_the_name_meant(
    name: str, typo: tuple[str, int]
) -> None:
    how, at = typo
    body = name.removeprefix("SHDB_")
    at %= len(body)
    if how == "drop":
        wrong = body[:at] + body[at + 1 :]
    elif how == "swap" and at + 1 < len(body):
        wrong = body[:at] + body[at + 1] + body[at] + body[at + 2 :]
    else:
        wrong = body[:at] + "X" + body[at:]
    wrong = f"SHDB_{wrong}"
    if wrong in SETTINGS or wrong == "SHDB_":
        return
    settings = {"SHDB_INDEX": "idx", wrong: "1"}
    with pytest.raises(InvalidSetting, match=f"^{wrong} is no setting") as raised:
        PipelineSettings.from_scrapy(get_crawler(settings_dict=settings).settings)
    assert name in str(raised.value)  # the one meant is suggested, or among those listed


@pytest.mark.parametrize(
    ("name", "value"),
    [("SHDB_RETRIES", -1), ("SHDB_BATCH_SIZE", 0), ("SHDB_FLUSH_SECONDS", 0),
     ("SHDB_LINGER_SECONDS", -0.1), ("SHDB_FIELD_CHECK_ITEMS", -5)],
)  # fmt: skip
def test_a_number_out_of_range_is_refused_naming_the_setting(name: str, value: float) -> None:
    settings = get_crawler(settings_dict={"SHDB_INDEX": "idx", name: value}).settings
    with pytest.raises(InvalidSetting, match=f"^{name} is .*: it must be at least"):
        PipelineSettings.from_scrapy(settings)


def test_a_bad_setting_stops_a_real_crawl_before_it_opens_naming_the_setting(
    tmp_path: Path,
) -> None:
    good = [{"url": "https://a.example/1", "text": TEXTS[0]}]
    result, log = crawl(tmp_path, good, "SHDB_LIMIT=ten")
    assert "SHDB_LIMIT is 'ten': give a whole number" in log, log[-3000:]
    assert not result.get("passed") and held(tmp_path) == set()


# -- item fields ----------------------------------------------------------------
def other_fields(n: int) -> list[dict[str, Any]]:
    return [{"link": f"https://a.example/{i}", "body": TEXTS[i % 4]} for i in range(n)]


def test_items_with_other_field_names_warn_once_then_stop_the_crawl(tmp_path: Path) -> None:
    result, log = crawl(tmp_path, other_fields(60), "SHDB_FIELD_CHECK_ITEMS=25")
    stats = result["stats"]
    assert stats["finish_reason"] == "shdb_item_fields_missing", log[-3000:]
    warnings = [line for line in log.splitlines() if "WARNING: shdb: an item has" in line]
    assert len(warnings) == 1, log[-3000:]
    assert "no id in 'url'" in warnings[0] and "its fields: 'link', 'body'" in warnings[0]
    assert "SHDB_ID_FIELD" in warnings[0]
    assert log.count("ERROR: shdb: stopping the crawl: none of the first 25 items") == 1
    assert "'link' (25), 'body' (25)" in log
    assert "Traceback" not in log
    assert held(tmp_path) == set()


def test_a_few_items_without_the_fields_among_good_ones_warn_once_and_the_crawl_goes_on(
    tmp_path: Path,
) -> None:
    good = [{"url": f"https://a.example/good/{i}", "text": t} for i, t in enumerate(TEXTS)]
    items = [*other_fields(3), good[0], *other_fields(30), *good[1:]]
    result, log = crawl(tmp_path, items, "SHDB_FIELD_CHECK_ITEMS=5")
    assert result["stats"]["finish_reason"] == "finished", log[-3000:]
    assert log.count("shdb: an item has") == 1 and "stopping the crawl" not in log
    assert held(tmp_path) == {item["url"] for item in good}
    assert result["stats"]["shdb/skipped_no_id"] == 33


def test_the_field_check_can_be_turned_off(tmp_path: Path) -> None:
    result, log = crawl(tmp_path, other_fields(30), "SHDB_FIELD_CHECK_ITEMS=0")
    assert result["stats"]["finish_reason"] == "finished", log[-3000:]
    assert log.count("shdb: an item has") == 1


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "url": st.sampled_from(["u", "", None]),
                "text": st.sampled_from(["t", "", None]),
                "html": st.sampled_from(["<p>h</p>", None]),
                "other": st.just(1),
            },
        ),
        max_size=30,
    ),
    st.integers(0, 10),
)
def test_the_watch_warns_at_the_first_misfit_and_stops_only_when_none_fits_within_n(
    items: list[dict[str, Any]], within: int
) -> None:
    """Over any sequence of items: one warning at the first item without an id or any
    content field; a stop exactly when the first ``within`` items all lack them."""
    watch = FieldWatch("url", "text", "html", within)
    said = [watch.observe(item) for item in items]

    def fits(item: dict[str, Any]) -> bool:
        has_id = item.get("url") not in (None, "")
        return has_id and (item.get("text") is not None or item.get("html") is not None)

    misfits = [i for i, item in enumerate(items) if not fits(item)]
    warned = [i for i, s in enumerate(said) if s and s.warning]
    assert warned == misfits[:1]
    stops = [i for i, s in enumerate(said) if s and s.stop]
    first_fit = next((i for i, item in enumerate(items) if fits(item)), len(items))
    assert stops == ([within - 1] if 0 < within <= first_fit else [])


# -- tag mode -------------------------------------------------------------------
def test_tag_mode_with_an_item_class_without_the_tag_field_stops_at_the_first_item(
    tmp_path: Path,
) -> None:
    items = [UntaggedPage(url=f"https://a.example/{i}", text=t) for i, t in enumerate(TEXTS)]
    result, log = crawl(tmp_path, items * 5, "SHDB_ACTION=tag")
    assert result["stats"]["finish_reason"] == "shdb_untaggable_items", log[-3000:]
    assert log.count("ERROR: shdb: stopping the crawl: SHDB_ACTION is 'tag', but UntaggedPage "
                     "declares no 'near_duplicates' field") == 1  # fmt: skip
    assert "near_duplicates = scrapy.Field()" in log
    assert "Traceback" not in log and log.count("ERROR:") == 1
    assert result["passed"] == [] and held(tmp_path) == set()  # never exported untagged


def test_which_item_classes_can_carry_the_tag() -> None:
    import scrapy

    class Tagged(scrapy.Item):
        url = scrapy.Field()
        near_duplicates = scrapy.Field()

    @dataclasses.dataclass
    class Plain:
        url: str

    assert untaggable(dict) is None and untaggable(Tagged) is None
    assert "UntaggedPage declares no 'near_duplicates'" in (untaggable(UntaggedPage) or "")
    assert "its fields: 'url'" in (untaggable(Plain) or "")


# -- the drop log ---------------------------------------------------------------
def test_each_drop_is_one_info_line_naming_the_dropped_and_the_kept_page(
    tmp_path: Path,
) -> None:
    items = [
        {"url": "https://a.example/original", "text": TEXTS[0]},
        {"url": "https://a.example/other", "text": TEXTS[1]},
        {"url": "https://b.example/copy", "text": TEXTS[0] + "本文转载自网络。"},
        {"url": "https://c.example/copy-again", "text": TEXTS[0]},
    ]
    result, log = crawl(tmp_path, items, "SHDB_ACTION=drop")
    assert [i["url"] for i in result["passed"]] == [i["url"] for i in items[:2]], log[-3000:]
    drops = [line for line in log.splitlines() if "INFO: shdb: dropped" in line]
    assert len(drops) == 2, log[-3000:]
    for line, url in zip(sorted(drops), ["https://b.example/copy", "https://c.example/copy-again"]):
        assert f"dropped {url}: near-duplicate of https://a.example/original (distance" in line
    assert TEXTS[0][:20] not in log  # no item dumped at INFO
