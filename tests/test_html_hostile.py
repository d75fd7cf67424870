"""Hostile markup (issue 22): any member of each class parses in linear work, and a
page that cannot be read is one skipped record, never the run's end."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.pages import HOSTILE_UNITS, hostile
from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.extract import to_text
from simhash_hbase.text.html import HTML_MODES, MAX_DEPTH, html_to_text, parse
from simhash_hbase.text.readers import SourceOptions, read_sources

KINDS = st.sampled_from(sorted(HOSTILE_UNITS))
FILLER = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


def _tree_size(source: str) -> int:
    """Elements libxml2 built: what the walker visits (twice each, start and end)."""
    root = parse(source)
    return 0 if root is None else sum(1 for _ in root.iter())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(KINDS, st.integers(1, 20_000), FILLER, st.sampled_from(HTML_MODES))
def test_every_member_of_each_class_gives_text_or_one_clear_refusal(
    kind: str, size: int, filler: str, mode: str
) -> None:
    page = hostile(kind, size, filler)
    try:
        text = html_to_text(page, mode)
    except InvalidInput as exc:
        assert f"deeper than {MAX_DEPTH}" in str(exc)  # the only refusal: depth
        return
    assert isinstance(text, str)
    assert "\x00" not in text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(KINDS, st.integers(200, 5_000), FILLER)
def test_work_is_linear_in_the_input_8x_the_input_at_most_8x_the_tree(
    kind: str, size: int, filler: str
) -> None:
    small, large = hostile(kind, size, filler), hostile(kind, 8 * size, filler)
    try:
        big = _tree_size(large)
    except InvalidInput:
        return  # refused: no tree is walked at all
    assert big <= 8 * _tree_size(small) + 16
    assert big <= large.count("<") + 4  # html, head, body: at most one element a tag


@pytest.mark.parametrize("count", [10, 100, 10_000])
def test_the_reported_cases(count: int) -> None:
    assert to_text("<![<![" * count, "html") == ""
    assert to_text("<!---->" * count) == "<!---->" * count  # a .txt: not a page, kept
    assert html_to_text("<!---->" * count + "<p>正文</p>") == "正文"
    assert html_to_text("</div></span>" * count + "<p>正文</p>") == "正文"
    assert html_to_text("<p>正文</p><a " + "x" * count) == "正文"


def test_a_page_nested_too_deeply_is_one_skipped_record_between_good_ones(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.html").write_text("<p>第一篇</p>", encoding="utf-8")
    (tmp_path / "b.html").write_text("<div>" * (MAX_DEPTH + 10) + "深", encoding="utf-8")
    (tmp_path / "c.html").write_bytes(b"<![<![")
    (tmp_path / "d.html").write_text("<p>第四篇</p>", encoding="utf-8")
    got = list(read_sources([str(tmp_path)], SourceOptions()))
    assert [type(r) for r in got] == [Record, BadRecord, Record, Record]
    bad = got[1]
    assert isinstance(bad, BadRecord) and bad.problem is Problem.BAD_HTML
    assert bad.where.endswith("b.html") and "skip it or fix its markup" in bad.reason
    assert [r.text for r in got if isinstance(r, Record)] == ["第一篇", "", "第四篇"]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(
                st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
                max_size=30,
            ),
            st.sampled_from(["<head>", "<script>", "<style>", "<title>", "<!--", "<p>", "&amp;"]),
        ),
        max_size=12,
    )
)
def test_a_text_file_that_starts_with_html_keeps_all_its_text(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    text = "<html>\n" + "".join(parts)
    if "</html" in text.lower():
        return
    path = tmp_path_factory.mktemp("t") / "note.txt"
    path.write_text(text, encoding="utf-8", newline="")
    (record,) = read_sources([str(path)], SourceOptions())
    assert isinstance(record, Record) and record.text == text.removeprefix("\ufeff")


def test_a_page_in_a_declared_or_an_unknown_charset_is_read(tmp_path: Path) -> None:
    # Six characters read as likely text in GB18030, Big5 and EUC-JP alike: a page
    # is declared and judged by a detector too (tests/test_charset.py), and needs
    # a sentence or two of evidence.
    body = "简体中文网页的内容。我们今天讨论天气和公园里的花朵，这是一个测试。"
    page = f"<html><head><meta charset='gb2312'></head><body><p>{body}</p></body></html>"
    (tmp_path / "gbk.html").write_bytes(page.encode("gb18030"))
    (tmp_path / "none.html").write_bytes(page.replace("gb2312", "x").encode("gb18030"))
    declared, unknown = read_sources([str(tmp_path)], SourceOptions())
    assert isinstance(declared, Record) and declared.text == body
    assert isinstance(unknown, Record) and unknown.text == body  # the detector's one reading


@pytest.mark.parametrize("command", ["ingest", "dedup", "idf"])
def test_a_bad_page_is_one_skipped_record_in_every_command(tmp_path: Path, command: str) -> None:
    from .test_cli import shdb
    from .test_index import ARTICLE

    site = tmp_path / "site"
    site.mkdir()
    for name in ("a", "c"):
        (site / f"{name}.html").write_text(f"<html><p>{ARTICLE}</p></html>", encoding="utf-8")
    (site / "b.html").write_text("<div>" * (MAX_DEPTH + 1) + "x", encoding="utf-8")
    args = {
        "ingest": ["ingest", str(site), "-i", str(tmp_path / "ix")],
        "dedup": ["dedup", str(site)],
        "idf": ["idf", "build", str(site), "-o", str(tmp_path / "idf.txt")],
    }[command]
    result = shdb(*args)
    assert result.exit_code == 3, result.output  # some records skipped, the rest done
    assert "b.html" in result.stderr and f"deeper than {MAX_DEPTH}" in result.stderr
    if command == "dedup":
        assert "a.html" in result.stdout and "c.html" in result.stdout
