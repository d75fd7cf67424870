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
from collections.abc import Callable, Iterator
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
        _rows(ctx.work / f"spark-dedup-{m[6]}-{r}" / "matches.jsonl") != expected
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


def short_documents(n: int, seed: int = 0) -> Iterator[tuple[str, str]]:
    """``n`` short Chinese documents (20-60 words of jieba's dictionary by frequency,
    ~60-180 characters), as a crawl of short posts has them: 2 % are copies of
    one of 200 hot texts (mass copies), 4 % a small edit of an earlier document,
    1 % an earlier document in Traditional script; the rest distinct."""
    import numpy as np
    import opencc

    from .corpus import _vocabulary

    vocab, freqs = _vocabulary()
    cdf = np.cumsum(np.asarray(freqs, dtype=np.float64))
    rng = np.random.default_rng(seed)
    words = np.asarray(vocab, dtype=object)
    lengths = rng.integers(20, 61, n + 200)
    drawn = words[np.searchsorted(cdf, rng.random(int(lengths.sum())) * cdf[-1])]
    ends = np.cumsum(lengths).tolist()
    s2t = opencc.OpenCC("s2t")
    made: list[str] = []
    texts = ("".join(drawn[end - size : end]) for end, size in zip(ends, lengths.tolist()))

    def fresh() -> str:
        return next(texts)

    hot = [fresh() for _ in range(200)]
    kinds = rng.random(n)
    for i in range(n):
        kind = kinds[i]
        if kind < 0.02:
            text = hot[int(rng.integers(len(hot)))]
        elif kind < 0.06 and made:
            old = made[int(rng.integers(len(made)))]
            cut = int(rng.integers(len(old)))
            text = old[:cut] + str(drawn[int(rng.integers(len(drawn)))]) + old[cut + 2 :]
        elif kind < 0.07 and made:
            text = s2t.convert(made[int(rng.integers(len(made)))])
        else:
            text = fresh()
        made.append(text)
        yield f"s{i}", text


def _cpu_of(args: list[str]) -> dict[str, float]:
    """Wall and CPU seconds of one shdb command and every process under it (Spark's
    JVM and its Python workers are not all reaped by the command, so the tree is
    sampled every 0.2 s; a process loses at most its last 0.2 s)."""
    import psutil

    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "simhash_hbase", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path},
    )
    used: dict[int, float] = {}
    root = psutil.Process(child.pid)
    while child.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:  # one of them ended while listed: look again
            continue
        for proc in tree:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            used[proc.pid] = times.user + times.system
        time.sleep(0.2)
    _, err = child.communicate()
    wall = time.perf_counter() - start
    if child.returncode not in (0, 3):
        raise RuntimeError(f"shdb {' '.join(args[:2])} failed: {err.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": sum(used.values())}


def run_scale(ctx: Context) -> dict[str, Any]:
    """`shdb spark dedup --clusters` with local[2] against `shdb dedup --workers 2
    --clusters` on the same generated short documents; clusters must be identical."""
    _require_pyspark()
    n = int(
        os.environ.get("SHDB_SPARK_DOCS") or ctx.pick(smoke=1_000, quick=100_000, full=1_000_000)
    )
    data = ctx.work / f"spark-scale-{n}.jsonl"
    size = write_corpus(list(short_documents(n)), data)
    log(f"spark scale: {n} short docs, {size / 1e6:.1f} MB")
    local_out, spark_out = ctx.work / "scale-clusters.jsonl", ctx.work / "scale-spark"
    local = _cpu_of(["dedup", str(data), "--workers", "2", "--clusters", "-o", str(local_out)])
    log(f"spark scale: shdb dedup {local}")
    args = ["spark", "dedup", str(data), "--clusters", "-o", str(spark_out)]
    spark = _cpu_of([*args, "--master", "local[2]"])
    log(f"spark scale: spark dedup {spark}")
    want = [json.loads(line) for line in local_out.read_text(encoding="utf-8").splitlines()]
    got = [row["ids"] for row in _rows(spark_out / "clusters.jsonl")]
    return {
        "docs": n,
        "bytes": size,
        "shdb": local,
        "spark": spark,
        "clusters": len(want),
        "clustered": sum(len(c) for c in want),
        "identical": got == want,
    }


#: Corpus documents queried against both indexes of spark_bulkload afterwards.
SAME_ANSWER_QUERIES = 2_000


def run_bulkload(ctx: Context) -> dict[str, Any]:
    """`shdb spark ingest` with local[2] into two fresh indexes of the same HBase:
    Puts through the Thrift gateway, then HFiles and bulk load (--bulk-load), on
    the same generated short documents; wall time, CPU of the job's processes and of
    the HBase JVMs for each. Over the Thrift2 gateway, which creates the index table
    pre-split (16 regions: 16 HFiles written in parallel); Thrift1 cannot split a
    table. Afterwards a sample of the documents is queried against both indexes
    (every match, no limit): the answers must be identical."""
    _require_pyspark()
    hbase = ctx.require_hbase()
    n = int(
        os.environ.get("SHDB_SPARK_DOCS") or ctx.pick(smoke=2_000, quick=100_000, full=1_000_000)
    )
    docs = list(short_documents(n))
    data = ctx.work / f"spark-bulk-{n}.jsonl"
    size = write_corpus(docs, data)
    log(f"spark bulk load: {n} short docs, {size / 1e6:.1f} MB")
    out: dict[str, Any] = {"docs": n, "bytes": size}
    modes = {
        "puts": [],
        "bulk": ["--bulk-load", str(ctx.work / "hfiles"), "--zookeeper", hbase.zookeeper],
    }
    urls = {}
    _settle(hbase)  # from its start
    for name, extra in modes.items():
        urls[name] = f"{hbase.thrift2_url}?prefix={hbase.prefix(f'spkbl_{name}')}"
        args = ["spark", "ingest", str(data), "--index", urls[name], "--master", "local[2]"]
        before, load = hbase.server_cpu_seconds(), os.getloadavg()
        run: dict[str, Any] = _cpu_of(
            [*args, "--rejects", str(ctx.work / f"bl-rejects-{name}"), *extra]
        )
        run["load"] = [round(x, 2) for x in (*load, *os.getloadavg())]  # 1/5/15 min, before/after
        # HBase's part of the load includes the flushes and compactions after the job
        run["hbase_busy_after_s"] = _settle(hbase)
        run["hbase_cpu_s"] = hbase.server_cpu_seconds() - before
        log(f"spark bulk load: {name} {run}")
        out[name] = run
    out["answers"] = _same_answers(urls, docs)
    log(f"spark bulk load: answers {out['answers']}")
    return out


def _settle(hbase: Any, quiet: float = 0.05, window: float = 10.0, limit: float = 600.0) -> float:
    """Wait until the HBase JVMs use less than ``quiet`` of a core over ``window``
    seconds, at most ``limit`` seconds; the seconds waited. After a load, HBase's
    flushes and compactions go on: they are that load's cost, and the next run
    would otherwise pay for them in its own HBase CPU and wall time."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        before = hbase.server_cpu_seconds()
        time.sleep(window)
        if hbase.server_cpu_seconds() - before < quiet * window:
            break
    return time.perf_counter() - start


def _same_answers(urls: dict[str, str], docs: list[tuple[str, str]]) -> dict[str, Any]:
    """Query both indexes with the same sample of the corpus's texts (every match
    within k, no limit) and compare the answers: ids, distances, fingerprints,
    similarities and totals."""
    import random

    from simhash_hbase import SimhashIndex

    texts = [text for _, text in random.Random(7).sample(docs, min(SAME_ANSWER_QUERIES, len(docs)))]
    answers = {}
    for name, url in urls.items():
        with SimhashIndex.open(url, create=False) as index:
            answers[name] = [(list(m), m.total) for m in index.query_many(texts, limit=None)]
    puts, bulk = answers["puts"], answers["bulk"]
    return {
        "queries": len(texts),
        "identical": puts == bulk,
        "differing": sum(a != b for a, b in zip(puts, bulk, strict=True)),
        "matches": sum(total for _, total in puts),
        "with_near_copies": sum(total > 1 for _, total in puts),  # more than itself
    }


def bulkload_figures(r: dict[str, Any]) -> list[Figure]:
    puts, bulk = r["puts"], r["bulk"]
    answers = r.get("answers")  # earlier results files have no comparison
    same = (
        f"{answers['queries']:,} queries ({answers['with_near_copies']:,} with near-copies, "
        f"{answers['matches']:,} matches) answered "
        + ("identically" if answers["identical"] else f"DIFFERENTLY ({answers['differing']})")
        if answers
        else ""
    )
    return [
        Figure.judge(
            f"spark ingest --bulk-load (HFiles + bulk load) / Puts through Thrift, "
            f"local[2], wall ({r['docs']:,} docs)",
            bulk["wall_s"] / puts["wall_s"],
            Target.at_most(1.0),
            measured=f"{bulk['wall_s']:.0f} s wall, {bulk['cpu_s']:.0f} s CPU, "
            f"HBase {bulk['hbase_cpu_s']:.0f} s CPU",
            baseline=f"{puts['wall_s']:.0f} s wall, {puts['cpu_s']:.0f} s CPU, "
            f"HBase {puts['hbase_cpu_s']:.0f} s CPU",
            exact=answers is None or answers["identical"],
            bound="; ".join(
                x
                for x in (
                    f"job CPU {bulk['cpu_s'] / puts['cpu_s']:.2f}x, HBase CPU "
                    f"{bulk['hbase_cpu_s'] / max(puts['hbase_cpu_s'], 1e-9):.2f}x",
                    same,
                    _load_range(puts, bulk),
                )
                if x
            ),
        )
    ]


def _load_range(*runs: dict[str, Any]) -> str:
    """The 1-minute load averages at the start and end of the runs, as a range."""
    ones = [r["load"][i] for r in runs if "load" in r for i in (0, 3)]
    return f"load {min(ones):.1f}-{max(ones):.1f}" if ones else ""


def scale_figures(r: dict[str, Any]) -> list[Figure]:
    local, spark = r["shdb"], r["spark"]
    return [
        Figure.judge(
            f"spark dedup --clusters, local[2], wall / shdb dedup --workers 2 ({r['docs']:,} docs)",
            spark["wall_s"] / local["wall_s"],
            Target.at_most(2.0),
            measured=f"{spark['wall_s']:.0f} s wall, {spark['cpu_s']:.0f} s CPU",
            baseline=f"{local['wall_s']:.0f} s wall, {local['cpu_s']:.0f} s CPU",
            exact=r["identical"],
            bound=f"CPU ratio {spark['cpu_s'] / local['cpu_s']:.2f}x; "
            f"{r['clusters']:,} clusters of {r['clustered']:,} documents, "
            + ("identical" if r["identical"] else "NOT identical"),
        )
    ]


register(
    Section(
        "spark_scale", "Spark dedup at scale: local[2] against shdb dedup --workers 2",
        run_scale, scale_figures, order=36, modes=("smoke", "quick", "full"),
    )
)  # fmt: skip
register(
    Section(
        "spark_bulkload", "Spark ingest into HBase: HFiles + bulk load against Puts",
        run_bulkload, bulkload_figures, needs_hbase=True, order=66,
        modes=("smoke", "quick", "full"),
    )
)  # fmt: skip
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
