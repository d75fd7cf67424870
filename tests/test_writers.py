"""Writers that overlap on one embedded index (issue 39): check-and-add gives exactly
one new across threads, processes and `shdb serve` processes."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import random
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from simhash_hbase import SimhashIndex

from .serve_server import live_server

ROOT = Path(__file__).resolve().parents[1]
SHDB = [sys.executable, "-m", "simhash_hbase"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _texts(n: int, seed: int = 39) -> list[str]:
    """``n`` unrelated texts (random Han sentences: no two near each other)."""
    rng = random.Random(seed)
    return ["".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(120)) for _ in range(n)]


def test_threads_of_one_index_exactly_one_new_per_round(tmp_path: Path) -> None:
    """20 threads on one SimhashIndex check and add one text at once, 10 rounds:
    exactly one is new each round, and every other answer names it."""
    threads, rounds = 20, 10
    texts = _texts(rounds)
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.fingerprint(texts[0])  # jieba loaded before the barrier
        barrier = threading.Barrier(threads)
        answers: dict[str, list[str]] = {}

        def submit(t: int) -> None:
            for r, text in enumerate(texts):
                barrier.wait()
                (found,) = index.check_and_add_texts([(f"r{r}-t{t}", text)], always=False)
                answers[f"r{r}-t{t}"] = [m.doc_id for m in found]

        workers = [threading.Thread(target=submit, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        new = [doc_id for doc_id, near in answers.items() if not near]
        per_round = Counter(doc_id.split("-")[0] for doc_id in new)
        assert [per_round[f"r{r}"] for r in range(rounds)] == [1] * rounds
        assert all(near[0].split("-")[0] == i.split("-")[0] for i, near in answers.items() if near)
        assert sorted(d.doc_id for d in index.documents()) == sorted(new)


def _hammer(url: str, n: int, texts: list[str], barrier: Any, out: Any) -> None:
    """One process: check and add every text three times, in step with the others."""
    with SimhashIndex.open(url) as index:
        index.fingerprint(texts[0])
        answers = {}
        for r, text in enumerate(texts):
            barrier.wait()
            for j in range(3):
                doc_id = f"r{r}-p{n}-{j}"
                (found,) = index.check_and_add_texts([(doc_id, text)], always=False)
                answers[doc_id] = [m.doc_id for m in found]
        out.put(answers)


def test_processes_on_one_folder_exactly_one_new_per_text(tmp_path: Path) -> None:
    """Three processes (as three `shdb serve` on one folder would) hammer
    check-and-add of the same ten texts: exactly one new per distinct text."""
    processes, texts, url = 3, _texts(10, seed=43), str(tmp_path / "ix")
    SimhashIndex.open(url).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_hammer, args=(url, n, texts, barrier, out)) for n in range(processes)
    ]
    for p in procs:
        p.start()
    answers: dict[str, list[str]] = {}
    for _ in procs:
        answers |= out.get(timeout=300)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    new = Counter(doc_id.split("-")[0] for doc_id, near in answers.items() if not near)
    assert len(answers) == 90 and [new[f"r{r}"] for r in range(len(texts))] == [1] * len(texts)
    with SimhashIndex.open(url, readonly=True) as index:
        assert sum(1 for _ in index.documents()) == len(texts)


def test_two_serve_processes_on_one_folder_exactly_one_new(tmp_path: Path) -> None:
    """Two `shdb serve` on one index folder, 20 concurrent check-and-adds of one text
    split across them, 10 rounds: exactly one new each round."""
    url, texts = str(tmp_path / "ix"), _texts(10, seed=7)
    SimhashIndex.open(url).close()
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                live_server(url, tmp_path / f"s{n}.log", "--fingerprint-workers", "0")
            )
            for n in range(2)
        ]

        async def round_of(r: int, client: httpx.AsyncClient) -> list[dict[str, Any]]:
            posts = (
                client.post(
                    f"{servers[i % 2].url}/v1/check-and-add",
                    json={"id": f"r{r}-{i}", "text": texts[r]},
                )
                for i in range(20)
            )
            return [response.json() for response in await asyncio.gather(*posts)]

        async def rounds() -> list[int]:
            async with httpx.AsyncClient(timeout=120) as client:
                return [sum(a["new"] for a in await round_of(r, client)) for r in range(len(texts))]

        assert asyncio.run(rounds()) == [1] * len(texts)
        assert all(server.terminate() for server in servers)


def test_a_folder_left_by_a_failed_creation_is_created_again(tmp_path: Path) -> None:
    """An empty data.mdb beside lock files is what a cut creation leaves: not refused."""
    folder = tmp_path / "ix"
    folder.mkdir()
    for name in ("data.mdb", "lock.mdb", "shdb-write.lock"):
        (folder / name).touch()
    with SimhashIndex.open(str(folder)) as index:
        index.add_fingerprint("a", 1 << 40 | 7)
        assert index.get("a") is not None
