"""Real Chinese documents for the benchmarks and the quality evaluation.

Debian's ``manpages-zh`` (man pages, simplified and traditional Chinese) and
``gimp-help-zh-cn`` (the GIMP manual, HTML) are fetched with ``apt-get download``
and turned into plain text once; the result is cached as JSON Lines in
``$SHDB_CORPUS_DIR`` (default ``~/.cache/shdb-corpus``).

    python scripts/corpus.py            # fetch, extract, print a summary
"""

from __future__ import annotations

import gzip
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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


if __name__ == "__main__":
    corpus = load()
    sizes = sorted(len(t) for _, t in corpus)
    print(
        f"{len(corpus)} documents, {sum(sizes) / 1e6:.1f} M chars, "
        f"median {sizes[len(sizes) // 2]} chars, cached in {CACHE}",
        file=sys.stderr,
    )
