"""`shdb verify` and `shdb stats` with ``--workers N`` (issue 42): the same index read
by 1, 2 and 4 worker processes, rounds interleaved (the order rotated each round),
as same-run ratios against one worker. HBase only: the embedded store reads a
table in one pass, so its ``--workers`` has nothing to split.

    python -m benchmarks.verify_workers --documents 200000 [--rounds 2] \\
        --index 'hbase://127.0.0.1:9491/vbench?expect=100M&docs_sample=ids.txt'
        [--workers 1,2,4]

The index is filled with random fingerprints (ids ``d0000000``.., 5x10, no texts:
10 cells a document) up to ``--documents`` if it holds fewer; created with the URL's
plan (``expect``/``docs_sample``: the docs table split so that its pass is parallel
too). Prints one JSON object: each run's seconds, rate and ratio to one worker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from simhash_hbase import SimhashIndex
from simhash_hbase.jobs.census import count
from simhash_hbase.jobs.verify import verify
from simhash_hbase.records import Document

from .common import log
from .timing import rotated, timed

_BATCH = 10_000


def fill(index: SimhashIndex, n: int) -> int:
    """Add random fingerprints ``d{i:07d}`` until the index holds ``n``; the count added."""
    held = count(index, workers=4).documents.value
    rng = np.random.default_rng(42)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False).tolist()
    for start in range(int(held), n, _BATCH):
        stop = min(n, start + _BATCH)
        index.add_documents([Document(f"d{i:07d}", fps[i]) for i in range(start, stop)])
        log(f"filled {stop:,} of {n:,}")
    return max(0, n - int(held))


def measure(url: str, n: int, rounds: int, workers: list[int]) -> dict[str, Any]:
    with SimhashIndex.open(url, create=True) as index:
        fill(index, n)
        regions = {t: len(index.key_ranges(t) or [None]) for t in ("docs", "index")}
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        for job in ("stats", "verify"):
            for w in rotated([str(w) for w in workers], r):
                with SimhashIndex.open(url, create=False, readonly=True) as index:
                    if job == "stats":
                        took, counts = timed(count, index, workers=int(w))
                        cells = int(counts.index_cells.value)
                        assert counts.documents.value == n, counts
                    else:
                        took, report = timed(verify, index, workers=int(w))
                        cells = report.cells
                        assert report.clean and report.documents == n, report
                runs.append({"job": job, "workers": int(w), "round": r, "seconds": took})
                log(f"{job} --workers {w}: {took:.1f} s ({(cells + n) / took:,.0f} rows/s)")
    best = {
        (job, w): min(x["seconds"] for x in runs if (x["job"], x["workers"]) == (job, w))
        for job in ("stats", "verify")
        for w in workers
    }
    rows_read = n + n * 10
    return {
        "documents": n,
        "regions": regions,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "runs": runs,
        "best": [
            {
                "job": job,
                "workers": w,
                "seconds": round(s, 1),
                "rows_per_s": round(rows_read / s),
                "ratio_to_one": round(best[(job, workers[0])] / s, 2),
            }
            for (job, w), s in best.items()
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="an hbase:// index URL")
    parser.add_argument("--documents", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated, the first the base")
    args = parser.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    print(json.dumps(measure(args.index, args.documents, args.rounds, workers), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
