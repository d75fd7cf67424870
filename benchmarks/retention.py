"""Expiry keeps an index bounded (issue 40.3): a steady stream into an index created
with a retention against an index that only ever held the retention's window.

The stream ingests ``w`` documents (random fingerprints) a "day" for ``days`` days
into an index retaining ``retain`` days, and expires nightly (``SimhashIndex.expire``
at the end of each day, as the feed example's cron runs ``shdb expire``); the days
are a virtual timeline (document times, and the ``now`` given to expire), so the run
takes as long as its writes. The baseline is a plain index (no retention) into which
only the documents of the last window were ever ingested, the same way (day by day:
LMDB's copy-on-write makes a file written in many commits larger than one written
in a few, whatever expiry does). Figures,
same run: the data file's size after the last expiry over the baseline's, and query
p50 (half of the queries near-copies of window documents, half random), interleaved
in blocks. The file's size per day shows whether LMDB reuses the pages expiry frees.
Public API only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase import Document, SimhashIndex

from . import report
from .common import log
from .context import Context
from .registry import Figure, Section, Target, register
from .timing import interleaved_blocks, latency_summary

DAY_MS = 86_400_000
BATCHES = 4  # writes a day (an ingest's batches)
CADENCES = ("nightly", "per batch")


def _disk(index: SimhashIndex) -> int:
    return int(index.stats()["disk_bytes"])


def measure(
    work: Path, w: int, days: int, retain: int, cadence: str = "nightly", queries: int = 400
) -> dict[str, Any]:
    """The stream and its baseline in ``work``; sizes in bytes, p50 in ms. ``cadence``:
    expire at the end of each day (``shdb expire`` from cron), or after each write of
    a quarter day's documents as of its last document's time (what a retained embedded
    index's writes do by themselves with the clock)."""
    rng = np.random.default_rng(40)
    fps = rng.integers(1, 2**64, w * days, dtype=np.uint64, endpoint=False).tolist()
    start = (int(np.datetime64("now", "ms").astype(np.int64)) // DAY_MS + 1) * DAY_MS
    step = DAY_MS // w  # a day's documents spread over the day
    batch_size = -(-w // BATCHES)
    days_docs = [
        [
            Document(f"d{n}", fps[n], time=start + day * DAY_MS + i * step)
            for i, n in enumerate(range(day * w, (day + 1) * w))
        ]
        for day in range(days)
    ]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sizes = []
    with SimhashIndex.open(str(work / "stream"), retain=retain * DAY_MS // 1000) as stream:
        for day, docs in enumerate(days_docs):
            for at in range(0, w, batch_size):
                batch = docs[at : at + batch_size]
                stream.add_documents(batch)
                if cadence == "per batch":
                    stream.expire(now=batch[-1].time)  # type: ignore[arg-type]
            stream.expire(now=start + (day + 1) * DAY_MS)  # the nightly run
            sizes.append(_disk(stream))
        held = sorted(d.doc_id for d in stream.documents())
        window = [d for docs in days_docs[days - retain :] for d in docs]
        assert held == sorted(d.doc_id for d in window), "expiry kept the wrong documents"
        with SimhashIndex.open(str(work / "window")) as baseline:
            for docs in days_docs[days - retain :]:  # written as the stream wrote them
                for at in range(0, w, batch_size):
                    baseline.add_documents(docs[at : at + batch_size])
            near = [d.fingerprint ^ 1 for d in window[:: max(1, len(window) // (queries // 2))]]
            asked = [*near, *rng.integers(1, 2**64, queries // 2, dtype=np.uint64).tolist()]
            times, answers = interleaved_blocks(
                {"stream": stream.query_fingerprint, "window": baseline.query_fingerprint}, asked
            )
            assert [[m.doc_id for m in a] for a in answers["stream"]] == [
                [m.doc_id for m in a] for a in answers["window"]
            ], "the streamed index answered otherwise than the window's"
            base_disk = _disk(baseline)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "cadence": cadence,
        "w": w,
        "days": days,
        "retain": retain,
        "ingested": w * days,
        "window": len(window),
        "disk": sizes[-1],
        "disk_window": base_disk,
        "disk_by_day": sizes,
        "p50_ms": latency_summary(times["stream"])["p50_ms"],
        "p50_window_ms": latency_summary(times["window"])["p50_ms"],
    }


def run(ctx: Context) -> dict[str, Any]:
    w, days, retain = ctx.pick(smoke=(2_000, 8, 3), quick=(20_000, 20, 5), full=(100_000, 30, 10))
    runs = []
    for cadence in CADENCES:
        r = measure(ctx.work / "retention", w, days, retain, cadence)
        log(
            f"retention ({cadence}): {r['ingested']:,} docs through a {r['window']:,} window: "
            f"disk {r['disk'] / r['disk_window']:.2f}x, p50 {r['p50_ms'] / r['p50_window_ms']:.2f}x"
        )
        runs.append(r)
    return {"runs": runs}


def figures(results: dict[str, Any]) -> list[Figure]:
    found = []
    for r in results["runs"]:
        what = (
            f"{r['ingested']:,} documents streamed through a {r['window']:,}-document window, "
            f"expired {r['cadence']}"
        )
        found += [
            Figure.judge(
                f"embedded: disk after expiry, {what} / an index of the window",
                r["disk"] / r["disk_window"],
                Target.at_most(1.3),
                measured=f"{r['disk'] / 1e6:,.1f} MB",
                baseline=f"{r['disk_window'] / 1e6:,.1f} MB",
            ),
            Figure.judge(
                f"embedded: query p50, {what} / an index of the window",
                r["p50_ms"] / r["p50_window_ms"],
                Target.at_most(1.2),
                measured=f"{r['p50_ms']:.3f} ms",
                baseline=f"{r['p50_window_ms']:.3f} ms",
            ),
        ]
    return found


def render(results: dict[str, Any]) -> str:
    rows = [
        (
            r["cadence"],
            f"{r['w']:,} x {r['days']}",
            f"{r['retain']}",
            f"{r['window']:,}",
            f"{r['disk'] / 1e6:,.1f} / {r['disk_window'] / 1e6:,.1f}",
            f"{r['p50_ms']:.3f} / {r['p50_window_ms']:.3f}",
            " ".join(f"{s / 1e6:.0f}" for s in r["disk_by_day"]),
        )
        for r in results["retention"]["runs"]
    ]
    header = (
        "expired",
        "docs a day x days",
        "retained days",
        "window docs",
        "disk MB: stream / window",
        "p50 ms: stream / window",
        "stream's file by day (MB)",
    )
    return report.fill("bench/retention.md", table=report.table(header, rows))


register(Section("retention", "Retention and expiry (issue 40)", run, figures, render, order=29))
