"""The HTML reader: what a reader sees stays, markup and site chrome go."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from simhash_hbase import Fingerprinter, FingerprintParams
from simhash_hbase.text.html import html_to_text, looks_like_html
from simhash_hbase.text.readers import SourceOptions, read_sources

PAGE = """<!DOCTYPE html>
<html><head><title>站点标题</title><meta charset="utf-8">
<style>.nav {{ color: red }} div.class p {{ margin: 0 }}</style>
<script>var x = "<div>"; function click() {{ return 1; }}</script></head>
<body>
<header><a href="/">首页</a> | <a href="/docs">文档</a></header>
<nav class="menu"><ul><li>上一篇</li><li>下一篇</li></ul></nav>
<div role="navigation">当前位置：首页 &gt; 手册</div>
<main><h1>图像处理</h1><p>使用图层可以<b>分离</b>图像的各个部分，&amp;方便编辑。<br>第二行
<p>没有结束标签的段落<img src="a.png" alt="图"><li>列表项
{body}
</main>
<aside>相关文章</aside><div hidden>隐藏</div>
<footer>版权所有 © 2024 某网站</footer>
<script>document.write("广告")</script>
</body></html>"""


def test_body_text_without_markup_scripts_styles_or_navigation() -> None:
    text = html_to_text(PAGE.format(body=""))
    assert text.split("\n") == [
        "图像处理",
        "使用图层可以分离图像的各个部分，&方便编辑。",
        "第二行",
        "没有结束标签的段落",
        "列表项",
    ]


@pytest.mark.parametrize(
    "junk", ["<div class='x'>", "</span></p>", "<!-- <nav> -->", "</nav>", "<svg><text>x"]
)
def test_broken_markup_never_leaks_tags_or_loses_the_body(junk: str) -> None:
    text = html_to_text(PAGE.format(body=junk + "<p>正文结尾</p>"))
    assert "<" not in text and "div" not in text and "class" not in text
    if junk != "<svg><text>x":  # an unclosed <svg> swallows the rest, as in a browser
        assert text.endswith("正文结尾")


def test_pages_of_one_site_are_no_longer_near_duplicates_by_their_markup() -> None:
    fp = Fingerprinter(FingerprintParams(version=2))
    a = PAGE.format(body="<p>" + "图层蒙版用于控制图层的透明度，黑色隐藏白色显示。" * 3 + "</p>")
    b = PAGE.format(body="<p>" + "曲线工具调整图像的色调范围，可以分别修改各个通道。" * 3 + "</p>")
    raw = [t for t, _ in fp.weighted_terms(a)]
    assert {"div", "class", "script"} & set(raw)  # what the raw page's top terms were
    clean = [t for t, _ in fp.weighted_terms(html_to_text(a))]
    assert not {"div", "class", "script", "nav", "首页"} & set(clean)
    assert fp.fingerprint(html_to_text(a)) != fp.fingerprint(html_to_text(b))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<!DOCTYPE html><html></html>", True),
        ("\ufeff\n  <!doctype HTML><p>x</HTML>\n", True),
        ("<!-- generated -->\n<html lang='zh'><p>正文</p></html>", True),
        ("<html></html>", True),
        ("<html>\n一篇讲 HTML 的笔记：<head> 放元数据，<script> 放代码", False),  # no end
        ("plain text <html> later</html>", False),
        ('{"id": "<html>"}', False),
        ("<htmlx></html>", False),
        ("<!-- unclosed comment <html></html>", False),
    ],
)
def test_auto_detection_by_the_start_and_end_of_the_file(text: str, expected: bool) -> None:
    assert looks_like_html(text) is expected


def test_sources_read_html_by_suffix_by_content_and_by_format(tmp_path: Path) -> None:
    page = PAGE.format(body="<p>正文内容</p>")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.html").write_text(page, encoding="utf-8")
    (tmp_path / "site" / "b.txt").write_text(page, encoding="utf-8")  # sniffed
    (tmp_path / "site" / "c.txt").write_text("纯文本 <div> 不是网页", encoding="utf-8")
    got = {r.doc_id: r.text for r in read_sources([str(tmp_path / "site")], SourceOptions())}
    assert got["a.html"] == got["b.txt"] == html_to_text(page)
    assert got["c.txt"] == "纯文本 <div> 不是网页"
    plain = read_sources([str(tmp_path / "site" / "b.txt")], SourceOptions(format="text"))
    assert next(iter(plain)).text == page  # --format text reads it as it is
    stream = io.BytesIO(page.encode())
    (record,) = read_sources(["-"], SourceOptions(format="html"), stdin=stream)
    assert record.text == html_to_text(page)
