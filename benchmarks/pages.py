"""Generated web pages: an article inside a site template, and hostile markup.

The templates are the shapes crawls meet: HTML5 landmarks, a ``div`` layout named
by classes, a table layout of old portals, a Bootstrap-style grid with widgets and
hidden blocks, and one with no hints at all (only link density tells the template
from the article). Each has navigation, a sidebar of other articles' titles (links)
and a footer; the article is a title and paragraphs. Used by the tests
(tests/test_html_main.py) and the HTML benchmark (benchmarks/html_pages.py).
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass

TEMPLATES = ("landmarks", "classes", "table", "grid", "bare")

#: Words of the generated Chinese: common words, so that segmentation is realistic.
_WORDS_TEXT = (
    "我们 今天 发布 新版 软件 用户 可以 通过 设置 页面 修改 图像 颜色 文件 保存 "
    "网络 服务器 数据 安全 问题 已经 修复 更新 系统 性能 提高 城市 交通 天气 "
    "学校 学生 老师 考试 成绩 医院 医生 病人 健康 经济 市场 价格 公司 产品 "
    "研究 发现 科学家 实验 结果 表明 方法 有效 政府 政策 发展 计划 项目 完成"
)
_WORDS = tuple(_WORDS_TEXT.split(" "))
#: Navigation labels of the templates.
_NAV = ("首页", "新闻", "科技", "体育", "财经", "关于我们")


def sentence(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(_WORDS) for _ in range(words)) + "。"


def article_text(rng: random.Random, chars: int) -> list[str]:
    """Paragraphs of about ``chars`` characters in all (at least one sentence)."""
    paragraphs: list[str] = []
    total = 0
    while total < chars:
        para = "".join(sentence(rng, rng.randint(3, 8)) for _ in range(rng.randint(1, 4)))
        para = para[: max(chars - total, 8)]
        paragraphs.append(para)
        total += len(para)
    return paragraphs


@dataclass(frozen=True)
class Page:
    html: str
    title: str
    paragraphs: tuple[str, ...]
    template_texts: tuple[str, ...]  # navigation, sidebar and footer texts

    @property
    def article(self) -> str:
        return "\n".join((self.title, *self.paragraphs))


def site_page(template: str, title: str, paragraphs: list[str], rng: random.Random) -> Page:
    """The article (``title``, ``paragraphs``) inside the site template ``template``."""
    nav = [rng.choice(_NAV) + str(i) for i in range(6)]
    side = [sentence(rng, 4)[:-1] for _ in range(rng.randint(5, 10))]
    foot = f"版权所有 © {rng.randint(2000, 2025)} 某某网 京ICP备{rng.randint(10000, 99999)}号"
    esc = html.escape
    links = "".join(f'<li><a href="/{i}">{esc(t)}</a></li>' for i, t in enumerate(nav))
    related = "".join(f'<li><a href="/p/{i}.html">{esc(t)}</a></li>' for i, t in enumerate(side))
    body = "".join(f"<p>{esc(p)}</p>" for p in paragraphs)
    h1 = f"<h1>{esc(title)}</h1>"
    if template == "landmarks":
        page = (
            f"<header><a href='/'>某某网</a><nav><ul>{links}</ul></nav></header>"
            f"<main><article>{h1}{body}</article></main>"
            f"<aside><h3>热门文章</h3><ul>{related}</ul></aside>"
            f"<footer><p>{esc(foot)}</p></footer>"
        )
    elif template == "classes":
        page = (
            f"<div id='header'><div class='logo'>某某网</div><ul class='menu'>{links}</ul></div>"
            f"<div class='breadcrumb'><a href='/'>首页</a> &gt; <a href='/n'>新闻</a></div>"
            f"<div class='content'><div class='post'>{h1}<div class='post-body'>{body}</div></div>"
            f"<div class='related-posts'><h4>相关阅读</h4><ul>{related}</ul></div></div>"
            f"<div class='sidebar'><h3>热门排行</h3><ul>{related}</ul></div>"
            f"<div id='footer'>{esc(foot)}</div>"
        )
    elif template == "table":
        page = (
            "<table width='100%'><tr><td colspan=2><table><tr>"
            + "".join(f"<td><a href='/{i}'>{esc(t)}</a></td>" for i, t in enumerate(nav))
            + f"</tr></table></td></tr><tr><td width='200' valign='top'><b>最新文章</b>"
            f"<ul>{related}</ul></td><td valign='top'>{h1}{body}</td></tr>"
            f"<tr><td colspan=2 class='copyright'>{esc(foot)}</td></tr></table>"
        )
    elif template == "grid":
        page = (
            f"<nav class='navbar navbar-expand'><ul class='navbar-nav'>{links}</ul></nav>"
            f"<div class='modal hidden'><p>请登录后评论本文内容</p></div>"
            f"<div class='container'><div class='row'><div class='col-md-8'>{h1}{body}"
            f"<div class='share-buttons'>分享到：<a>微博</a><a>微信</a></div>"
            f"<div style='display: none'>广告位招租请联系我们</div></div>"
            f"<div class='col-md-4'><div class='widget'><h3>推荐阅读</h3><ul>{related}</ul>"
            f"</div></div></div></div><div class='site-footer'>{esc(foot)}</div>"
        )
    elif template == "bare":  # no hint at all: link density alone
        page = (
            f"<div><div>{''.join(f'<a href=/{i}>{esc(t)}</a> ' for i, t in enumerate(nav))}</div>"
            f"<div>{h1}{body}</div><div><ul>{related}</ul></div></div>"
        )
    else:
        raise ValueError(f"unknown template {template!r}")
    document = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
        f"{esc(title)} - 某某网</title><script>var t = '<div>';</script>"
        f"<style>.a {{color: red}}</style></head><body>{page}</body></html>"
    )
    template_texts = (*nav, *side) + ((foot,) if template != "bare" else ())
    return Page(document, title, tuple(paragraphs), template_texts)


#: Hostile markup classes (issue 22): a unit repeated to any size.
HOSTILE_UNITS = {
    "bogus-comment": "<![",
    "empty-comment": "<!---->",
    "stray-end-tags": "</div></span></p></a>",
    "unclosed-tag": "<a x",
    "nested-divs": "<div>",
    "nested-inline": "<b><i>",
    "formatting-misnest": "<a><b><i><u>x</p>",
    "table-soup": "<table><tr><td>",
    "huge-attribute": "x",
    "nul-and-bad-chars": "<p>\x00\ufffe\ud800",
    "open-comment": "<!--",
    "cdata": "<![CDATA[",
}


def hostile(kind: str, size: int, filler: str = "正文") -> str:
    """A page of ``kind`` about ``size`` characters long."""
    unit = HOSTILE_UNITS[kind]
    if kind == "huge-attribute":
        return f'<p title="{unit * size}">{filler}</p>'
    if kind == "unclosed-tag":
        return unit + " y" * (size // 2)
    return (unit + filler) * (size // (len(unit) + len(filler)) + 1)
