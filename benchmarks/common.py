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
