"""Main-content extraction: the article, not the template, whatever its length."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.pages import TEMPLATES, article_text, sentence, site_page
from simhash_hbase.text.extract import to_text
from simhash_hbase.text.html import html_to_text

#: Article lengths in characters: short posts (the extraction trap) and long ones.
LENGTHS = st.sampled_from([20, 40, 80, 150, 250, 600, 2000])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(TEMPLATES), LENGTHS, st.integers(0, 2**32))
def test_the_article_of_any_length_and_nothing_of_the_template(
    template: str, length: int, seed: int
) -> None:
    rng = random.Random(seed)
    page = site_page(template, sentence(rng, 3)[:-1], article_text(rng, length), rng)
    text = to_text(page.html)  # auto: the page is detected, main content by default
    lines = text.split("\n")
    assert page.title in lines
    for paragraph in page.paragraphs:
        assert paragraph in lines
    for chrome in page.template_texts:
        assert chrome not in text, (template, chrome)
    assert "<" not in text and "color" not in text


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(TEMPLATES), st.integers(0, 2**32))
def test_raw_keeps_every_visible_text_main_is_a_subset(template: str, seed: int) -> None:
    rng = random.Random(seed)
    page = site_page(template, "标题", article_text(rng, 60), rng)
    raw = html_to_text(page.html, "raw")
    main = html_to_text(page.html, "main")
    for chrome in page.template_texts:
        assert chrome in raw
    assert set(main.split("\n")) <= set(raw.split("\n"))
    assert "广告位招租" not in raw and "请登录后评论" not in raw  # hidden in either mode


def test_two_articles_of_one_template_differ_and_one_article_on_two_templates_matches() -> None:
    rng = random.Random(7)
    a, b = article_text(rng, 120), article_text(rng, 120)
    texts = {
        (name, template): to_text(site_page(template, "标题", body, rng).html)
        for name, body in (("a", a), ("b", b))
        for template in TEMPLATES
    }
    for template in TEMPLATES:
        assert texts["a", template] != texts["b", template]
        assert texts["a", template] == texts["a", "landmarks"]


def test_a_page_of_only_links_keeps_its_links() -> None:
    page = "<html><body><ul><li><a href=/a>第一篇文章</a><li><a href=/b>第二篇</a></ul></body>"
    assert html_to_text(page) == "第一篇文章\n第二篇"


@pytest.mark.parametrize(
    "page",
    [
        "<p>短文。</p>",
        "<html><body>只有一句话</body></html>",
        "<div id=content><p>二十个字以内的短帖子也要保留原文</p></div><div id=footer>版权</div>",
    ],
)
def test_short_pages_give_their_text(page: str) -> None:
    assert html_to_text(page) in ("短文。", "只有一句话", "二十个字以内的短帖子也要保留原文")


def test_a_body_named_like_a_template_and_permalinked_headings_keep_the_article() -> None:
    """mdbook's pages: <body class="sidebar-visible">, headings that are anchor links
    with class="header", a <nav> sidebar of chapter links."""
    page = (
        "<html><body class='sidebar-visible no-js'><nav id='sidebar' class='sidebar'><ol>"
        "<li><a href='a.html'>第一章</a></li><li><a href='b.html'>第二章</a></li></ol></nav>"
        "<div id='page-wrapper' class='page-wrapper'><div class='page'><main>"
        "<h1 id='x'><a class='header' href='#x'>注释</a></h1><p>每个程序都需要注释。</p>"
        "</main></div></div></body></html>"
    )
    assert html_to_text(page) == "注释\n每个程序都需要注释。"


def test_when_every_named_block_is_template_the_tags_alone_decide() -> None:
    page = (
        "<div class='sidebar'><p>整页只有这一段，它写在名为侧栏的容器里。</p></div><nav>导航</nav>"
    )
    assert html_to_text(page) == "整页只有这一段，它写在名为侧栏的容器里。"
