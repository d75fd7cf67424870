"""A generated crawl-like web site, served on 127.0.0.1, for the Scrapy pipeline
(its tests and its benchmark section).

Pages are Chinese articles inside site templates (navigation, a sidebar of other
articles' titles, a footer). Besides the originals the site holds the copies a crawl
meets: reposts on another site's template, small edits, Traditional-Chinese copies
and distinct pages of one template and topic. Each page's kind and the original it
copies are known, so a test can score what the pipeline found.

Articles are sentences of words drawn from jieba's own dictionary, weighted by its
frequencies: real words, distinct per article, with no corpus to ship or fetch.
"""

from __future__ import annotations

import asyncio
import functools
import mimetypes
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import httptools
import jieba
import opencc
import uvloop

TEMPLATES = ("news", "forum", "blog")
PUNCT = "，，，、；"


@dataclass(frozen=True)
class Page:
    path: str  # below the site root, e.g. "news/a12.html"
    kind: str  # original | repost | edit | traditional | sibling
    source: str | None  # path of the page it copies, None for an original or a sibling
    title: str
    body: str


@functools.cache
def _vocabulary() -> tuple[list[str], list[int]]:
    words: list[str] = []
    weights: list[int] = []
    dict_path = Path(jieba.__file__).with_name("dict.txt")
    for line in dict_path.read_text("utf-8").splitlines():
        word, freq, *_ = line.split(" ")
        if 2 <= len(word) <= 4 and int(freq) >= 50:
            words.append(word)
            weights.append(int(freq))
    return words, weights


def _sentence(rng: random.Random, topic: list[str]) -> str:
    words, weights = _vocabulary()
    picked = rng.choices(words, weights=weights, k=rng.randint(8, 16))
    picked[rng.randrange(len(picked))] = rng.choice(topic)
    parts = [picked[0]]
    for word in picked[1:]:
        parts.append(rng.choice(PUNCT) + word if rng.random() < 0.15 else word)
    return "".join(parts) + "。"


def _article(rng: random.Random, topic: list[str], sentences: int) -> str:
    return "\n".join(_sentence(rng, topic) for _ in range(sentences))


def _edit(rng: random.Random, body: str) -> str:
    """A small edit: one sentence replaced, one number-like token added."""
    lines = body.split("\n")
    i = rng.randrange(len(lines))
    lines[i] = lines[i][:-1] + f"，截至{rng.randint(2015, 2025)}年。"
    return "\n".join(lines)


def render(page: Page, template: str, sidebar: list[str]) -> str:
    """One page in its site's template: the article is a minority of the markup."""
    nav = "".join(f'<li><a href="/{t}/index.html">{t}频道首页</a></li>' for t in TEMPLATES)
    side = "".join(f"<li><a href='#'>{title}</a></li>" for title in sidebar)
    paragraphs = "".join(f"<p>{line}</p>" for line in page.body.split("\n"))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{page.title}</title></head>"
        f"<body class='{template}'><header><nav><ul>{nav}</ul></nav></header>"
        f"<div class='wrap'><aside><h3>热门文章</h3><ul>{side}</ul></aside>"
        f"<article><h1>{page.title}</h1>{paragraphs}</article></div>"
        f"<footer>版权所有 {template} 网站 · 联系我们 · 隐私政策 · 网站地图</footer></body></html>"
    )


def build_pages(originals: int, seed: int = 7) -> list[Page]:
    """``originals`` articles and one copy of each, of a kind chosen in turn."""
    rng = random.Random(seed)
    words, _ = _vocabulary()
    to_trad = opencc.OpenCC("s2t")
    pages: list[Page] = []
    kinds = ("repost", "edit", "traditional", "sibling")
    for n in range(originals):
        home = TEMPLATES[n % len(TEMPLATES)]
        topic = rng.sample(words, 3)
        title = "".join(topic) + f"之{n}"
        body = _article(rng, topic, rng.randint(6, 14))
        original = Page(f"{home}/a{n}.html", "original", None, title, body)
        pages.append(original)
        kind = kinds[n % len(kinds)]
        other = TEMPLATES[(n + 1) % len(TEMPLATES)]
        if kind == "repost":
            pages.append(Page(f"{other}/r{n}.html", kind, original.path, title, body))
        elif kind == "edit":
            pages.append(Page(f"{home}/e{n}.html", kind, original.path, title, _edit(rng, body)))
        elif kind == "traditional":
            copy = Page(f"{other}/t{n}.html", kind, original.path, to_trad.convert(title),
                        to_trad.convert(body))  # fmt: skip
            pages.append(copy)
        else:  # a distinct page of the same template and topic: never a copy
            sibling_body = _article(rng, topic, rng.randint(6, 14))
            pages.append(Page(f"{home}/s{n}.html", kind, None, title + "（续）", sibling_body))
    return pages


def write_site(root: Path, pages: list[Page], seed: int = 7) -> None:
    """The pages in their templates, and one index page per template linking its pages."""
    rng = random.Random(seed)
    titles = [p.title for p in pages]
    by_template: dict[str, list[Page]] = {t: [] for t in TEMPLATES}
    for page in pages:
        template = page.path.split("/")[0]
        by_template[template].append(page)
        target = root / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(page, template, rng.sample(titles, 8)), "utf-8")
    links = []
    for template, members in by_template.items():
        items = "".join(f'<li><a href="/{p.path}">{p.title}</a></li>' for p in members)
        (root / template / "index.html").write_text(
            f"<html><body><ul>{items}</ul></body></html>", "utf-8"
        )
        links.append(f'<a href="/{template}/index.html">{template}</a>')
    (root / "index.html").write_text(f"<html><body>{''.join(links)}</body></html>", "utf-8")


class StaticSite(asyncio.Protocol):
    """One HTTP/1.1 connection to the site: every response pre-rendered, status line,
    headers and body in one ``bytes``, sent whole as its request completes.

    A site stands for servers elsewhere, whose CPU is not the crawler's: the one on
    this machine should cost the crawl's two cores as little as one can. So the site's
    files are read and rendered once, at start; a request is parsed by httptools (the
    C parser uvicorn uses), looked up in a dict and answered with one write, on uvloop,
    with keep-alive and ``TCP_NODELAY`` (uvloop sets it on every TCP connection, as asyncio does).
    uvicorn with an ASGI app cost 0.04 to 0.05 ms of CPU a page, and Python's threaded
    ``http.server`` 0.17 ms (a quarter of what ``shdb ingest`` spends on a page); that
    one also needed ``TCP_NODELAY`` set by hand (its headers and body went in two sends,
    and Nagle's algorithm held every body 40 ms for the crawler's delayed ACK)."""

    def __init__(self, responses: dict[bytes, bytes]) -> None:
        self._responses = responses
        self._parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._transport: Any = None  # an asyncio.Transport (uvloop's does not subclass it)

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._transport.write(_response(400, b"bad request", b"text/plain", close=True))
            self._transport.close()

    def on_url(self, url: bytes) -> None:  # httptools' callback, maybe in pieces
        self._url += url

    def on_message_complete(self) -> None:  # httptools' callback: one whole request
        path = unquote_to_bytes(httptools.parse_url(self._url).path)
        self._url = b""
        self._transport.write(self._responses.get(path) or _NOT_FOUND)
        if not self._parser.should_keep_alive():
            self._transport.close()


def _response(status: int, body: bytes, kind: bytes, close: bool = False) -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
    connection = b"connection: close\r\n" if close else b""
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%s\r\n"
        % (status, reason, kind, len(body), connection)
    ) + body


_NOT_FOUND = _response(404, b"not found", b"text/plain")


def rendered(root: Path) -> dict[bytes, bytes]:
    """Every file below ``root`` as its whole HTTP response, by URL path."""
    responses = {}
    for target in sorted(root.rglob("*")):
        if target.is_file():
            kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            path = "/" + target.relative_to(root).as_posix()
            responses[path.encode()] = _response(200, target.read_bytes(), kind.encode())
    return responses


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    with serving(root) as (url, _):
        yield url


@contextmanager
def serving(root: Path) -> Iterator[tuple[str, int]]:
    """:func:`serve`, yielding the server's pid too. The server is a process in a
    session of its own: a site stands for servers elsewhere, and with the kernel's
    autogroup scheduling a thread or child of the crawler's session would take its
    CPU from the crawler's share of a busy machine (its CPU is measured apart)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.site", str(root)],
        stdin=subprocess.PIPE,  # closed when this process ends, however it ends
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url:
            raise RuntimeError(f"the site server did not start (exit code {proc.wait()})")
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    """``python -m benchmarks.site ROOT``: serve ROOT, print the base URL, until killed
    or until its stdin ends (the test or benchmark that started it is gone: a server
    in a session of its own would otherwise outlive a killed test run)."""
    uvloop.run(_serve(Path(sys.argv[1])))


async def _serve(root: Path) -> None:
    responses = rendered(root)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StaticSite(responses), "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the starter is gone
    server.close()


if __name__ == "__main__":
    main()
