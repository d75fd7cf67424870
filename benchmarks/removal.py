"""Bulk removal at the speed of ingest (issue 40): removing N documents by a list
of their ids against ingesting them (fingerprints given), in the same run. Each
round ingests N random fingerprints into a new index, then removes them all by id
(``SimhashIndex.remove_many``, its default batch); the rates are documents a
second, best of the rounds. Embedded store at 100 k and 1 M (the issue's size),
HBase (Thrift2) at 100 k in a section of its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

from simhash_hbase import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

from . import report
from .common import log
from .context import Context
from .registry import Figure, Section, Target, register
from .timing import timed

ROUNDS = 2
FLOORS = {"embedded": 0.5, "hbase": 0.3}  # the issue's, of removal's rate / ingest's


def _pairs(n: int) -> list[tuple[str, int]]:
    fps = np.random.default_rng(40).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    return list(zip((f"d{i}" for i in range(n)), fps.tolist()))


def _rates(store: str, n: int, rounds: int, url: Callable[[int], str]) -> dict[str, Any]:
    """Best of ``rounds``: ingest ``n`` fingerprints into the index at ``url(r)``,
    then remove them all by id."""
    pairs = _pairs(n)
    ids = [doc_id for doc_id, _ in pairs]
    ingest, remove = [], []
    for r in range(rounds):
        with SimhashIndex.open(url(r)) as index:
            took, _ = timed(index_fingerprints, index, iter(pairs), IngestOptions(find_k=None))
            ingest.append(n / took)
            took, gone = timed(index.remove_many, ids)
            assert len(gone) == n and not index.get_many(ids[:: max(1, n // 1000)])
            remove.append(n / took)
        log(f"removal, {store}: {n:,} docs: ingest {ingest[-1]:,.0f}/s, remove {remove[-1]:,.0f}/s")
    return {"store": store, "n": n, "ingest_per_s": max(ingest), "remove_per_s": max(remove)}


def run(ctx: Context) -> dict[str, Any]:
    sizes = ctx.pick(smoke=[20_000], quick=[100_000], full=[100_000, 1_000_000])

    def url(n: int) -> Callable[[int], str]:
        def at(r: int) -> str:
            path = ctx.work / f"removal-{n}-{r}"
            shutil.rmtree(path, ignore_errors=True)
            return str(path)

        return at

    runs = [_rates("embedded", n, ROUNDS, url(n)) for n in sizes]
    for n in sizes:
        for r in range(ROUNDS):
            shutil.rmtree(ctx.work / f"removal-{n}-{r}", ignore_errors=True)
    return {"runs": runs}


def run_hbase(ctx: Context) -> dict[str, Any]:
    hbase = ctx.require_hbase()
    n = ctx.pick(smoke=2_000, quick=20_000, full=100_000)
    prefix = hbase.prefix("removal")
    try:  # one round: an HBase round is minutes, and its tables stay until dropped
        return {"runs": [_rates("hbase", n, 1, lambda _: f"{hbase.thrift2_url}?prefix={prefix}")]}
    finally:
        hbase.drop_tables(prefix)


def figures(r: dict[str, Any]) -> list[Figure]:
    return [
        Figure.judge(
            f"{run['store']}: removing {run['n']:,} documents by id / ingesting them "
            "(fingerprints)",
            run["remove_per_s"] / run["ingest_per_s"],
            Target.at_least(FLOORS[run["store"]]),
            measured=f"{run['remove_per_s']:,.0f} docs/s removed",
            baseline=f"{run['ingest_per_s']:,.0f} docs/s ingested",
        )
        for run in r["runs"]
    ]


def render(results: dict[str, Any]) -> str:
    sections = (results.get(name) or {} for name in ("removal", "removal_hbase"))
    runs = [run for section in sections for run in section.get("runs", [])]
    rows = [
        (
            run["store"],
            f"{run['n']:,}",
            f"{run['ingest_per_s']:,.0f}",
            f"{run['remove_per_s']:,.0f}",
            f"{run['remove_per_s'] / run['ingest_per_s']:.2f}x",
        )
        for run in runs
    ]
    header = ("store", "documents", "ingest docs/s (fingerprints)", "remove by id docs/s", "ratio")
    return report.fill("bench/removal.md", table=report.table(header, rows))


register(Section("removal", "Bulk removal (issue 40)", run, figures, render, order=28))
register(
    Section(
        "removal_hbase",
        "Bulk removal: HBase (issue 40)",
        run_hbase,
        figures,
        None,
        needs_hbase=True,
        order=29,
    )
)
