"""Bulk removal at the speed of ingest (issue 40): removing N documents by a list
of their ids against ingesting them (fingerprints given), in the same run, on the
embedded store. Each round ingests N random fingerprints into a new index, then
removes them all by id (``SimhashIndex.remove_many``, 10,000 ids a batch); the
rates are documents a second, best of the rounds.
"""

from __future__ import annotations

import shutil
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


def run(ctx: Context) -> dict[str, Any]:
    n = ctx.pick(smoke=20_000, quick=200_000, full=1_000_000)
    fps = np.random.default_rng(40).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    pairs = list(zip((f"d{i}" for i in range(n)), fps.tolist()))
    ids = [doc_id for doc_id, _ in pairs]
    ingest, remove = [], []
    for r in range(ROUNDS):
        path = ctx.work / f"removal-{r}"
        shutil.rmtree(path, ignore_errors=True)
        with SimhashIndex.open(str(path)) as index:
            took, _ = timed(index_fingerprints, index, iter(pairs), IngestOptions(find_k=None))
            ingest.append(n / took)
            took, gone = timed(index.remove_many, ids)
            assert len(gone) == n and not index.stats()["documents"]
            remove.append(n / took)
        shutil.rmtree(path, ignore_errors=True)
        log(f"removal: {n:,} docs: ingest {ingest[-1]:,.0f}/s, remove {remove[-1]:,.0f}/s")
    return {"n": n, "ingest_per_s": max(ingest), "remove_per_s": max(remove)}


def figures(r: dict[str, Any]) -> list[Figure]:
    return [
        Figure.judge(
            f"embedded: removing {r['n']:,} documents by id / ingesting them (fingerprints)",
            r["remove_per_s"] / r["ingest_per_s"],
            Target.at_least(0.5),
            measured=f"{r['remove_per_s']:,.0f} docs/s removed",
            baseline=f"{r['ingest_per_s']:,.0f} docs/s ingested",
        )
    ]


def render(results: dict[str, Any]) -> str:
    r = results["removal"]
    rows = [(f"{r['n']:,}", f"{r['ingest_per_s']:,.0f}", f"{r['remove_per_s']:,.0f}")]
    header = ("documents", "ingest docs/s (fingerprints)", "remove by id docs/s")
    return report.fill("bench/removal.md", table=report.table(header, rows))


register(Section("removal", "Bulk removal (issue 40)", run, figures, render, order=28))
