"""Timing against a same-run baseline: interleaving, percentiles, profiles.

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
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .common import ROOT

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); exact on the samples, no interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/mean in milliseconds, and the sample count."""
    return {
        "p50_ms": percentile(seconds, 50) * 1e3,
        "p99_ms": percentile(seconds, 99) * 1e3,
        "mean_ms": sum(seconds) / len(seconds) * 1e3 if seconds else math.nan,
        "n": len(seconds),
    }


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[float, T]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def rotated(names: Sequence[str], round_: int) -> list[str]:
    """``names`` rotated by ``round_``: no task always runs first (cold) or last."""
    shift = round_ % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


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
        for name in rotated(names, r):
            dt, out = timed(tasks[name], r)
            times[name].append(dt)
            results[name].append(out)
    return times, results


def interleaved_blocks(
    tasks: dict[str, Callable[[Any], Any]], inputs: Sequence[Any], block: int = 20
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Every input through every task, in blocks of inputs, rotating the order per block.

    Blocks (not single inputs) alternate because a baseline such as brute force
    streams a whole array through the CPU caches: run right before each index
    query it would evict what the index uses, a penalty no real workload has. A
    block lasts a few milliseconds, so noise bursts still fall on every task alike.
    """
    names = list(tasks)
    times: dict[str, list[float]] = {n: [] for n in names}
    answers: dict[str, list[Any]] = {n: [] for n in names}
    for b, start in enumerate(range(0, len(inputs), block)):
        chunk = inputs[start : start + block]
        for name in rotated(names, b):
            for item in chunk:
                dt, out = timed(tasks[name], item)
                times[name].append(dt)
                answers[name].append(out)
    return times, answers


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 (a baseline that measured nothing)."""
    return a / b if b else math.nan


def cpu_seconds() -> float:
    """User+system CPU of this process and its reaped children (pool workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def top_functions(profiler: cProfile.Profile, count: int) -> list[dict[str, Any]]:
    """The heaviest functions by own time, with file:line, for the report."""
    stats = pstats.Stats(profiler)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values())
    rows = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:count]
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
