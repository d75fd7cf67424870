"""Writers that overlap on one embedded index (issues 39 and 43): check-and-add gives
exactly one new across threads and processes, two ingests never share a run, and
readers never wait for a writer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.errors import IndexBusy, IndexNotFound
from simhash_hbase.store import Store
from simhash_hbase.store.lock import RUN_ROW, SECTION_ROW, LeaseLock, LeaseSection

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
    for name in ("data.mdb", "lock.mdb", "shdb-write.lock", "shdb-run-index.lock"):
        (folder / name).touch()
    with SimhashIndex.open(str(folder)) as index:
        index.add_fingerprint("a", 1 << 40 | 7)
        assert index.get("a") is not None


def _fingerprint_corpus(path: Path, n: int, seed: int = 5) -> list[str]:
    """``n`` fingerprint lines; every tenth a near-copy of one 1 to 500 lines before."""
    rng = random.Random(seed)
    fps: list[int] = []
    for i in range(n):
        near = i % 10 == 9
        earlier = fps[i - rng.randint(1, min(i, 500))] if near else 0
        fps.append(earlier ^ 1 << rng.randrange(64) if near else rng.getrandbits(64))
    ids = [f"d{i:06d}" for i in range(n)]
    path.write_text("".join(f"{i}\t{fp:016x}\n" for i, fp in zip(ids, fps)), encoding="utf-8")
    return ids


def _ingest(corpus: Path, index: Path, report: Path) -> list[str]:
    return [*SHDB, "ingest", "--fingerprints", str(corpus), "-i", str(index),
            "--report", str(report), "--batch-size", "100"]  # fmt: skip


def _until(what: str, ready: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _holds(url: Path, doc_id: str) -> bool:
    try:
        with SimhashIndex.open(str(url), create=False, readonly=True) as index:
            return index.get(doc_id) is not None
    except IndexNotFound:  # not yet created
        return False


def test_two_ingests_into_one_index_second_refused_nothing_lost(tmp_path: Path) -> None:
    """A second `shdb ingest` into an index another ingest is writing is refused,
    naming the first one's pid and start time; the first finishes with every
    document held and each report line once (the report of a run alone); readers
    answer meanwhile."""
    corpus = tmp_path / "fps.tsv"
    ids = _fingerprint_corpus(corpus, 20_000)
    alone, alone_report = tmp_path / "alone", tmp_path / "alone.jsonl"
    subprocess.run(_ingest(corpus, alone, alone_report), env=ENV, check=True, timeout=300)
    index, report = tmp_path / "ix", tmp_path / "report.jsonl"
    first = subprocess.Popen(_ingest(corpus, index, report), env=ENV, cwd=ROOT)
    try:
        _until("the first ingest's first batch", lambda: _holds(index, ids[0]))
        started = time.monotonic()
        with SimhashIndex.open(str(index), create=False, readonly=True) as reader:
            assert reader.get(ids[0]) is not None and reader.stats()["documents"] >= 1
            reader.query_fingerprint(0x0123456789ABCDEF)
        second = subprocess.run(
            _ingest(corpus, index, report), env=ENV, cwd=ROOT, capture_output=True, timeout=300
        )
        overlapped = first.poll() is None
        message = second.stderr.decode()
        assert second.returncode == 2, (overlapped, message)
        assert overlapped, "the first ingest ended before the second was refused"
        assert time.monotonic() - started < 30
        assert f"pid {first.pid}" in message and "started" in message and "shdb ingest" in message
        assert first.wait(300) == 0
    finally:
        first.kill()
        first.wait()
    lines = report.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines))
    alone = alone_report.read_text(encoding="utf-8").splitlines()
    assert sorted(map(_untimed, lines)) == sorted(map(_untimed, alone))  # stored at other times
    with SimhashIndex.open(str(index), create=False, readonly=True) as reader:
        assert len(reader.get_many(ids)) == len(ids)


HOLD = """
import sys, time
from simhash_hbase import SimhashIndex
index = SimhashIndex.open(sys.argv[1])
with index.sole_writer("test holder"), index._store.write_section():
    print("held", flush=True)
    time.sleep(600)
"""


def test_readers_never_wait_and_a_dead_holder_leaves_no_lock(tmp_path: Path) -> None:
    """While a process holds the whole index's run lock and the write section,
    readers (library and CLI) answer and a check-and-add waits; once the holder is
    killed, it goes through, and so does an ingest (a run of another input never
    waits for a run lock: tests/test_concurrent_ingests.py)."""
    url, corpus = tmp_path / "ix", tmp_path / "fps.tsv"
    ids = _fingerprint_corpus(corpus, 300)
    with SimhashIndex.open(str(url)) as index:
        index.add_fingerprint("held", 0x0123456789ABCDEF)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(url)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with SimhashIndex.open(str(url), create=False, readonly=True) as reader:
            assert [m.doc_id for m in reader.query_fingerprint(0x0123456789ABCDEF)] == ["held"]
            assert reader.get("held") is not None and reader.stats()["documents"] == 1
        query = subprocess.run(
            [*SHDB, "get", "-i", str(url), "held", "--json"],
            env=ENV,
            capture_output=True,
            timeout=60,
        )
        assert query.returncode == 0 and json.loads(query.stdout)["id"] == "held"
        with SimhashIndex.open(str(url)) as writer:
            done = threading.Event()

            def check() -> None:
                writer.add_fingerprint("late", 0x0F0F0F0F0F0F0F0F)
                done.set()

            waiting = threading.Thread(target=check)
            waiting.start()
            assert not done.wait(1.0), "a write went through while another process held the lock"
            holder.send_signal(signal.SIGKILL)
            assert done.wait(30)
            waiting.join()
    finally:
        holder.kill()
        holder.wait()
    subprocess.run(_ingest(corpus, url, tmp_path / "r.jsonl"), env=ENV, check=True, timeout=120)
    with SimhashIndex.open(str(url), create=False, readonly=True) as reader:
        assert len(reader.get_many([*ids, "held", "late"])) == len(ids) + 2


def test_sole_writer_waits_then_refuses_naming_the_holder(tmp_path: Path) -> None:
    """The library's run lock: another job (here another thread) waits up to
    ``wait`` s, then gets IndexBusy with the holder's pid and start time; a job
    that waits longer than the holder holds gets it."""
    url = str(tmp_path / "ix")
    outcome: list[object] = []

    def second_job(wait: float) -> None:
        started = time.monotonic()
        try:
            with index.sole_writer("job two", wait=wait):
                outcome.append(json.loads((tmp_path / "ix" / "shdb-run-index.lock").read_text()))
        except IndexBusy as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    with SimhashIndex.open(url) as index:
        with index.sole_writer("job one"), index.sole_writer("job one, nested"):  # reentrant
            worker = threading.Thread(target=second_job, args=(0.3,))
            worker.start()
            worker.join()
        busy, waited = outcome
        assert isinstance(busy, IndexBusy) and isinstance(waited, float) and waited >= 0.3
        assert busy.holder["pid"] == os.getpid() and busy.holder["job"] == "job one"
        assert f"pid {os.getpid()}" in str(busy) and "started" in str(busy)
        outcome.clear()
        with index.sole_writer("job one"):
            worker = threading.Thread(target=second_job, args=(30.0,))
            worker.start()
            time.sleep(0.2)
        worker.join()
        assert outcome[0]["job"] == "job two"  # type: ignore[index]


class _LeaseSectioned:
    """The embedded store with HBase's write section: a lease row in its meta
    table (:class:`LeaseSection`), whose checkAndPut both stores share."""

    def __init__(self, store: Store) -> None:
        self._held = store
        self._section = LeaseSection(store)

    def write_section(self) -> contextlib.AbstractContextManager[Any]:
        return self._section.held()

    def __getattr__(self, name: str) -> object:
        return getattr(self._held, name)


def test_lease_section_exclusive_across_handles_and_threads(tmp_path: Path) -> None:
    """HBase's section (the meta row ``write-section``) with 10 threads on two
    handles (as two replicas), 5 rounds of one fingerprint: exactly one new, and
    the row is free after; a hold whose release was lost is taken again at once
    by its own handle, and only by it."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        store = index._store
        sections = [_LeaseSectioned(store), _LeaseSectioned(store)]
        barrier, found = threading.Barrier(10), {}
        fps = [random.Random(r).getrandbits(64) for r in range(5)]

        def submit(t: int) -> None:
            for r in range(5):
                barrier.wait()
                doc = Document(f"r{r}-t{t}", fps[r])
                found[doc.doc_id] = index._writer.check_and_add(
                    sections[t % 2],
                    [doc],
                    3,
                    None,
                    False,
                    None,  # type: ignore[arg-type]
                )[0].total

        workers = [threading.Thread(target=submit, args=(t,)) for t in range(10)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        new = Counter(doc_id.split("-")[0] for doc_id, total in found.items() if not total)
        assert [new[f"r{r}"] for r in range(5)] == [1] * 5
        assert store.get_meta(SECTION_ROW) == {"free": True}
        section = LeaseSection(store)
        with section.held():
            mine = store.get_meta(SECTION_ROW)
        store.put_meta(SECTION_ROW, mine)  # a release lost (HBase gone for a moment)
        with section.held(wait=0):  # its own last hold: taken at once, not after the lease
            assert store.get_meta(SECTION_ROW) not in (mine, {"free": True})
        store.put_meta(SECTION_ROW, mine)  # for another handle, a live lease: refused
        with pytest.raises(IndexBusy), LeaseSection(store).held(wait=0):
            pass


def test_lease_lock_refuses_waits_renews_and_takes_over_a_dead_one(tmp_path: Path) -> None:
    """HBase's run lock (a lease row in meta), here over the embedded store's meta
    table, whose checkAndPut it shares: a second holder is refused naming the first
    (pid, job), gets it by waiting, or at once when the row's lease has ended (a
    killed run); the holder renews its lease while it holds; reentrant."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        store = index._store
        first, second = LeaseLock(store, RUN_ROW), LeaseLock(store, RUN_ROW)
        with first.held("job one"), first.held("job one, nested"):
            row = store.get_meta(RUN_ROW)
            assert row is not None and row["pid"] == os.getpid() and row["job"] == "job one"
            with pytest.raises(IndexBusy) as info, second.held("job two"):
                pass
            assert f"pid {os.getpid()}" in str(info.value) and "job one" in str(info.value)
            assert "a run killed on another host holds it 60 s after its last renewal" in str(
                info.value
            )
        assert store.get_meta(RUN_ROW) == {"free": True}  # released by the outermost hold
        with second.held("job two"):
            pass
        store.put_meta(RUN_ROW, {"pid": 1, "job": "killed", "at": 0})  # a lease long over
        with second.held("job three"):
            assert store.get_meta(RUN_ROW)["job"] == "job three"  # type: ignore[index]
        ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        dead = {"pid": int(ended.stdout), "host": socket.gethostname(), "job": "killed"}
        store.put_meta(RUN_ROW, dead | {"at": int(time.time() * 1000)})  # a live lease
        with second.held("job four"):  # but its holder, on this host, is gone
            assert store.get_meta(RUN_ROW)["job"] == "job four"  # type: ignore[index]
        outcome: list[str] = []

        def waiting() -> None:
            with second.held("waited", wait=60):
                outcome.append(store.get_meta(RUN_ROW)["job"])  # type: ignore[index]

        quick = LeaseLock(store, RUN_ROW, lease_ms=600)
        with quick.held("renewing"):
            at = store.get_meta(RUN_ROW)["at"]  # type: ignore[index]
            _until("a renewal", lambda: store.get_meta(RUN_ROW)["at"] > at)  # type: ignore[index]
            worker = threading.Thread(target=waiting)
            worker.start()
        worker.join()
        assert outcome == ["waited"]


def _untimed(line: str) -> str:
    return re.sub(r', "time": (null|"[^"]*")', "", line)
