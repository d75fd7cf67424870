"""Work on chunks of texts in forked worker processes, in order; a worker that
dies is an error naming the text it held, never a hang.

``multiprocessing.Pool`` loses the task of a child that dies (kill -9, the OOM
killer, ``os._exit`` in a C library) and waits for its result forever. Here each
worker holds one chunk at a time and writes, in shared memory, which text of it
it is on: the parent sees a death at once (the process sentinel), stops the
others and raises :class:`WorkerDied` with the chunk and the text.
"""

from __future__ import annotations

import os
import signal
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from simhash_hbase.errors import WorkerDied

#: Work done on one chunk in a worker: (texts, argument) -> one result per text.
ChunkFn = Callable[[Sequence[str], Any], list[Any]]


class _Worker:
    """One forked process, its pipe, and the text it is on (-1: none)."""

    def __init__(self, ctx: Any, init: Callable[[], None], fn: ChunkFn) -> None:
        self.conn, child = ctx.Pipe()
        self.at = ctx.RawValue("q", -1)
        self.process = ctx.Process(target=_serve, args=(child, self.at, init, fn), daemon=True)
        self.process.start()
        child.close()
        self.chunk: int | None = None  # the number of the chunk it holds

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def _serve(conn: Any, at: Any, init: Callable[[], None], fn: ChunkFn) -> None:
    """A worker's loop: chunks in, results (or the error a text raised) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    init()
    while True:
        try:
            texts, arg = conn.recv()
        except EOFError:  # the parent is gone
            os._exit(0)
        results: list[Any] = []
        try:
            for i, text in enumerate(texts):
                at.value = i
                results.extend(fn([text], arg))
        except BaseException as exc:
            conn.send(("error", at.value, f"{type(exc).__name__}: {exc}".strip()))
            del results
            traceback.clear_frames(exc.__traceback__)
            continue
        at.value = -1
        conn.send(("ok", results))


def map_chunks(
    chunks: Iterable[tuple[Sequence[str], Any]],
    workers: int,
    init: Callable[[], None],
    fn: ChunkFn,
) -> Iterator[list[Any]]:
    """``fn(texts, arg)`` of every chunk, in order, in ``workers`` forked processes.

    At most ``2 * workers`` chunks are in flight, so memory stays flat on endless
    input. A worker that dies, or a text that raises in one (MemoryError, say),
    raises :class:`WorkerDied` naming the chunk's number and the text's index.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    pool = [_Worker(ctx, init, fn) for _ in range(workers)]
    source = iter(chunks)
    queued: deque[tuple[int, tuple[Sequence[str], Any]]] = deque()  # read, not yet sent
    done: dict[int, list[Any]] = {}
    sent = 0  # chunks read from the source
    nxt = 0  # the next chunk to yield
    exhausted = False
    try:
        while True:
            while not exhausted and sent - nxt < 2 * workers:
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                queued.append((sent, item))
                sent += 1
            for worker in pool:
                if worker.chunk is None and queued:
                    worker.chunk, item = queued.popleft()
                    worker.conn.send(item)
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1
            busy = [w for w in pool if w.chunk is not None]
            if not busy:
                if exhausted and not queued:
                    return
                continue
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    _collect(worker, done)
    finally:
        for worker in pool:
            worker.stop()


def _collect(worker: _Worker, done: dict[int, list[Any]]) -> None:
    """The worker's result, or :class:`WorkerDied` if it died or a text raised."""
    assert worker.chunk is not None
    try:
        reply = worker.conn.recv() if worker.conn.poll() else None
    except (EOFError, OSError):
        reply = None
    if reply is None:
        worker.process.join(5)
        raise WorkerDied(worker.chunk, max(worker.at.value, 0), _how(worker.process.exitcode))
    if reply[0] == "error":
        raise WorkerDied(worker.chunk, reply[1], f"raised {reply[2]}")
    done[worker.chunk] = reply[1]
    worker.chunk = None


def _how(exitcode: int | None) -> str:
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's out-of-memory killer sends it too)" if name == "SIGKILL" else ""
        return f"was killed by {name}{hint}"
    return f"exited with status {exitcode}"
