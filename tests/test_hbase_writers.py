"""Several writers of one id on HBase (atomic per row only): every interleaving of
their claims and writes leaves the docs row of the last one to claim it and
exactly its cells, and writers that stop at any step leave no document short of
a cell (docs/SPEC.md, "Writers")."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.jobs.verify import verify
from simhash_hbase.store.hbase import store as hbase

STEPS = 2  # claim, write (the batch's flush)
FPS = (0x0123_4567_89AB_CDEF, 0x0123_4567_89AB_CDEE, 0xFEDC_BA98_7654_3210)
HELD = 0x5555_5555_5555_5555


def version(doc_id: str, w: int) -> Document:
    """Writer ``w``'s version: versions differ in their columns too (a replaced
    row keeps none of the columns its new version lacks)."""
    return Document(doc_id, FPS[w], f"text {w}" if w != 1 else None, {"w": w} if w else None)


class Stopped(Exception):
    """A writer stopped at this step, as a killed process would."""


class Turns:
    """Lets the writers' steps run one at a time, in ``order`` (writer numbers)."""

    def __init__(self, order: list[int], stops: dict[int, int]) -> None:
        self.order = order
        self.stops = stops  # writer -> the step it never takes
        self.taken = {w: 0 for w in set(order)}
        self.cond = threading.Condition()
        self.writer = threading.local()

    def step(self, run: Callable[[], Any]) -> Any:
        w = self.writer.n
        with self.cond:
            if not self.cond.wait_for(lambda: self.order[0] == w, timeout=60):
                raise AssertionError(f"writer {w} never got its turn: {self.order}")
        try:
            if self.stops.get(w) == self.taken[w]:
                raise Stopped
            return run()
        finally:
            with self.cond:
                self.taken[w] += 1
                self.order.pop(0)
                if self.stops.get(w) == self.taken[w] - 1:  # its later turns never come
                    self.order[:] = [n for n in self.order if n != w]
                self.cond.notify_all()


@pytest.fixture
def writers(hbase_url: str) -> Iterator[list[SimhashIndex]]:
    handles = [SimhashIndex.open(hbase_url) for _ in FPS]
    yield handles
    for handle in handles:
        handle.close()


@pytest.fixture
def turns_hook(monkeypatch: pytest.MonkeyPatch) -> list[Turns]:
    """Routes each batch's claim and flush through the current Turns. The writers'
    sections are left out: the claims alone keep rows whole when sections overlap
    (a section taken over from a writer whose lease ran out while it still wrote)."""
    current: list[Turns] = []
    unfenced = SimpleNamespace(kept=lambda: True)  # a section nobody takes over
    monkeypatch.setattr(
        hbase.HBaseStore, "write_section", lambda self: contextlib.nullcontext(unfenced)
    )
    batch = hbase._HBaseBatch
    claim, flush = batch.claim_docs, batch.flush

    def claim_docs(self: Any, *args: Any) -> Any:
        if not current:
            return claim(self, *args)
        return current[0].step(lambda: claim(self, *args))

    def flush_(self: Any) -> None:
        if not current:
            return flush(self)
        return current[0].step(lambda: flush(self))

    monkeypatch.setattr(batch, "claim_docs", claim_docs)
    monkeypatch.setattr(batch, "flush", flush_)
    return current


_count = itertools.count()


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(2, 3),
    held=st.booleans(),
    data=st.data(),
)
def test_any_interleaving_of_writers_leaves_one_version_and_its_cells(
    writers: list[SimhashIndex], turns_hook: list[Turns], n: int, held: bool, data: Any
) -> None:
    doc_id = f"x{next(_count)}"
    if held:
        writers[0].add_documents([Document(doc_id, HELD, "held", {"held": True})])
    order = data.draw(st.permutations([w for w in range(n) for _ in range(STEPS)]))
    stops = data.draw(st.dictionaries(st.integers(0, n - 1), st.integers(0, STEPS - 1)))
    turns = Turns(list(order), stops)
    turns_hook[:] = [turns]
    errors: list[BaseException] = []

    def write(w: int) -> None:
        turns.writer.n = w
        try:
            writers[w].add_documents([version(doc_id, w)])
        except Stopped:
            pass
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    turns_hook.clear()
    assert errors == []
    reader = writers[0]
    doc = reader.get(doc_id)
    wrote = [w for w in dict.fromkeys(order) if w not in stops]  # in the order they claimed
    report = verify(reader)
    assert report.missing_cells == 0 and report.corrupt_documents == 0, report.examples
    if not wrote:
        assert (doc is None) == (not held)
    else:
        assert doc == version(doc_id, wrote[-1])
    cells = {c for c in reader.index_cells() if c[1] == doc_id}
    mine = set(reader.cells([doc])) if doc is not None else set()
    assert cells >= mine
    if not stops:  # a writer that stopped may leave cells of a version never written
        assert cells == mine
