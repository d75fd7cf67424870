"""Reading a whole index range by range, for `shdb stats` and `shdb verify` at a
billion documents: every range at once in ``workers`` processes (on HBase a range
is a region; each process opens the index from its URL), or a random ``sample`` of
the ranges, whose counts are extrapolated to the table with an error bound.

A region is the unit of the parallel read because a scan of one stays on one
region server: N workers keep N servers busy. Processes, not threads: the client
decodes the Thrift replies in Python, under the GIL, so threads share one core's
decoding; processes decode side by side where there are cores for them (on a
shared 2-core machine there are not: docs/scale.md, "verify and stats"). A process
returns what its range comes to, small beside the range.

A sample of the index table cuts its regions into at least 256 pieces (even in
key space: its keys are uniform), one of the docs table takes whole regions;
either reads a random fraction of them; the extrapolation treats the pieces as
the population (their sizes vary, which the bound accounts for): an estimate of
the table's total and a 95 % bound from the spread between the sampled pieces (a
normal approximation, with the finite-population correction).
"""

from __future__ import annotations

import gc
import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from simhash_hbase.errors import InvalidSetting, StoreError, WorkerDied
from simhash_hbase.fingerprint.workers import map_chunks
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.store.base import WHOLE, KeyRange

T = TypeVar("T")
#: Progress: (table, ranges done, ranges to read).
Progress = Callable[[str, int, int], None]
Z95 = 1.96
#: Pieces a sampled table is cut into at least, whatever its regions.
SAMPLE_UNITS = 256
_CUT_BYTES = 8


@dataclass(frozen=True)
class Estimate:
    """A table-wide count: exact when every range was read, else extrapolated
    from the sampled ranges, ± ``bound`` (95 %)."""

    value: float
    bound: float
    exact: bool

    def to_json(self) -> int | dict[str, int | None]:
        if self.exact:
            return round(self.value)
        bound = round(self.bound) if math.isfinite(self.bound) else None  # None: unknown
        return {"estimate": round(self.value), "bound_95": bound}


def check(workers: int, sample: float | None) -> None:
    if workers < 1:
        raise InvalidSetting("workers", f"expected at least 1, got {workers}")
    if sample is not None and not 0 < sample <= 1:
        raise InvalidSetting("sample", f"expected a fraction in (0, 1], got {sample}")


def ranges_of(index: SimhashIndex, table: str) -> list[KeyRange]:
    """The ranges ``table`` is read by: its regions, or the whole (a store read in
    one pass: :meth:`~simhash_hbase.store.base.Store.key_ranges`)."""
    return index.key_ranges(table) or [WHOLE]


def sampled(
    index: SimhashIndex, table: str, sample: float | None, seed: int = 0
) -> tuple[list[KeyRange], list[KeyRange]]:
    """(the population, the ranges to read): the table's ranges and all of them; or,
    to sample, the ranges cut into at least :data:`SAMPLE_UNITS` pieces (a table of
    4 regions is sampled as finely as one of 400) and a random ``sample`` of those.
    A table read in one pass is read whole: its counts are exact."""
    ranges = index.key_ranges(table)
    if ranges is None:
        return [WHOLE], [WHOLE]
    if sample is None or sample >= 1:
        return ranges, ranges
    # Only the index table's keys are uniform (docs/SPEC.md): a docs region cut even
    # in key space gives pieces that ids leave empty (d0000000.. fill 10 of 256 byte
    # values), so the docs table is sampled by whole regions.
    pieces = math.ceil(SAMPLE_UNITS / max(len(ranges), 1)) if table == "index" else 1
    units = [piece for key_range in ranges for piece in cut(key_range, pieces)]
    n = max(1, math.ceil(sample * len(units)))
    return units, sorted(random.Random(seed).sample(units, n))


def cut(key_range: KeyRange, pieces: int) -> list[KeyRange]:
    """``key_range`` cut into ``pieces`` even in key space: the 8 bytes after the
    bounds' common prefix read as a number. Even in keys, not in rows: the index's
    keys are uniform, ids need not be (the estimate's bound measures how uneven)."""
    start, stop = key_range
    high = stop or b"\xff" * (_CUT_BYTES + 1)
    common = next((i for i, (x, y) in enumerate(zip(start, high)) if x != y), len(start))
    a, b = (int.from_bytes(k[common:][:_CUT_BYTES].ljust(_CUT_BYTES, b"\0"), "big")
            for k in (start, high))  # fmt: skip
    if pieces < 2 or b - a < pieces:
        return [key_range]
    points = [
        high[:common] + (a + (b - a) * i // pieces).to_bytes(_CUT_BYTES, "big")
        for i in range(1, pieces)
    ]
    return list(itertools.pairwise([start, *points, stop]))


#: What a worker does with a range: read it through the index it was given.
Read = Callable[[SimhashIndex, KeyRange], T]


def each(
    table: str,
    index: SimhashIndex,
    ranges: Sequence[KeyRange],
    read: Read[T],
    workers: int,
    progress: Progress | None = None,
) -> list[T]:
    """``read`` of every range, in range order: here, or in ``workers`` forked
    processes, each with its own :class:`SimhashIndex` opened from ``index.url``
    (a connection is never shared across a fork). What the parent holds is frozen
    out of the collector first, so that the children never copy it
    (:func:`gc.freeze`): a verify's docs dict stays in one process."""
    results: list[T] = []
    if workers == 1 or len(ranges) < 2:
        for key_range in ranges:
            results.append(read(index, key_range))
            if progress is not None:
                progress(table, len(results), len(ranges))
        return results
    url, opened = index.url, []

    def init() -> None:
        opened.append(SimhashIndex.open(url, create=False, readonly=True))

    def work(_names: Sequence[str], key_range: KeyRange) -> list[T]:
        return [read(opened[0], key_range)]

    chunks = (([f"{table} range {n}"], r) for n, r in enumerate(ranges))
    gc.freeze()
    try:
        for (result,) in map_chunks(chunks, min(workers, len(ranges)), init, work):
            results.append(result)
            if progress is not None:
                progress(table, len(results), len(ranges))
    except WorkerDied as exc:  # an error in the child (the store's, say), or its death
        raise StoreError(
            f"the worker reading {table} range {exc.chunk + 1} of {len(ranges)} {exc.how}"
        ) from None
    finally:
        gc.unfreeze()
    return results


def extrapolate(counts: Sequence[float], ranges: int) -> Estimate:
    """The table's total from the counts of ``len(counts)`` of its ``ranges``."""
    n = len(counts)
    if n >= ranges:
        return Estimate(float(sum(counts)), 0.0, True)
    if not any(counts):  # nothing seen says nothing of the rest: no bound
        return Estimate(0.0, math.inf, False)
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
            "pieces_read": {t: f"{a} of {b}" for t, (a, b) in self.ranges_read.items()},
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
    docs_ranges, docs_read = sampled(index, "docs", sample)
    index_ranges, cells_read = sampled(index, "index", sample)

    docs = each("docs", index, docs_read, count_documents, workers, progress)
    cells = each("index", index, cells_read, count_cells, workers, progress)
    return Counts(
        extrapolate(docs, len(docs_ranges)),
        extrapolate(cells, len(index_ranges)),
        {"docs": (len(docs_read), len(docs_ranges)), "index": (len(cells_read), len(index_ranges))},
    )


def count_documents(index: SimhashIndex, key_range: KeyRange) -> int:
    """The documents of a docs range; a damaged row is a document too (verify names it)."""
    damaged = [0]

    def skip(_id: str, _error: object) -> None:
        damaged[0] += 1

    return sum(1 for _ in index.documents(skip, key_range)) + damaged[0]


def count_cells(index: SimhashIndex, key_range: KeyRange) -> int:
    return sum(1 for _ in index.index_cells(key_range))
