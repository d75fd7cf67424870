"""One conversion of raw input into fingerprint text (issue 29.5): ingest's readers,
a single file or stdin (``query``/``fingerprint --file``), the library's
``to_text`` and ``SimhashIndex.to_text`` give the same text, so the page that was
ingested is the page that is found."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.pages import TEMPLATES, article_text, sentence, site_page
from simhash_hbase import SimhashIndex, to_text
from simhash_hbase.errors import InvalidInput, InvalidSetting
from simhash_hbase.records import Record
from simhash_hbase.text.readers import SourceOptions, read_sources, read_text_file


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(TEMPLATES),
    st.integers(0, 2**32),
    st.sampled_from(["page.html", "page.htm", "page.txt"]),
    st.sampled_from(["main", "raw"]),
)
def test_every_surface_reads_a_page_the_same_way(
    tmp_path_factory: pytest.TempPathFactory, template: str, seed: int, name: str, html: str
) -> None:
    rng = random.Random(seed)
    page = site_page(template, sentence(rng, 3)[:-1], article_text(rng, 80), rng).html
    folder = tmp_path_factory.mktemp("in")
    path = folder / name
    path.write_text(page, encoding="utf-8")
    (record,) = read_sources([str(folder)], SourceOptions(html=html))
    assert isinstance(record, Record)
    expected = to_text(page, html=html)
    assert record.text == expected
    assert read_text_file(str(path), html=html) == expected
    stdin = io.BytesIO(page.encode())
    assert read_text_file("-", stdin=stdin, html=html) == expected  # sniffed on stdin
    assert to_text(page.encode(), "html", html=html) == expected
    assert read_text_file(str(path), fmt="text") == page  # --format text: as it is


def test_query_file_finds_the_ingested_page(tmp_path: Path) -> None:
    rng = random.Random(3)
    pages = {
        f"p{i}.html": site_page(TEMPLATES[i % 5], f"标题{i}", article_text(rng, 300), rng).html
        for i in range(6)
    }
    folder = tmp_path / "site"
    folder.mkdir()
    for name, page in pages.items():
        (folder / name).write_text(page, encoding="utf-8")
    with SimhashIndex.open(str(tmp_path / "ix")) as ix:
        for record in read_sources([str(folder)], SourceOptions(html=ix.params.html)):
            assert isinstance(record, Record)
            ix.add(record.doc_id, record.text)
        for name, page in pages.items():
            found = ix.query(read_text_file(str(folder / name), html=ix.params.html), 0)
            assert name in [m.doc_id for m in found]
            assert ix.query(ix.to_text(page), 0)[0].distance == 0


def test_a_single_text_is_auto_text_or_html_only() -> None:
    with pytest.raises(InvalidSetting, match="single text"):
        read_text_file("-", stdin=io.BytesIO(b"x"), fmt="jsonl")
    with pytest.raises(InvalidInput, match="unknown text format"):
        to_text("x", "csv")


def test_the_command_line_reads_pages_as_ingest_does(tmp_path: Path) -> None:
    from .test_cli import shdb

    rng = random.Random(5)
    site = tmp_path / "site"
    site.mkdir()
    pages = {}
    for i, template in enumerate(TEMPLATES):
        page = site_page(template, f"标题{i}", article_text(rng, 400), rng)
        pages[f"p{i}.html"] = page
        (site / f"p{i}.html").write_text(page.html, encoding="utf-8")
    index = str(tmp_path / "ix")
    assert shdb("ingest", str(site), "-i", index).exit_code == 0
    for name, page in pages.items():
        found = shdb("query", "--file", str(site / name), "-i", index, "-k", "0", "--json")
        assert name in [m["id"] for m in json.loads(found.stdout)["matches"]], found.output
        piped = shdb("query", "--file", "-", "-i", index, "-k", "0", "--json", stdin=page.html)
        assert name in [m["id"] for m in json.loads(piped.stdout)["matches"]]
        article = shdb("fingerprint", page.article, "-i", index).stdout
        assert shdb("fingerprint", "--file", str(site / name), "-i", index).stdout == article
        as_text = shdb("fingerprint", "--file", str(site / name), "--format", "text", "-i", index)
        assert as_text.stdout != article  # --format text: the markup is text too
    dedup = shdb("dedup", str(site), "--json")
    assert dedup.exit_code == 0


def test_the_html_mode_is_recorded_in_the_index(tmp_path: Path) -> None:
    from .test_cli import shdb

    site = tmp_path / "site"
    site.mkdir()
    page = site_page("landmarks", "标题", article_text(random.Random(1), 200), random.Random(2))
    (site / "p.html").write_text(page.html, encoding="utf-8")
    index = str(tmp_path / "ix")
    assert shdb("ingest", str(site), "-i", index, "--html", "raw").exit_code == 0
    with SimhashIndex.open(index, create=False) as ix:
        assert ix.params.html == "raw" and ix.manifest["fingerprint"]["html"] == "raw"
        assert ix.to_text(page.html) == to_text(page.html, html="raw")
    refused = shdb("query", "--file", str(site / "p.html"), "-i", index, "--html", "main")
    assert refused.exit_code == 2 and "html" in refused.stderr
    found = shdb("query", "--file", str(site / "p.html"), "-i", index, "-k", "0")
    assert found.exit_code == 0 and "p.html" in found.stdout
