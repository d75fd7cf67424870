"""Reading a whole index range by range, for `shdb stats` and `shdb verify` at a
billion documents: every range at once on ``workers`` threads (on HBase a range is
a region, scanned on its own pooled connection), or a random ``sample`` of the
ranges, whose counts are extrapolated to the table with an error bound.

A region is the unit because a scan of one stays on one region server: N workers
keep N servers busy. The extrapolation treats the regions as the population
(their sizes vary, which the bound accounts for): an estimate of the table's total
and a 95 % bound from the spread between the sampled regions (a normal
approximation, with the finite-population correction).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.store.base import KeyRange

T = TypeVar("T")
#: Progress: (table, ranges done, ranges to read).
Progress = Callable[[str, int, int], None]
Z95 = 1.96


@dataclass(frozen=True)
class Estimate:
    """A table-wide count: exact when every range was read, else extrapolated
    from the sampled ranges, ± ``bound`` (95 %)."""

    value: float
    bound: float
    exact: bool

    def to_json(self) -> int | dict[str, float]:
        if self.exact:
            return round(self.value)
        return {"estimate": round(self.value), "bound_95": round(self.bound)}


def check(workers: int, sample: float | None) -> None:
    if workers < 1:
        raise InvalidSetting("workers", f"expected at least 1, got {workers}")
    if sample is not None and not 0 < sample <= 1:
        raise InvalidSetting("sample", f"expected a fraction in (0, 1], got {sample}")


def chosen(ranges: Sequence[KeyRange], sample: float | None, seed: int = 0) -> list[KeyRange]:
    """The ranges to read: all, or a random ``sample`` of them (at least one)."""
    if sample is None or sample >= 1:
        return list(ranges)
    n = max(1, math.ceil(sample * len(ranges)))
    return sorted(random.Random(seed).sample(list(ranges), n))


def each(
    table: str,
    ranges: Sequence[KeyRange],
    read: Callable[[KeyRange], T],
    workers: int,
    progress: Progress | None = None,
) -> list[T]:
    """``read`` of every range, ``workers`` at once, in range order."""
    done = 0

    def step(key_range: KeyRange) -> T:
        nonlocal done
        out = read(key_range)
        done += 1  # under the GIL; a progress line may repeat a count, never skip one
        if progress is not None:
            progress(table, done, len(ranges))
        return out

    if workers == 1 or len(ranges) == 1:
        return [step(r) for r in ranges]
    with ThreadPoolExecutor(workers, thread_name_prefix="shdb-census") as pool:
        return list(pool.map(step, ranges))


def extrapolate(counts: Sequence[float], ranges: int) -> Estimate:
    """The table's total from the counts of ``len(counts)`` of its ``ranges``."""
    n = len(counts)
    if n >= ranges:
        return Estimate(float(sum(counts)), 0.0, True)
    mean = statistics.fmean(counts)
    spread = statistics.stdev(counts) if n > 1 else mean  # one region: as wide as itself
    bound = Z95 * ranges * spread / math.sqrt(n) * math.sqrt(1 - n / ranges)
    return Estimate(mean * ranges, bound, False)


@dataclass(frozen=True)
class Counts:
    documents: Estimate
    index_cells: Estimate
    ranges_read: dict[str, tuple[int, int]]  # table -> (read, of)

    def to_json(self) -> dict[str, object]:
        return {
            "documents": self.documents.to_json(),
            "index_cells": self.index_cells.to_json(),
            "regions_read": {t: f"{a} of {b}" for t, (a, b) in self.ranges_read.items()},
        }


def count(
    index: SimhashIndex,
    *,
    workers: int = 1,
    sample: float | None = None,
    progress: Progress | None = None,
) -> Counts:
    """Documents and index cells, by reading the docs and index tables range by range."""
    check(workers, sample)
    docs_ranges, index_ranges = index.key_ranges("docs"), index.key_ranges("index")
    docs_read, cells_read = chosen(docs_ranges, sample), chosen(index_ranges, sample)

    def documents(key_range: KeyRange) -> int:
        damaged = [0]  # a damaged docs row is a document too (verify names it)

        def skip(_id: str, _error: object) -> None:
            damaged[0] += 1

        return sum(1 for _ in index.documents(skip, key_range)) + damaged[0]

    docs = each("docs", docs_read, documents, workers, progress)
    cells = each(
        "index", cells_read, lambda r: sum(1 for _ in index.index_cells(r)), workers, progress
    )
    return Counts(
        extrapolate(docs, len(docs_ranges)),
        extrapolate(cells, len(index_ranges)),
        {"docs": (len(docs_read), len(docs_ranges)), "index": (len(cells_read), len(index_ranges))},
    )
