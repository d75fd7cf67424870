"""Concurrent writers see each other (issue 42, deliverable 3): however the
lookups and writes of several writers interleave, every near-copy pair is
reported once, by the writer of the later document, exactly as one writer
reports them (docs/SPEC.md, "Concurrent writers")."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.index.lookup import Finder
from simhash_hbase.index.write import Writer
from simhash_hbase.records import Lookup

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
K = 3
PATIENCE_S = 0.2  # a writer whose turn it is but that waits for the section: go on without it

Pair = frozenset[str]


def planted(rng: random.Random, prefix: str, pairs: int, alone: int) -> list[Document]:
    """``pairs`` planted pairs (an original and a copy one bit away) and ``alone``
    unrelated documents, all random 64-bit fingerprints (no other pair within K)."""
    docs = []
    for p in range(pairs):
        fp = rng.getrandbits(64)
        docs += [
            Document(f"{prefix}p{p}a", fp),
            Document(f"{prefix}p{p}b", fp ^ 1 << rng.randrange(64)),
        ]
    return docs + [Document(f"{prefix}u{u}", rng.getrandbits(64)) for u in range(alone)]


def one_writer(docs: Sequence[Document]) -> set[Pair]:
    """The pairs one writer reports: every pair within K (the index is exact)."""
    return {
        frozenset((a.doc_id, b.doc_id))
        for a, b in itertools.combinations(docs, 2)
        if (a.fingerprint ^ b.fingerprint).bit_count() <= K
    }


def reported(found: Sequence[Any]) -> Counter[Pair]:
    return Counter(frozenset((f.doc_id, m.doc_id)) for f in found for m in f.matches)


class Turns:
    """The writers' steps (a batch's lookups, its write) in ``order`` (writer
    numbers), each run whole before the next starts. A writer whose turn it is
    but which cannot take it (it waits for another writer's section) is passed
    over after ``PATIENCE_S``: the order is the one asked for, as far as the
    writers' locks allow it."""

    def __init__(self, order: list[int]) -> None:
        self.order = order
        self.cond = threading.Condition()
        self.writer = threading.local()

    def step(self, run: Callable[[], Any]) -> Any:
        w = getattr(self.writer, "n", None)
        if w is None:  # not a writer's thread
            return run()
        with self.cond:
            self.cond.wait_for(lambda: self.order[0] == w, timeout=PATIENCE_S)
        try:
            return run()
        finally:
            with self.cond:
                self.order.remove(w)
                self.cond.notify_all()


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> list[Turns]:
    """Routes every batch's lookups and write through the current Turns."""
    current: list[Turns] = []
    lookups, write = Finder.lookups, Writer.write

    def lookups_(self: Finder, *args: Any, **kwargs: Any) -> Any:
        run = lambda: lookups(self, *args, **kwargs)  # noqa: E731
        return current[0].step(run) if current else run()

    def write_(self: Writer, *args: Any, **kwargs: Any) -> Any:
        run = lambda: write(self, *args, **kwargs)  # noqa: E731
        return current[0].step(run) if current else run()

    monkeypatch.setattr(Finder, "lookups", lookups_)
    monkeypatch.setattr(Writer, "write", write_)
    return current


_examples = itertools.count()


def interleaved(
    handles: Sequence[SimhashIndex], turns: list[Turns], data: st.DataObject
) -> tuple[list[Document], Counter[Pair]]:
    """Documents planted by hypothesis, split among ``len(handles)`` writers in
    batches of hypothesis' choosing, written by one thread per writer (an ingest's
    batches or a serve replica's check-and-adds) whose steps interleave in an order
    hypothesis draws; every reported pair."""
    n = len(handles)
    prefix = f"e{next(_examples)}-"
    # fingerprints of their own: an HBase index serves every example
    rng = random.Random(f"{prefix}{data.draw(st.integers(0, 2**32), label='seed')}")
    docs = planted(rng, prefix, data.draw(st.integers(1, 6)), data.draw(st.integers(0, 3)))
    places = st.tuples(st.integers(0, n - 1), st.integers(0, 2))
    where = data.draw(st.lists(places, min_size=len(docs), max_size=len(docs)), label="places")
    batches: list[list[list[Document]]] = [[[] for _ in range(3)] for _ in range(n)]
    for doc, (w, b) in zip(docs, where):
        batches[w][b].append(doc)
    batches = [[b for b in mine if b] for mine in batches]
    steps = [w for w in range(n) for _ in range(2 * len(batches[w]))]  # lookups, write
    current = Turns(list(data.draw(st.permutations(steps), label="order")))
    turns[:] = [current]
    found: list[Any] = []
    errors: list[BaseException] = []

    checks = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="check-and-add")

    def writer(w: int) -> None:
        current.writer.n = w
        try:
            for batch in batches[w]:
                if checks[w]:  # a serve replica's group commit: check and add them all
                    answers = handles[w].check_and_add(batch, K, always=True, limit=None)
                    found.extend(Lookup(d.doc_id, m) for d, m in zip(batch, answers))
                else:  # an ingest batch
                    found.extend(handles[w].add_documents(batch, find_k=K, limit=None))
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    turns.clear()
    assert errors == []
    return docs, reported(found)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(2, 4), data=st.data())
def test_any_interleaving_on_the_embedded_store_reports_what_one_writer_reports(
    tmp_path_factory: pytest.TempPathFactory, turns: list[Turns], n: int, data: st.DataObject
) -> None:
    """Threads sharing one handle (a process's writers; other processes take the
    same ``flock``): the section already serialises each batch's lookups and write."""
    with SimhashIndex.open(str(tmp_path_factory.mktemp("ix") / "ix")) as index:
        docs, pairs = interleaved([index] * n, turns, data)
    assert set(pairs) == one_writer(docs) and set(pairs.values()) <= {1}


@pytest.fixture
def hbase_writers(hbase_url: str) -> Iterator[list[SimhashIndex]]:
    """Four handles on one HBase index: four writers, as four processes would be."""
    handles = [SimhashIndex.open(hbase_url) for _ in range(4)]
    yield handles
    for handle in handles:
        handle.close()


@pytest.mark.hbase
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(2, 4), data=st.data())
def test_any_interleaving_on_hbase_reports_what_one_writer_reports(
    hbase_writers: list[SimhashIndex], turns: list[Turns], n: int, data: st.DataObject
) -> None:
    """Handles of their own (replicas, ingest processes): before the section, a
    batch looked up before another's write and wrote after it missed the pair."""
    docs, pairs = interleaved(hbase_writers[:n], turns, data)
    assert set(pairs) == one_writer(docs) and set(pairs.values()) <= {1}


WRITER = """
import sys
from simhash_hbase import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints
url, source, report, go = sys.argv[1:5]
items = [(i, int(h, 16)) for i, h in (line.split() for line in open(source))]
with SimhashIndex.open(url, create=False) as index, open(report, "w") as out:
    def line(found):
        out.writelines(f"{found.doc_id}\\t{m.doc_id}\\n" for m in found.matches)
    while not __import__("os").path.exists(go):
        pass
    index_fingerprints(index, items, IngestOptions(batch_size=20, limit=None), on_duplicate=line)
"""


def concurrent_writers(url: str, tmp_path: Path, writers: int, pairs: int) -> tuple[int, int]:
    """``writers`` processes ingest fingerprints into ``url`` at once (the
    ingest job's batches, lookups and report lines), with ``pairs`` planted pairs
    whose original and copy go to two different writers at the same place in
    their input (both in flight at once); (planted pairs reported, lines in all)."""
    rng = random.Random(42 + writers)
    inputs: list[list[Document]] = [[] for _ in range(writers)]
    for p in range(pairs):
        fp = rng.getrandbits(64)
        a, b = rng.sample(range(writers), 2)
        inputs[a].append(Document(f"p{p}a", fp))
        inputs[b].append(Document(f"p{p}b", fp ^ 1 << rng.randrange(64)))
        for w in set(range(writers)) - {a, b}:
            inputs[w].append(Document(f"p{p}u{w}", rng.getrandbits(64)))
    with SimhashIndex.open(url):
        pass  # created once, before the writers open it
    go = tmp_path / "go"
    procs = []
    for w, docs in enumerate(inputs):
        source = tmp_path / f"in{w}.tsv"
        source.write_text("".join(f"{d.doc_id}\t{d.fingerprint:016x}\n" for d in docs))
        args = [sys.executable, "-c", WRITER, url, str(source), str(tmp_path / f"out{w}"), str(go)]
        procs.append(subprocess.Popen(args, env=ENV, cwd=ROOT))
    go.touch()
    assert [p.wait(timeout=600) for p in procs] == [0] * writers
    lines = [
        frozenset(line.split("\t"))
        for w in range(writers)
        for line in (tmp_path / f"out{w}").read_text().splitlines()
    ]
    want = {frozenset((f"p{p}a", f"p{p}b")) for p in range(pairs)}
    return len(want & set(lines)), len(lines)


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_processes_report_every_planted_pair_once_embedded(
    tmp_path: Path, writers: int
) -> None:
    found, lines = concurrent_writers(str(tmp_path / "ix"), tmp_path, writers, 200)
    assert (found, lines) == (200, 200)


@pytest.mark.hbase
@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_processes_report_every_planted_pair_once_hbase(
    hbase_url: str, tmp_path: Path, writers: int
) -> None:
    found, lines = concurrent_writers(hbase_url, tmp_path, writers, 200)
    assert (found, lines) == (200, 200)


def replicas_see_each_other(url: str, tmp_path: Path, pairs: int) -> list[dict[str, Any]]:
    """Two ``shdb serve`` on ``url``; each planted pair's original is checked and
    added at one while its copy (one bit away) is at the other, all at once; the
    answers, two a pair."""
    from .serve_server import live_server

    SimhashIndex.open(url).close()  # the replicas find the index made
    rng = random.Random(7)
    fps = [rng.getrandbits(64) for _ in range(pairs)]
    items = [
        [{"id": f"p{p}{'ab'[side]}", "fingerprint": f"{fp ^ side << p % 64:016x}"}
         for p, fp in enumerate(fps)]
        for side in (0, 1)
    ]  # fmt: skip
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(live_server(url, tmp_path / f"serve{n}.log")) for n in range(2)
        ]

        async def submit_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(
                limits=httpx.Limits(max_connections=400), timeout=300
            ) as client:
                return await asyncio.gather(*(
                    client.post(f"{servers[side].url}/v1/check-and-add", json=item)
                    for pair in zip(*items) for side, item in enumerate(pair)
                ))  # fmt: skip

        responses = asyncio.run(submit_all())
        logs = "\n".join(server.output() for server in servers)
        assert [r.status_code for r in responses] == [200] * 2 * pairs, logs
        assert all(server.terminate() for server in servers), logs
    return [r.json() for r in responses]


def each_pair_one_new_the_other_names_it(answers: list[dict[str, Any]]) -> None:
    for a, b in zip(answers[::2], answers[1::2]):
        assert [a["new"], b["new"]].count(True) == 1, (a, b)
        later, earlier = (b, a) if a["new"] else (a, b)
        assert [m["id"] for m in later["matches"]] == [earlier["id"]]


def test_two_serve_replicas_on_a_folder_each_pair_one_new(tmp_path: Path) -> None:
    """Near-copies (not identical texts) sent to two services in the same instant:
    of each pair exactly one is new, and the other's answer names it."""
    each_pair_one_new_the_other_names_it(
        replicas_see_each_other(str(tmp_path / "ix"), tmp_path, 100)
    )


@pytest.mark.hbase
def test_two_serve_replicas_on_hbase_each_pair_one_new(hbase_url: str, tmp_path: Path) -> None:
    """As on a folder (before the section, HBase's per-fingerprint locks let both
    near-copies of a pair be new)."""
    each_pair_one_new_the_other_names_it(replicas_see_each_other(hbase_url, tmp_path, 100))
