"""The readable text of an HTML page, for fingerprinting.

Markup, scripts, styles and a site's navigation are the same on every page of a
site: fingerprinted as text they dominate the top terms (``div``, ``class``,
``script``) and make every page a near-duplicate of every other. What is left is
the text a reader sees in the page's body, one block element per line.
"""

from __future__ import annotations

import html.parser
import re

#: Elements whose whole content is dropped: code, metadata, and the parts of a page
#: a site repeats on every page (navigation, header, footer, sidebars, forms).
SKIPPED = frozenset(
    {
        "script", "style", "noscript", "template", "head", "title", "svg", "math",
        "nav", "header", "footer", "aside", "form", "button", "select", "iframe",
        "object", "canvas",
    }
)  # fmt: skip
#: ARIA roles that mark the same repeated parts on a plain <div>.
SKIPPED_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
)
#: Elements that end a line of text (a block in the rendered page).
BLOCKS = frozenset(
    {
        "p", "div", "br", "li", "tr", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4",
        "h5", "h6", "pre", "blockquote", "section", "article", "main", "table", "ul",
        "ol", "dl", "hr", "figcaption", "caption",
    }
)  # fmt: skip
#: Elements that never have an end tag: they must not open a skipped region.
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr"}
)  # fmt: skip
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_HTML_START = re.compile(
    r"\A\ufeff?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b", re.IGNORECASE | re.DOTALL
)


class _TextExtractor(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._open: list[tuple[str, bool]] = []  # (tag, skipped) of open non-void elements
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            if tag in BLOCKS and not self._skipping:
                self.parts.append("\n")
            return
        role = next((v for k, v in attrs if k == "role"), None)
        hidden = any(k == "hidden" or (k == "aria-hidden" and v == "true") for k, v in attrs)
        skip = tag in SKIPPED or hidden or (role or "").lower() in SKIPPED_ROLES
        self._open.append((tag, skip))
        self._skipping += skip
        if tag in BLOCKS and not self._skipping:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in BLOCKS and not self._skipping:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        # Close up to the matching open element: browsers forgive missing end tags
        # (<li>, <p>), and a stray end tag must not end a skipped region early.
        for depth in range(len(self._open) - 1, -1, -1):
            if self._open[depth][0] == tag:
                for _, skipped in self._open[depth:]:
                    self._skipping -= skipped
                del self._open[depth:]
                break
        if tag in BLOCKS and not self._skipping:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(source: str) -> str:
    """The visible body text of ``source``, one block per line, spaces collapsed."""
    parser = _TextExtractor()
    parser.feed(source)
    parser.close()
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)


def looks_like_html(head: str) -> bool:
    """True when a file starts like an HTML document (``<!DOCTYPE html`` or ``<html``),
    after an optional BOM, whitespace and comments: what auto-detection goes by."""
    return _HTML_START.match(head) is not None
