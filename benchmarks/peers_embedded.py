"""The embedded store against in-memory peers, on the same fingerprints in one run.

* ingest: ``index_fingerprints`` into a fresh embedded index (without and with
  the near-copy lookups) vs PyPI ``simhash.SimhashIndex.add`` (a dict in RAM),
  the three alternating, rotated per round;
* one query: ``query_fingerprint`` (k=3) vs FAISS ``IndexBinaryMultiHash(64, 4,
  16)`` ``range_search`` with radius 4 (FAISS's bound is strict: < 4 is <= 3),
  one thread, on the same codes and queries, alternating in blocks;
* batch: ``query_fingerprints`` of 1,000 vs one FAISS ``range_search`` of the
  same 1,000, alternating.

Each side's answers are checked against NumPy brute force (the batch's too). Times
are wall clock (the figure) and CPU time of this thread (shown beside it: the machine
is shared, and CPU time is what load does not inflate).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import report
from .common import K, log
from .context import Context
from .registry import Figure, Section, Skipped, Target, register
from .timing import percentile, rotated

BATCH = 1000  # queries per batch call (issue #13)
BLOCK = 20  # single queries per side before the other side runs


def _clock(fn: Callable[..., Any], *args: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this thread, result) of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    out = fn(*args)
    return time.perf_counter() - wall, time.thread_time() - cpu, out


def _brute(fps: np.ndarray, query: int, k: int) -> set[int]:
    dist = np.bitwise_count(fps ^ np.uint64(query))
    return set(np.flatnonzero(dist <= k).tolist())


def _ingest(ctx: Context, fps: np.ndarray, rounds: int) -> dict[str, Any]:
    from simhash import Simhash
    from simhash import SimhashIndex as PeerIndex

    from simhash_hbase import SimhashIndex
    from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

    ids = [f"d{i}" for i in range(len(fps))]
    pairs = list(zip(ids, fps.tolist()))
    objs = [Simhash(int(f)) for f in fps]  # the peer's input type, built off the clock

    def peer() -> Any:
        index = PeerIndex([], k=K)
        for doc_id, obj in zip(ids, objs):
            index.add(doc_id, obj)
        return index

    def shdb(find_k: int | None) -> Callable[[], Any]:
        def run() -> Any:
            path = ctx.work / "peers_embedded"
            shutil.rmtree(path, ignore_errors=True)
            with SimhashIndex.open(str(path)) as index:
                return index_fingerprints(index, pairs, IngestOptions(find_k=find_k)).added

        return run

    tasks = {"peer": peer, "shdb": shdb(None), "shdb_dedup": shdb(K)}
    wall: dict[str, list[float]] = {name: [] for name in tasks}
    cpu: dict[str, list[float]] = {name: [] for name in tasks}
    for r in range(rounds):
        for name in rotated(list(tasks), r):
            w, c, _ = _clock(tasks[name])
            wall[name].append(w)
            cpu[name].append(c)
            log(f"  ingest {name}: {len(fps) / w:,.0f} docs/s wall, {len(fps) / c:,.0f} per CPU s")
    return {name: {"wall_s": min(wall[name]), "cpu_s": min(cpu[name])} for name in tasks}


def _queries(ctx: Context, fps: np.ndarray, n_queries: int, rounds: int) -> dict[str, Any]:
    import faiss

    from simhash_hbase import SimhashIndex

    faiss.omp_set_num_threads(1)
    path = ctx.work / "peers_embedded"  # as the last ingest left it: ids d0, d1, ...
    codes = fps.view(np.uint8).reshape(len(fps), 8)  # a bijection: Hamming distance is kept
    peer = faiss.IndexBinaryMultiHash(64, 4, 16)
    peer.add(codes)

    rng = np.random.default_rng(ctx.plan.seed + 13)
    picks = fps[rng.integers(0, len(fps), n_queries)]
    flips = [rng.choice(64, size=int(d), replace=False) for d in rng.integers(0, K + 1, n_queries)]
    queries = np.array(
        [int(p) ^ sum(1 << int(b) for b in bits) for p, bits in zip(picks.tolist(), flips)],
        dtype=np.uint64,
    )
    qcodes = queries.view(np.uint8).reshape(n_queries, 8)
    wrong = 0
    with SimhashIndex.open(str(path), readonly=True) as index:
        sides: dict[str, Callable[[int], Any]] = {
            "shdb": lambda j: index.query_fingerprint(int(queries[j]), K),
            "faiss": lambda j: peer.range_search(qcodes[j : j + 1], K + 1),
        }
        wall: dict[str, list[float]] = {s: [] for s in sides}
        cpu: dict[str, list[float]] = {s: [] for s in sides}
        for b, start in enumerate(range(0, n_queries, BLOCK)):
            for side in rotated(list(sides), b):
                for j in range(start, min(start + BLOCK, n_queries)):
                    w, c, out = _clock(sides[side], j)
                    wall[side].append(w)
                    cpu[side].append(c)
                    want = _brute(fps, int(queries[j]), K)
                    got = (
                        {int(m.doc_id[1:]) for m in out} if side == "shdb" else set(out[2].tolist())
                    )
                    wrong += got != want
        batch_wall: dict[str, list[float]] = {"shdb": [], "faiss": []}
        batch_cpu: dict[str, list[float]] = {"shdb": [], "faiss": []}
        chunk = queries[:BATCH].tolist()
        batch_sides: dict[str, Callable[[], Any]] = {
            "shdb": lambda: index.query_fingerprints(chunk, K),
            "faiss": lambda: peer.range_search(qcodes[:BATCH], K + 1),
        }
        for r in range(rounds):
            for side in rotated(list(batch_sides), r):
                w, c, _ = _clock(batch_sides[side])
                batch_wall[side].append(w)
                batch_cpu[side].append(c)
        for j, matches in enumerate(index.query_fingerprints(chunk, K)):
            wrong += {int(m.doc_id[1:]) for m in matches} != _brute(fps, chunk[j], K)
    return {
        "n_queries": n_queries,
        "wrong": wrong,
        "p50_us": {s: percentile(v, 50) * 1e6 for s, v in wall.items()},
        "p50_cpu_us": {s: percentile(v, 50) * 1e6 for s, v in cpu.items()},
        "batch": len(chunk),
        "batch_ms": {s: float(np.median(v)) * 1e3 for s, v in batch_wall.items()},
        "batch_cpu_ms": {s: float(np.median(v)) * 1e3 for s, v in batch_cpu.items()},
    }


def run(ctx: Context) -> dict[str, Any]:
    try:
        import faiss  # noqa: F401
        import simhash  # noqa: F401
    except ImportError as exc:
        raise Skipped(f"{exc.name} is not installed (the bench extra has it)") from exc
    n = ctx.pick(smoke=3_000, quick=1_000_000, full=1_000_000)
    fps = ctx.fingerprints(n)
    log(f"embedded vs in-memory peers at N={n:,}")
    out: dict[str, Any] = {"n": n}
    out["ingest"] = _ingest(ctx, fps, rounds=ctx.pick(smoke=1, quick=1, full=2))
    out["query"] = _queries(
        ctx, fps, ctx.pick(smoke=200, quick=2000, full=5000), ctx.pick(smoke=3, quick=5, full=9)
    )
    shutil.rmtree(ctx.work / "peers_embedded", ignore_errors=True)
    return out


def _speed(peer: float, ours: float) -> float:
    """How many times faster we are (peer time / our time): >= 1.0 meets parity."""
    return peer / ours if ours else float("nan")


def figures(r: dict[str, Any]) -> list[Figure]:
    n, ing, q = r["n"], r["ingest"], r["query"]
    peer = ing["peer"]
    rows = []
    plain, lookups = ing["shdb"], ing["shdb_dedup"]
    extra = lookups["cpu_s"] - plain["cpu_s"]
    bounds = {
        # Measured apart at 1 M (200,000 a batch): 8.8 s CPU, of which 2.3 s LMDB
        # putmulti, 2.4 s building the sorted keys in NumPy, ~2 s the per-record checks.
        "shdb": f"CPU {plain['cpu_s']:.1f} s vs the peer's {peer['cpu_s']:.1f} s; the wall "
        f"time adds {plain['wall_s'] - plain['cpu_s']:.1f} s of waiting (fsync'd commits of "
        "a ~1.3 GB B+tree, 10 keys a document, and the machine's load), the peer keeps "
        "4 strings a document in a dict in RAM",
        "shdb_dedup": f"the lookups alone cost {extra:.1f} s CPU "
        f"({extra / n * 1e6:.1f} µs a document: 10 B+tree seeks and the in-batch "
        f"pairs) = {extra / peer['cpu_s']:.2f}x the peer's whole ingest, "
        "which looks nothing up",
    }
    for name, what in (("shdb", "no lookups"), ("shdb_dedup", "with near-copy lookups, k=3")):
        ours = ing[name]
        rows.append(
            Figure.judge(
                f"embedded ingest ({what}) vs SimhashIndex.add (N={n:,})",
                _speed(peer["wall_s"], ours["wall_s"]),
                Target.at_least(1.0),
                measured=f"{n / ours['wall_s']:,.0f} docs/s "
                f"(CPU: {_speed(peer['cpu_s'], ours['cpu_s']):.2f}x)",
                baseline=f"{n / peer['wall_s']:,.0f} docs/s",
                bound=bounds[name],
            )
        )
    p50, cpu = q["p50_us"], q["p50_cpu_us"]
    rows.append(
        Figure.judge(
            f"embedded query_fingerprint p50 vs FAISS MultiHash range_search (N={n:,})",
            _speed(p50["faiss"], p50["shdb"]),
            Target.at_least(1.0),
            measured=f"{p50['shdb']:.1f} µs (CPU {cpu['shdb']:.1f} µs: "
            f"{_speed(cpu['faiss'], cpu['shdb']):.2f}x)",
            baseline=f"{p50['faiss']:.1f} µs (CPU {cpu['faiss']:.1f} µs)",
            exact=q["wrong"] == 0,
            bound="10 LMDB B+tree seeks a query (5x10), ~1 µs CPU each here",
        )
    )
    bms, bcpu = q["batch_ms"], q["batch_cpu_ms"]
    rows.append(
        Figure.judge(
            f"embedded query_fingerprints({q['batch']:,}) vs FAISS batch range_search",
            _speed(bms["faiss"], bms["shdb"]),
            Target.at_least(1.0),
            measured=f"{bms['shdb']:.1f} ms (CPU {bcpu['shdb']:.1f} ms)",
            baseline=f"{bms['faiss']:.1f} ms (CPU {bcpu['faiss']:.1f} ms)",
            exact=q["wrong"] == 0,
            # 10,000 sorted set_range calls alone, at 1 M: 13.7 ms CPU (random order: 16.7).
            bound=f"10,000 LMDB B+tree seeks per 1,000 queries (5x10: 10 prefixes each, "
            f"distinct ones once, in key order), ~1.3 µs CPU each alone = ~13 ms, above "
            f"FAISS's whole batch ({bcpu['faiss']:.1f} ms CPU: 4 in-RAM hash probes a "
            "query in C++); the rest is ~7 ms of Python, ~0.7 µs a seek",
        )
    )
    return rows


def render(results: dict[str, Any]) -> str:
    r = results["peers_embedded"]
    q = r["query"]
    return report.fill(
        "bench/peers_embedded.md",
        n=f"{r['n']:,}",
        queries=f"{q['n_queries']:,}",
        wrong=q["wrong"],
    )


register(
    Section(
        "peers_embedded",
        "Embedded store vs in-memory peers (SimhashIndex.add, FAISS MultiHash)",
        run,
        figures,
        render,
        order=42,
    )
)
