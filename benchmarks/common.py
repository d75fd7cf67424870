"""Paths, the k under test, and progress logging shared by both suites."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench-results"
DOCS_DIR = ROOT / "docs"
CACHE_DIR = Path(os.environ.get("SHDB_BENCH_CACHE", Path.home() / ".cache" / "shdb-bench"))
K = 3  # the index's default k, and the largest its schemes answer exactly
_STARTED = time.perf_counter()
_TAG = ["bench"]


def set_log_tag(tag: str) -> None:
    """``bench`` or ``eval``: which suite a progress line comes from."""
    _TAG[0] = tag


def log(message: str) -> None:
    """Progress on stderr with the elapsed run time: a 10-minute budget needs watching."""
    print(f"[{_TAG[0]} {elapsed_s():6.0f}s] {message}", file=sys.stderr, flush=True)


def elapsed_s() -> float:
    return time.perf_counter() - _STARTED


def shown(path: Path) -> str:
    """A path relative to the repository when it is inside it (for reports)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def replace_section(
    section: str, begin: str, end: str, doc: Path = DOCS_DIR / "quality.md"
) -> None:
    """Replace the generated section between ``begin`` and ``end`` of a docs page
    (``section`` includes the markers), or append it."""
    text = doc.read_text(encoding="utf-8")
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text, encoding="utf-8")


def committed_section(begin: str, end: str, doc: Path = DOCS_DIR / "quality.md") -> str | None:
    """The generated section between ``begin`` and ``end`` as it stands in a page."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if begin in text and end in text:
        return begin + text.split(begin, 1)[1].split(end, 1)[0] + end
    return None
