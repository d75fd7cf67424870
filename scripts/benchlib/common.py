"""Shared pieces of scripts/bench: sizes per mode, timing, percentiles, logging.

The machine is shared and noisy (2 cores, test suites running beside us), so no
absolute number means much on its own: every figure is measured next to its
baseline in the same run, and where possible the two are interleaved (A, B, B, A,
...) so that a burst of load hits both alike. Ratios are what the targets judge.
"""

from __future__ import annotations

import cProfile
import math
import os
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "bench-results"
DOCS_DIR = ROOT / "docs"
CACHE_DIR = Path(os.environ.get("SHDB_BENCH_CACHE", Path.home() / ".cache" / "shdb-bench"))
K = 3
_STARTED = time.perf_counter()


@dataclass(frozen=True)
class Plan:
    """Sizes of every experiment; --quick must fit in 10 minutes, full in ~45."""

    mode: str
    fp_doc_step: int  # fingerprint every n-th corpus document
    fp_map_rounds: int  # interleaved rounds of map(workers=1) vs map(workers=2)
    embedded_ns: tuple[int, ...]
    embedded_queries: int
    pypi_index_cap: int  # PyPI simhash.SimhashIndex adds ~30k docs/s in Python
    hbase_ns: tuple[int, ...]
    hbase_queries: int
    ingest_docs: int  # embedded add_fingerprints vs raw putmulti
    ingest_find_docs: int  # the same with find_k=3
    batch_sizes: tuple[int, ...]
    batch_docs: int
    hbase_ingest_docs: int
    hbase_ingest_find_docs: int
    hbase_batch_sizes: tuple[int, ...]
    hbase_batch_docs: int
    rss_lines: tuple[int, ...]
    rss_args: tuple[str, ...]  # extra `shdb ingest` options (quick: the bulk-load ones)
    dedup_n: int
    dedup_rounds: int
    seed: int = 4
    extra: dict[str, Any] = field(default_factory=dict)


QUICK = Plan(
    mode="quick",
    fp_doc_step=6,
    fp_map_rounds=1,
    embedded_ns=(10_000, 100_000, 1_000_000),
    embedded_queries=200,
    pypi_index_cap=100_000,
    hbase_ns=(10_000, 100_000),
    hbase_queries=150,
    ingest_docs=60_000,
    ingest_find_docs=30_000,
    batch_sizes=(100, 1000, 10_000),
    batch_docs=20_000,
    hbase_ingest_docs=15_000,
    hbase_ingest_find_docs=1_000,
    hbase_batch_sizes=(100, 1000, 10_000),
    hbase_batch_docs=6_000,
    rss_lines=(100_000, 1_000_000),
    rss_args=("--no-dedup", "--batch-size", "10000"),
    dedup_n=1_000_000,
    dedup_rounds=2,
)

SMOKE = Plan(  # checks that every section runs; its numbers mean nothing
    mode="smoke",
    fp_doc_step=40,
    fp_map_rounds=1,
    embedded_ns=(1_000, 10_000),
    embedded_queries=40,
    pypi_index_cap=10_000,
    hbase_ns=(1_000, 5_000),
    hbase_queries=30,
    ingest_docs=10_000,
    ingest_find_docs=5_000,
    batch_sizes=(100, 1000),
    batch_docs=5_000,
    hbase_ingest_docs=2_000,
    hbase_ingest_find_docs=1_000,
    hbase_batch_sizes=(100, 1000),
    hbase_batch_docs=2_000,
    rss_lines=(10_000, 50_000),
    rss_args=("--no-dedup",),
    dedup_n=100_000,
    dedup_rounds=1,
)

FULL = Plan(
    mode="full",
    fp_doc_step=1,
    fp_map_rounds=1,
    embedded_ns=(10_000, 100_000, 1_000_000, 3_000_000, 10_000_000),
    embedded_queries=500,
    pypi_index_cap=1_000_000,
    hbase_ns=(10_000, 100_000, 300_000, 1_000_000),
    hbase_queries=300,
    ingest_docs=500_000,
    ingest_find_docs=200_000,
    batch_sizes=(100, 300, 1000, 3000, 10_000, 30_000),
    batch_docs=100_000,
    hbase_ingest_docs=50_000,
    hbase_ingest_find_docs=3_000,
    hbase_batch_sizes=(100, 300, 1000, 3000, 10_000),
    hbase_batch_docs=30_000,
    rss_lines=(100_000, 1_000_000),
    rss_args=(),
    dedup_n=1_000_000,
    dedup_rounds=3,
)


def log(message: str) -> None:
    """Progress on stderr with the elapsed run time: a 10-minute budget needs watching."""
    elapsed = time.perf_counter() - _STARTED
    print(f"[bench {elapsed:6.0f}s] {message}", file=sys.stderr, flush=True)


def elapsed_s() -> float:
    return time.perf_counter() - _STARTED


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); exact on the samples, no interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/mean in milliseconds."""
    return {
        "p50_ms": percentile(seconds, 50) * 1e3,
        "p99_ms": percentile(seconds, 99) * 1e3,
        "mean_ms": sum(seconds) / len(seconds) * 1e3 if seconds else math.nan,
        "n": len(seconds),
    }


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def interleaved(
    tasks: dict[str, Callable[[int], Any]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Run every task once per round, rotating the order each round.

    Rotation means no task always runs first (cold caches) or last (after the
    others warmed the CPU); noise bursts fall on all tasks alike.
    """
    names = list(tasks)
    times: dict[str, list[float]] = {n: [] for n in names}
    results: dict[str, list[Any]] = {n: [] for n in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            dt, out = timed(tasks[name], r)
            times[name].append(dt)
            results[name].append(out)
    return times, results


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def dump(obj: Any) -> Any:
    """Dataclasses to dicts, for JSON."""
    return asdict(obj) if hasattr(obj, "__dataclass_fields__") else obj


def top_functions(profiler: cProfile.Profile, count: int) -> list[dict[str, Any]]:
    """The heaviest functions by own time, with file:line, for the report."""
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:count]  # type: ignore[attr-defined]
    out = []
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in rows:
        where = filename.replace(str(ROOT) + "/", "").replace(str(Path(os.__file__).parent), "")
        out.append(
            {
                "function": f"{where}:{line}({name})",
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
                "share": tottime / total if total else 0.0,
            }
        )
    return out
