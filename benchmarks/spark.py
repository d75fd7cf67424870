"""Spark jobs in local mode against the single-process commands, on the same data.

``shdb spark dedup`` / ``shdb spark ingest`` with 1 and 2 local cores
(``--master local[1]`` / ``local[2]``) against ``shdb dedup`` / ``shdb ingest
--no-dedup`` on one JSONL file of the bench corpus, each command in its own
process, the order rotated per round. Throughput is documents per second of the
job as the command reports it ("in X s"; the Spark figures leave out the ~10-20 s
JVM start, reported beside them; `shdb dedup` reports no time, so its wall time
counts, start-up included). Scaling is local[2] over local[1]. Every Spark dedup
is checked pair for pair against `shdb dedup`'s output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import ROOT, log
from .context import Context
from .registry import Figure, Section, Skipped, Target, register
from .timing import interleaved

_SECONDS = re.compile(r" in ([0-9.]+) s\b")
MASTERS = ("local[1]", "local[2]")


def write_corpus(docs: list[tuple[str, str]], path: Path) -> int:
    """The corpus as JSONL (id, text); its size in bytes."""
    with path.open("w", encoding="utf-8") as f:
        for doc_id, text in docs:
            f.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    return path.stat().st_size


def _shdb(args: list[str]) -> tuple[float, float]:
    """(seconds the command reports, or its wall time; wall time) of one run."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "simhash_hbase", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise RuntimeError(f"shdb {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    found = _SECONDS.search(done.stderr)
    return (float(found.group(1)) if found else wall), wall


def _rows(folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in sorted(folder.glob("part-*")):
        rows += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    return rows


def _measure(
    tasks: dict[str, Callable[[int], tuple[float, float]]], rounds: int, docs: int
) -> dict[str, Any]:
    _, results = interleaved(tasks, rounds)
    out: dict[str, Any] = {"docs": docs, "rounds": rounds}
    for name, runs in results.items():
        job = min(r[0] for r in runs)  # the least disturbed run of each
        wall = min(r[1] for r in runs)
        out[name] = {"job_s": job, "wall_s": wall, "docs_per_s": docs / job}
    return out


def run_dedup(ctx: Context) -> dict[str, Any]:
    _require_pyspark()
    docs = ctx.corpus()
    data = ctx.work / "spark-corpus.jsonl"
    size = write_corpus(docs, data)
    rounds = ctx.pick(smoke=1, quick=1, full=2)
    want = ctx.work / "shdb-dedup.jsonl"

    def local(_round: int) -> tuple[float, float]:
        _, wall = _shdb(["dedup", str(data), "-o", str(want)])
        return wall, wall

    def spark(master: str) -> Callable[[int], tuple[float, float]]:
        def go(r: int) -> tuple[float, float]:
            out = ctx.work / f"spark-dedup-{master[6]}-{r}"
            return _shdb(["spark", "dedup", str(data), "-o", str(out), "--master", master])

        return go

    log(f"spark dedup: {len(docs)} docs, {size / 1e6:.1f} MB, {rounds} round(s)")
    res = _measure({"shdb": local, **{m: spark(m) for m in MASTERS}}, rounds, len(docs))
    expected = [json.loads(line) for line in want.read_text(encoding="utf-8").splitlines()]
    res["pairs"] = len(expected)
    res["wrong"] = sum(
        _rows(ctx.work / f"spark-dedup-{m[6]}-{r}" / "pairs.jsonl") != expected
        for m in MASTERS
        for r in range(rounds)
    )
    res["bytes"] = size
    return res


def run_ingest(ctx: Context) -> dict[str, Any]:
    _require_pyspark()
    hbase = ctx.require_hbase()
    docs = ctx.corpus()
    data = ctx.work / "spark-corpus.jsonl"
    size = write_corpus(docs, data)
    rounds = ctx.pick(smoke=1, quick=1, full=2)

    def url(name: str, r: int) -> str:
        return f"{hbase.url_base}?prefix={hbase.prefix(f'spk_{name}_{r}')}"

    def local(r: int) -> tuple[float, float]:
        return _shdb(["ingest", str(data), "--index", url("one", r), "--no-dedup", "--no-resume"])

    def spark(master: str) -> Callable[[int], tuple[float, float]]:
        def go(r: int) -> tuple[float, float]:
            rejects = str(ctx.work / f"spark-rejects-{master[6]}-{r}")
            args = ["spark", "ingest", str(data), "--index", url(f"s{master[6]}", r)]
            return _shdb([*args, "--master", master, "--rejects", rejects])

        return go

    log(f"spark ingest: {len(docs)} docs into HBase, {rounds} round(s)")
    res = _measure({"shdb": local, **{m: spark(m) for m in MASTERS}}, rounds, len(docs))
    res["bytes"] = size
    return res


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise Skipped("pyspark is not installed (pip install -e '.[spark]')") from None


def _figures(r: dict[str, Any], what: str, baseline: str, exact: bool) -> list[Figure]:
    one, two, base = r["local[1]"], r["local[2]"], r["shdb"]
    return [
        Figure.report(
            f"{what}: Spark local[1] throughput / {baseline} ({r['docs']} docs)",
            f"{one['docs_per_s']:.0f} docs/s (JVM start + job: {one['wall_s']:.0f} s)",
            f"{base['docs_per_s']:.0f} docs/s",
            bound=f"ratio {one['docs_per_s'] / base['docs_per_s']:.2f}x",
        ),
        Figure.judge(
            f"{what}: Spark local[2] / local[1] throughput (scaling)",
            two["docs_per_s"] / one["docs_per_s"],
            Target.at_least(1.6),
            measured=f"{two['docs_per_s']:.0f} docs/s",
            baseline=f"local[1] {one['docs_per_s']:.0f} docs/s",
            exact=exact,
            bound="2 cores shared by the whole machine: the second core is rarely free",
        ),
    ]


def dedup_figures(r: dict[str, Any]) -> list[Figure]:
    return _figures(r, "spark dedup", "shdb dedup", r["wrong"] == 0)


def ingest_figures(r: dict[str, Any]) -> list[Figure]:
    return _figures(r, "spark ingest (HBase)", "shdb ingest --no-dedup", True)


register(
    Section(
        "spark_dedup", "Spark dedup, local mode", run_dedup, dedup_figures,
        order=35, modes=("quick", "full"),
    )
)  # fmt: skip
register(
    Section(
        "spark_ingest", "Spark ingest into HBase, local mode", run_ingest, ingest_figures,
        needs_hbase=True, order=65, modes=("quick", "full"),
    )
)  # fmt: skip
