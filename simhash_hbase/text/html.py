"""The text of an HTML page for fingerprinting: the article, or all visible text.

Markup, scripts, styles and a site's template are the same on every page of a
site: fingerprinted as text they dominate the top terms and make distinct pages
of one site near-duplicates, while a repost of an article on another site looks
different. So by default (``main``) only the main content is kept: navigation,
headers, footers, sidebars, hidden blocks and link lists ("related articles")
are removed, and an ``<article>``/``<main>`` element, when there is one, bounds
the text. ``raw`` keeps every visible text. No length minimum applies: a
20-character post gives its 20 characters, never its template (the trap of
extractors that fall back to the whole page below a minimum size).

Parsing is libxml2's (lxml): an HTML5 tokenizer in C whose work is linear in the
input, with the element depth capped (:data:`MAX_DEPTH`), which bounds the tree
builder's work per tag. lexbor (selectolax) was measured too: faster on real
pages, but its tree builder is quadratic in the nesting depth (40,000 nested
``<div>`` take 1.4 s, 8x that input 90x the time); docs/html.md has the figures.
Nothing here matches markup with regular expressions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from simhash_hbase.errors import InvalidInput

if TYPE_CHECKING:
    from lxml import etree

#: ``main``: the article (the default); ``raw``: every visible text of the page.
HTML_MODES = ("main", "raw")
DEFAULT_HTML_MODE = "main"
#: libxml2's element depth limit with ``huge_tree`` (XML_PARSE_HUGE); a page nested
#: deeper is refused (its text past that depth would be lost).
MAX_DEPTH = 2048

#: Never visible: code, metadata, embedded objects, form controls.
INVISIBLE = frozenset(
    {
        "script", "style", "noscript", "template", "head", "title", "svg", "math",
        "iframe", "object", "embed", "canvas", "button", "select", "option", "datalist",
        "textarea", "input", "audio", "video", "map", "dialog",
    }
)  # fmt: skip
#: The parts of a page that a site repeats on every page (``main`` mode drops them).
TEMPLATE_TAGS = frozenset({"nav", "aside", "menu", "form"})
#: Template only outside an ``<article>``: an article's own header holds its title.
TEMPLATE_OUTSIDE_ARTICLE = frozenset({"header", "footer"})
#: ARIA roles that mark the same repeated parts on any element.
TEMPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar",
     "toolbar", "dialog", "alert"}
)  # fmt: skip
#: class/id words that name template blocks (whole words of the attribute value).
TEMPLATE_WORDS = frozenset(
    {
        "nav", "navi", "navbar", "navigation", "menu", "menubar", "submenu", "sidebar",
        "side", "aside", "footer", "foot", "breadcrumb", "breadcrumbs", "crumbs", "crumb",
        "related", "relate", "recommend", "recommended", "popular", "hot", "hotnews",
        "share", "sharing", "social", "comment", "comments", "copyright", "ad", "ads",
        "advert", "advertisement", "banner", "widget", "widgets", "toolbar", "pagination",
        "pager", "pages", "tags", "tagcloud", "login", "search", "subscribe", "topbar",
        "links", "friendlink", "friendlinks", "sitemap", "disclaimer", "cookie", "modal",
        "popup", "rank", "ranking", "toc", "header", "masthead", "logo",
    }
)  # fmt: skip
#: class/id word starts that name template blocks (``sidebarLeft``, ``footer_wrap``).
TEMPLATE_STEMS = ("sidebar", "footer", "navbar", "breadcrumb", "copyright", "related", "recommend")
#: What ``main`` recognises as template, most first: "names" (elements, roles and
#: class/id words), "tags" (elements and roles), "none". A level that leaves no text
#: falls back to the next.
TEMPLATE_LEVELS = ("names", "tags", "none")
#: Elements whose class/id words never make them template (the page or the article).
NEVER_NAMED = frozenset({"html", "body", "main", "article"})
#: class words of hidden blocks (CSS frameworks' conventions).
HIDDEN_WORDS = frozenset({"hidden", "hide", "d-none", "sr-only", "visually-hidden", "invisible"})
#: Elements that mark the article itself.
ARTICLE_TAGS = frozenset({"article", "main"})
ARTICLE_ROLES = frozenset({"main", "article"})
#: Elements that end a line of text (a block in the rendered page).
BLOCKS = frozenset(
    {
        "p", "div", "br", "li", "tr", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4",
        "h5", "h6", "pre", "blockquote", "section", "article", "main", "table", "ul",
        "ol", "dl", "hr", "figcaption", "caption", "header", "footer", "nav", "aside",
        "address", "details", "summary", "figure", "center", "body",
    }
)  # fmt: skip
#: ``main`` drops a block when at least this share of its characters is link text.
LINK_DENSITY = 0.5
#: A heading this short right before a link list is the list's caption.
CAPTION_CHARS = 12
#: Elements whose text is a heading.
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "b", "strong", "th", "dt", "caption"})
#: How much of the start and the end of a text :func:`looks_like_html` reads.
SNIFF_CHARS = 4096

#: Charsets a page may declare that are read as their superset, as browsers do.
SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "big5": "big5hkscs"}
#: How far into a page :func:`declared_charset` looks (the HTML standard's 1024 bytes).
CHARSET_BYTES = 1024


@cache
def _parser() -> etree.HTMLParser:
    """One libxml2 HTML parser per process (lxml loads on first use: ~20 ms)."""
    from lxml import etree

    return etree.HTMLParser(
        encoding="utf-8", huge_tree=True, remove_comments=True, remove_pis=True, no_network=True
    )


@dataclass
class Block:
    """One line of the rendered page: its text, how much of it is link text, and
    whether it lies inside the article element."""

    text: str
    linked: int  # characters inside links
    headed: int  # characters inside headings and bold text
    in_article: bool

    @property
    def link_dense(self) -> bool:
        return self.linked >= LINK_DENSITY * len(self.text.replace(" ", ""))

    @property
    def caption(self) -> bool:
        """A short heading (e.g. "热门文章"): what a link list is captioned with."""
        chars = len(self.text.replace(" ", ""))
        return chars <= CAPTION_CHARS and self.headed >= chars


def html_to_text(source: str, mode: str = DEFAULT_HTML_MODE) -> str:
    """The text of the page ``source``, one block per line, spaces collapsed:
    the article (``main``) or every visible text (``raw``).

    ``main`` removes the template at the first of :data:`TEMPLATE_LEVELS` that leaves
    some text: a page whose ``<body class="sidebar-visible">`` names a template word
    still gives its text, without its ``<nav>``."""
    check_mode(mode)
    root = parse(source)
    if root is None:
        return ""
    blocks: list[Block] = []
    for level in TEMPLATE_LEVELS if mode == "main" else ("none",):
        blocks = _blocks(root, level)
        if mode == "main":
            blocks = main_blocks(blocks)
        if blocks:
            break
    return "\n".join(b.text for b in blocks)


def check_mode(mode: str) -> None:
    if mode not in HTML_MODES:
        raise InvalidInput(f"unknown HTML mode {mode!r}; one of: {', '.join(HTML_MODES)}")


def main_blocks(blocks: list[Block]) -> list[Block]:
    """The article's blocks: inside the article element when there is one, without
    link lists and their captions ("热门文章"). A page made only of links keeps them
    (its text is the links)."""
    article = [b for b in blocks if b.in_article]
    scope = article or blocks
    dense = [b.link_dense for b in scope] + [False, False]
    kept = [
        b
        for i, b in enumerate(scope)
        if not dense[i] and not (dense[i + 1] and dense[i + 2] and b.caption)
    ]
    return kept or scope


def parse(source: str) -> etree._Element | None:
    """libxml2's tree of ``source`` (None: no element at all, e.g. only a comment)."""
    from lxml import etree

    parser = _parser()
    root = etree.fromstring(source.encode("utf-8", "surrogatepass"), parser)
    for error in parser.error_log:
        if error.type_name == "ERR_RESOURCE_LIMIT":
            raise InvalidInput(
                f"the page nests elements deeper than {MAX_DEPTH} levels ({error.message}); "
                "no browser renders such a page: skip it or fix its markup"
            )
    return root


def _blocks(root: etree._Element, level: str) -> list[Block]:
    """The page's visible blocks in document order, without the template parts that
    ``level`` (:data:`TEMPLATE_LEVELS`) recognises."""
    walker = _Walker(level)
    walker.walk(root)
    return walker.blocks


class _Walker:
    """One pass over the tree's start and end events (in C); Python runs per element."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.blocks: list[Block] = []
        self._parts: list[str] = []
        self._linked = 0
        self._headed = 0
        self._links = 0  # open <a> elements
        self._headings = 0  # open heading elements
        self._article = 0  # open article elements (<article>, <main>, role=main ...)
        self._article_tags = 0  # open <article> elements
        self._opened: list[str] = []  # per open element: what it opened (_ARTICLE, _LINK)

    def walk(self, root: etree._Element) -> None:
        from lxml import etree

        events = etree.iterwalk(root, events=("start", "end"))
        for event, el in events:
            tag = el.tag
            if not isinstance(tag, str):
                continue  # an entity reference: comments and PIs are never parsed
            if event == "start":
                items = el.items()
                attrs = dict(items) if items else _NO_ATTRS
                if self._skipped(tag, attrs):
                    events.skip_subtree()
                    self._opened.append("")  # its end event still comes
                    continue
                self._open(el, tag, attrs)
            else:
                self._close(el, tag)

    def _open(self, el: etree._Element, tag: str, attrs: dict[str, str]) -> None:
        if tag in BLOCKS:
            self._flush()
        opens_article = tag in ARTICLE_TAGS or bool(
            attrs
            and (
                _any_word(attrs.get("role"), ARTICLE_ROLES)
                or attrs.get("itemprop") == "articleBody"
            )
        )
        opened = _ARTICLE if opens_article else ""
        # A link to elsewhere; an anchor within the page (a heading's "#section"
        # permalink) is the page's own text.
        link = tag == "a" and not attrs.get("href", "").startswith("#")
        if link:
            opened += _LINK
        if tag in HEADINGS:
            opened += _HEADING
        self._article += opens_article
        self._article_tags += tag == "article"
        self._links += link
        self._headings += tag in HEADINGS
        self._opened.append(opened)
        self._text(el.text)

    def _close(self, el: etree._Element, tag: str) -> None:
        opened = self._opened.pop()
        if opened:
            if _ARTICLE in opened:
                self._flush()
                self._article -= 1
                self._article_tags -= tag == "article"
            self._links -= _LINK in opened
            self._headings -= _HEADING in opened
        if tag in BLOCKS:
            self._flush()
        self._text(el.tail)

    def _text(self, text: str | None) -> None:
        if text:
            self._parts.append(text)
            if self._links or self._headings:
                chars = len("".join(text.split()))
                self._linked += chars if self._links else 0
                self._headed += chars if self._headings else 0

    def _flush(self) -> None:
        if self._parts:
            text = " ".join("".join(self._parts).split())
            if text:
                self.blocks.append(Block(text, self._linked, self._headed, self._article > 0))
            self._parts.clear()
        self._linked = self._headed = 0

    def _skipped(self, tag: str, attrs: dict[str, str]) -> bool:
        if tag in INVISIBLE or (attrs and _hidden(attrs)):
            return True
        if self.level == "none":
            return False
        if tag in TEMPLATE_TAGS or (tag in TEMPLATE_OUTSIDE_ARTICLE and not self._article_tags):
            return True
        if not attrs:
            return False
        if _any_word(attrs.get("role"), TEMPLATE_ROLES):
            return True
        # Names mark template containers; on inline elements they style text
        # (<a class="header"> is a heading's permalink).
        named = tag in BLOCKS and tag not in NEVER_NAMED
        return self.level == "names" and named and _template_named(attrs)


_NO_ATTRS: dict[str, str] = {}
_ARTICLE, _LINK, _HEADING = "A", "L", "H"


def _words(value: str | None) -> list[str]:
    """An attribute value as lower-case words: split at anything not a letter, digit
    or ``-``, and each hyphenated word also in its parts (``post-sidebar``)."""
    if not value:
        return []
    cleaned = "".join(c if c.isalnum() or c == "-" else " " for c in value.lower())
    words = cleaned.split()
    return words + [part for w in words if "-" in w for part in w.split("-") if part]


def _any_word(value: str | None, words: frozenset[str]) -> bool:
    return bool(value) and not words.isdisjoint(value.lower().split())  # type: ignore[union-attr]


def _template_named(attrs: dict[str, str]) -> bool:
    words = _words(attrs.get("class")) + _words(attrs.get("id"))
    return any(w in TEMPLATE_WORDS or w.startswith(TEMPLATE_STEMS) for w in words)


def _hidden(attrs: dict[str, str]) -> bool:
    if "hidden" in attrs or attrs.get("aria-hidden") == "true":
        return True
    style = attrs.get("style")
    if style:
        flat = "".join(style.lower().split())
        if "display:none" in flat or "visibility:hidden" in flat:
            return True
    return _any_word(attrs.get("class"), HIDDEN_WORDS)


def declared_charset(raw: bytes) -> str | None:
    """The charset a page declares in a ``<meta>`` of its first 1024 bytes (None: none)."""
    root = parse(raw[:CHARSET_BYTES].decode("latin-1"))
    for meta in () if root is None else root.iter("meta"):
        charset = meta.get("charset")
        if charset is None and (meta.get("http-equiv") or "").lower() == "content-type":
            content = meta.get("content") or ""
            at = content.lower().find("charset=")
            charset = content[at + 8 :].split(";")[0] if at >= 0 else None
        if charset and charset.strip(" \t\"'"):
            name = charset.strip(" \t\"'").lower()
            return SUPERSETS.get(name, name)
    return None


def looks_like_html(text: str) -> bool:
    """True when ``text`` is an HTML document by its content: it starts like one
    (``<!DOCTYPE html`` or ``<html``, after an optional BOM, whitespace and comments)
    and ends like one (``</html>`` in its last :data:`SNIFF_CHARS` characters).

    A plain text that merely starts with ``<html>`` (a note about HTML) is read as
    text, whole: reading it as a page could lose its text to the markup rules."""
    rest = text[:SNIFF_CHARS].lstrip("\ufeff").lstrip()
    while rest.startswith("<!--"):
        end = rest.find("-->", 4)
        if end < 0:
            return False
        rest = rest[end + 3 :].lstrip()
    lowered = rest[:15].lower()
    if lowered.startswith("<!doctype"):
        starts = lowered[9:].lstrip().startswith("html")
    else:
        starts = lowered.startswith("<html") and (len(lowered) == 5 or lowered[5] in " \t\r\n/>")
    return starts and "</html" in text[-SNIFF_CHARS:].lower()
