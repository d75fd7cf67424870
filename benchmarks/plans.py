"""Sizes of every bench experiment per mode: smoke, quick, full."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


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

    @property
    def largest_n(self) -> int:
        """The most synthetic fingerprints any section of this plan needs."""
        return max(*self.embedded_ns, *self.hbase_ns, self.ingest_docs, *self.rss_lines)


QUICK = Plan(
    mode="quick",
    fp_doc_step=6,
    fp_map_rounds=1,
    embedded_ns=(10_000, 100_000, 1_000_000),
    embedded_queries=200,
    pypi_index_cap=100_000,
    hbase_ns=(10_000, 100_000, 1_000_000),  # issue 24's floor: at 100 k and at 1 M
    hbase_queries=1_000,  # the p50 of 150 moved 1.9-2.3x a get between runs
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
    fp_doc_step=1,
    fp_map_rounds=1,
    embedded_ns=(1_000, 10_000),
    embedded_queries=40,
    pypi_index_cap=10_000,
    hbase_ns=(1_000, 3_000),
    hbase_queries=20,
    ingest_docs=5_000,
    ingest_find_docs=2_000,
    batch_sizes=(100, 1000),
    batch_docs=3_000,
    hbase_ingest_docs=1_000,
    hbase_ingest_find_docs=300,
    hbase_batch_sizes=(100,),  # batch 1000 runs in the find_k pairs: each pair is new tables
    hbase_batch_docs=1_000,
    rss_lines=(5_000, 20_000),
    rss_args=("--no-dedup",),
    dedup_n=50_000,
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
    hbase_queries=2_000,
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


PLANS = {plan.mode: plan for plan in (SMOKE, QUICK, FULL)}


def pick(mode: str, *, smoke: T, quick: T, full: T) -> T:
    """A size for the mode, for sections that keep their sizes to themselves."""
    return {"smoke": smoke, "quick": quick, "full": full}[mode]
