"""The one thread that talks to the index: group commit and exactly-one-new.

Request handlers put operations on a bounded queue and await their futures. The
worker takes everything queued (up to a group size), answers the reads of the
group in one batched lookup, then runs its writes in order, consecutive adds and
check-and-adds as ONE :meth:`SimhashIndex.check_and_add` call: one store batch,
one commit. Futures resolve only after that call returned, i.e. once the store
has made the writes durable (LMDB syncs each commit; HBase acknowledges a put
once it is in its write-ahead log). Because one thread does every write, two
identical check-and-add submissions can never both be new.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simhash_hbase.errors import ShdbError
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout.window import WindowSpec
from simhash_hbase.records import Document, Matches


class QueueFull(ShdbError):
    """More documents are waiting than the queue holds; retry after ``retry_after`` s."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("the write queue is full; retry later")
        self.retry_after = retry_after


class ShuttingDown(ShdbError):
    """The service is draining its queue before it exits."""


@dataclass(frozen=True)
class Terms:
    """What a lookup asks: ops with the same terms share one store call."""

    k: int
    limit: int
    similarity: float | None = None  # None: the index's (SimhashIndex.at_similarity)
    window: WindowSpec | None = None  # None: every document (SimhashIndex.within)


@dataclass
class Check:
    """Look up each probe list (a fingerprint, then its probes) with its sketch keys
    (see :meth:`SimhashIndex.query_probed`), ``terms.limit`` matches each."""

    probes: list[list[int]]
    sketches: list[tuple[bytes | None, bytes | None]]
    terms: Terms


@dataclass
class Write:
    """:meth:`SimhashIndex.check_and_add` of ``docs`` (``always``: plain adds)."""

    docs: list[Document]
    probes: list[list[int]]
    terms: Terms
    always: bool


@dataclass
class Delete:
    """Remove documents (one batch of :meth:`SimhashIndex.remove_many`)."""

    doc_ids: list[str]


@dataclass
class Call:
    """Any other index call (get, stats, the readiness probe): ``fn(index)``."""

    fn: Callable[[SimhashIndex], Any]


Op = Check | Write | Delete | Call


@dataclass
class _Pending:
    op: Op
    weight: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    queued: float = field(default_factory=time.perf_counter)


class Observer:
    """What the worker reports (metrics); the default reports nothing."""

    def group(self, docs: int, seconds: float) -> None:
        """A group of writes committed: its documents and the commit's duration."""

    def store_error(self, error: ShdbError) -> None:
        """The store failed an operation."""

    def queued(self, documents: int) -> None:
        """Documents waiting now."""


class StoreWorker:
    """Owns the index; every store call runs on its thread."""

    def __init__(
        self,
        index: SimhashIndex,
        *,
        capacity: int = 100_000,
        group: int = 10_000,
        observer: Observer | None = None,
    ) -> None:
        self.index = index
        self.capacity = capacity  # documents waiting, at most
        self.group = group  # documents per commit, at most (one op may exceed it alone)
        self.observer = observer or Observer()
        self._queue: deque[_Pending] = deque()
        self._waiting = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._commit_seconds = 0.05  # recent commit time, for Retry-After
        self._thread = threading.Thread(target=self._run, name="shdb-store", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Refuse new work, finish everything queued, then return."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    @property
    def waiting(self) -> int:
        return self._waiting

    def submit(self, op: Op, weight: int = 1) -> asyncio.Future[Any]:
        """Queue ``op`` (``weight`` documents); its future resolves on the caller's loop."""
        loop = asyncio.get_running_loop()
        pending = _Pending(op, weight, loop, loop.create_future())
        with self._cond:
            if self._stopping:
                raise ShuttingDown("the service is shutting down")
            if self._waiting and self._waiting + weight > self.capacity:
                groups = (self._waiting + weight) / max(self.group, 1)
                raise QueueFull(max(1, round(groups * self._commit_seconds + 0.5)))
            self._queue.append(pending)
            self._waiting += weight
            self.observer.queued(self._waiting)
            self._cond.notify()
        return pending.future

    def _take(self) -> list[_Pending] | None:
        with self._cond:
            while not self._queue:
                if self._stopping:
                    return None
                self._cond.wait()
            taken: list[_Pending] = []
            weight = 0
            while self._queue and (not taken or weight + self._queue[0].weight <= self.group):
                item = self._queue.popleft()
                taken.append(item)
                weight += item.weight
            self._waiting -= weight
            self.observer.queued(self._waiting)
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            checks: dict[Terms, list[_Pending]] = {}
            for p in taken:
                if isinstance(p.op, Check):
                    checks.setdefault(p.op.terms, []).append(p)
                elif isinstance(p.op, Call):
                    self._settle([p], self._call(p.op.fn))
            for terms, group in checks.items():
                self._settle(group, self._check(terms))
            self._writes([p for p in taken if isinstance(p.op, Write | Delete)])

    def _call(self, fn: Callable[[SimhashIndex], Any]) -> Callable[[list[Op]], list[Any]]:
        """A one-op group that calls ``fn(index)``."""
        return lambda ops: [fn(self.index)]

    def _check(self, terms: Terms) -> Callable[[list[Op]], list[Any]]:
        def run(ops: list[Op]) -> list[Any]:
            checks = [op for op in ops if isinstance(op, Check)]
            found = _asked(self.index, terms).query_probed(
                [pl for op in checks for pl in op.probes],
                terms.k,
                limit=terms.limit,
                sketches=[keys for op in checks for keys in op.sketches],
            )
            return _split(ops, found)

        return run

    def _writes(self, group: list[_Pending]) -> None:
        """Runs of adds and check-and-adds of the same terms, one commit each;
        deletes between them keep their place."""
        run: list[_Pending] = []
        for p in group:
            op = p.op
            if isinstance(op, Write) and run and _terms(run[0].op) == _terms(op):
                run.append(p)
                continue
            if run:
                self._settle(run, self._add)
            run = [p] if isinstance(op, Write) else []
            if isinstance(op, Delete):
                self._settle([p], self._call(_remover(op.doc_ids)))
        if run:
            self._settle(run, self._add)

    def _add(self, ops: list[Op]) -> list[Any]:
        writes = [op for op in ops if isinstance(op, Write)]
        docs = [d for op in writes for d in op.docs]
        always = [op.always for op in writes for _ in op.docs]
        started = time.perf_counter()
        terms = writes[0].terms
        found = _asked(self.index, terms).check_and_add(
            docs,
            terms.k,
            probes=[pl for op in writes for pl in op.probes],
            always=always,
            limit=terms.limit,
        )
        seconds = time.perf_counter() - started
        self._commit_seconds = 0.8 * self._commit_seconds + 0.2 * seconds
        self.observer.group(len(docs), seconds)
        return _split(ops, found)

    def _settle(self, group: list[_Pending], fn: Callable[[list[Op]], list[Any]]) -> None:
        """Run ``fn`` on the group's ops and hand each its result, or the error."""
        try:
            results = fn([p.op for p in group])
        except ShdbError as exc:
            self.observer.store_error(exc)
            _resolve([(p, None, exc) for p in group])
            return
        _resolve([(p, result, None) for p, result in zip(group, results)])


def _probes(op: Op) -> list[list[int]]:
    return op.probes if isinstance(op, Check | Write) else []


def _asked(index: SimhashIndex, terms: Terms) -> SimhashIndex:
    """The index as ``terms`` ask: judged at their similarity, in their window (a
    ``within`` counted back from now, as the group runs)."""
    window = None if terms.window is None else terms.window.at()
    return index.at_similarity(terms.similarity).within(window)


def _terms(op: Op) -> Terms | None:
    return op.terms if isinstance(op, Check | Write) else None


def _split(ops: list[Op], found: list[Matches]) -> list[list[Matches]]:
    """One flat result list cut back into each op's part, in order."""
    parts, at = [], 0
    for op in ops:
        n = len(_probes(op))
        parts.append(found[at : at + n])
        at += n
    return parts


def _remover(doc_ids: list[str]) -> Callable[[SimhashIndex], list[str]]:
    return lambda index: index.remove_many(doc_ids)


def _resolve(outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
    """Hand each pending op its result or error, on its loop: one wake-up of each
    loop per group, not one per op (each is a write to the loop's self-pipe)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Pending, Any, BaseException | None]]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].loop, []).append(outcome)
    for loop, some in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle_all, some)


def _settle_all(outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
    for p, result, error in outcomes:
        if p.future.cancelled():
            continue
        if error is not None:
            p.future.set_exception(error)
        else:
            p.future.set_result(result)
