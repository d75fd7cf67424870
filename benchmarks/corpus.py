"""Chinese documents for the benchmarks and the quality evaluation.

Real ones: Debian's ``manpages-zh`` (man pages, simplified and traditional
Chinese) and ``gimp-help-zh-cn`` (the GIMP manual, HTML) are fetched with
``apt-get download`` and turned into plain text once; the result is cached as
JSON Lines in ``$SHDB_CORPUS_DIR`` (default ``~/.cache/shdb-corpus``).

Generated ones, for smoke runs (no network, seconds): man-page-shaped documents
whose words are drawn from jieba's own dictionary by frequency, with the structure
the evaluation relies on (a NAME line, hard-wrapped paragraphs, numbers, options,
zh_CN/zh_TW twins, a few English pages). Their numbers mean nothing.

    python -m benchmarks.corpus         # fetch, extract, print a summary
"""

from __future__ import annotations

import gzip
import html.parser
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

PACKAGES = ("manpages-zh", "gimp-help-zh-cn")
CACHE = Path(os.environ.get("SHDB_CORPUS_DIR", Path.home() / ".cache" / "shdb-corpus"))
MIN_CHARS = 200  # below this a "document" is a redirect stub or a table of contents
_GROFF_ESCAPE = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\[&e\-|^0 ]|\\s[-+]?\d")
_SPACES = re.compile(r"[ \t\u3000]+")


def _run(cmd: list[str], cwd: Path) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr.strip()}")


def _download(package: str, into: Path) -> Path:
    try:
        _run(["apt-get", "download", package], into)
    except RuntimeError:
        _run(["apt-get", "update", "-qq"], into)  # a fresh machine has no package lists
        _run(["apt-get", "download", package], into)
    (deb,) = into.glob(f"{package}_*.deb")
    return deb


_GROFF_SKIP = ('.\\"', "'\\\"", ".so ", ".if", ".ie", ".el", ".nr", ".ds", ".tr", ".ne", ".na")


def _groff_to_text(source: str) -> str:
    lines, in_macro = [], False
    for line in source.splitlines():
        if line.startswith(".de"):
            in_macro = True  # a macro definition, up to a line "..": not text
        if in_macro:
            in_macro = not line.startswith("..")
            continue
        if line.startswith(_GROFF_SKIP):
            continue  # comments (licence boilerplate), redirects, requests
        if line.startswith("."):
            parts = line.split(None, 1)
            line = parts[1].strip('"') if len(parts) > 1 else ""
        lines.append(_GROFF_ESCAPE.sub("", line))
    return _SPACES.sub(" ", "\n".join(line.strip() for line in lines if line.strip()))


class _HtmlText(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag in ("p", "div", "br", "li", "tr", "h1", "h2", "h3", "pre"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _html_to_text(source: str) -> str:
    parser = _HtmlText()
    parser.feed(source)
    text = "".join(parser.parts)
    return "\n".join(_SPACES.sub(" ", x).strip() for x in text.splitlines() if x.strip())


def _documents(package: str, root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".gz" and "/man/" in f"/{rel}":
            text = _groff_to_text(gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
        elif path.suffix == ".html":
            text = _html_to_text(path.read_text("utf-8", "replace"))
        else:
            continue
        if len(text) >= MIN_CHARS:
            yield f"{package}/{rel}", text


def _extract(package: str) -> Path:
    out = CACHE / f"{package}.jsonl"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        deb = _download(package, Path(tmp))
        root = Path(tmp) / "root"
        _run(["dpkg-deb", "-x", str(deb), str(root)], Path(tmp))
        partial = out.with_suffix(".tmp")
        with partial.open("w", encoding="utf-8") as f:
            for doc_id, text in _documents(package, root):
                f.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
        partial.rename(out)
    return out


def load(packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, str]]:
    """(id, text) of every document, in a fixed order; exact copies are dropped."""
    docs, seen = [], set()
    for package in packages:
        with _extract(package).open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if row["text"] not in seen:
                    seen.add(row["text"])
                    docs.append((row["id"], row["text"]))
    return docs


def jsonl_path(packages: tuple[str, ...] = PACKAGES) -> Path:
    """All documents as one JSONL file (for `shdb ingest`)."""
    out = CACHE / ("+".join(packages) + ".all.jsonl")
    if not out.exists():
        with out.open("w", encoding="utf-8") as f:
            for doc_id, text in load(packages):
                f.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    return out


def for_mode(mode: str) -> list[tuple[str, str]]:
    """The generated corpus for a smoke run, the Debian documents otherwise."""
    return generated() if mode == "smoke" else load()


_CJK_WORD = re.compile(r"[\u4e00-\u9fff]{1,4}")
_ASCII_WORDS = (
    "file",
    "directory",
    "option",
    "user",
    "system",
    "network",
    "image",
    "layer",
    "color",
    "brush",
    "select",
    "tool",
    "window",
    "menu",
    "dialog",
    "mode",
    "value",
    "default",
    "output",
    "input",
    "format",
    "command",
    "line",
    "program",
    "version",
)


@lru_cache(maxsize=1)
def _vocabulary(size: int = 20_000) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The ``size`` most frequent all-CJK words of jieba's dictionary, with frequencies."""
    import jieba

    rows = []
    with jieba.get_dict_file() as f:
        for raw in f:
            word, freq, *_ = raw.decode("utf-8").split()
            if _CJK_WORD.fullmatch(word):
                rows.append((int(freq), word))
    rows.sort(reverse=True)
    top = rows[:size]
    return tuple(w for _, w in top), tuple(n for n, _ in top)


def _sentence(rng: random.Random, words: int) -> str:
    vocab, freqs = _vocabulary()
    parts = rng.choices(vocab, weights=freqs, k=words)
    if rng.random() < 0.3:  # options, numbers and versions, as man pages have them
        parts.insert(
            rng.randrange(len(parts)),
            rng.choice(
                (
                    f" -{rng.choice('abcdhlv')} ",
                    f" {rng.randint(1, 2024)} ",
                    f" {rng.choice(_ASCII_WORDS)} ",
                )
            ),
        )
    for _ in range(words // 6):
        parts.insert(rng.randrange(1, len(parts)), "，")
    return "".join(parts).strip() + rng.choice("。。。！？")


def _wrap(text: str, width: int = 36) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _man_page(rng: random.Random, name: str, chars: int) -> str:
    summary = _sentence(rng, rng.randint(3, 6)).rstrip("。！？")
    body = [f"名称\n{name} - {summary}", f"概述\n{name} [选项] 文件", "描述"]
    size = sum(len(b) for b in body)
    while size < chars:
        para = "".join(_sentence(rng, rng.randint(5, 16)) for _ in range(rng.randint(2, 5)))
        if rng.random() < 0.2:
            body.append(rng.choice(("选项", "参见", "示例", "作者")))
        body.append(_wrap(para))
        size += len(para)
    return "\n".join(body)


def _english_page(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(_ASCII_WORDS))
        if rng.random() < 0.1:
            words[-1] += "."
    return _wrap(" ".join(words), 72)


def generated(docs: int = 48, seed: int = 0) -> list[tuple[str, str]]:
    """A small deterministic corpus shaped like the Debian one (see the module doc)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for i in range(docs):
        name = f"cmd{i:03d}"
        chars = rng.choice((260, 420, 700, 900, 1400, 2600))
        text = _man_page(rng, name, chars)
        out.append((f"manpages-zh/usr/share/man/zh_CN/man1/{name}.1.gz", text))
        if i % 6 == 0:  # a traditional-script twin: the same page with a few words changed
            twin = text.replace("的", "之", 3).replace("文件", "檔案")
            out.append((f"manpages-zh/usr/share/man/zh_TW/man1/{name}.1.gz", twin))
    for i in range(docs // 8):
        page = _english_page(rng, rng.choice((400, 900, 1600)))
        out.append((f"gimp-help-zh-cn/usr/share/gimp/2.0/help/zh_CN/page{i:02d}.html", page))
    return out


if __name__ == "__main__":
    corpus = load()
    sizes = sorted(len(t) for _, t in corpus)
    print(
        f"{len(corpus)} documents, {sum(sizes) / 1e6:.1f} M chars, "
        f"median {sizes[len(sizes) // 2]} chars, cached in {CACHE}",
        file=sys.stderr,
    )
