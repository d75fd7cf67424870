"""Fingerprinting in worker processes, driven by the service's event loop.

Why: a text's fingerprint, probes and sketch cost about 1 ms of Python, half of
a check-and-add's CPU. Done on the event loop they hold the GIL that the loop's
HTTP work and the store thread also need, so one core does everything and the
three queue behind each other. Here the texts go to ``workers`` processes
(``python -m simhash_hbase.serve.prepare``, each with the index opened
read-only), so the second core fingerprints while the first serves HTTP and
commits.

The loop talks to each worker over the one worker transport
(:mod:`simhash_hbase.fingerprint.workers`: a socket pair, read here with asyncio
streams): no thread and no executor per call, requests pipelined, answers in
order. A
request is ``(texts, probes)``; its answer holds each text's
:data:`~simhash_hbase.layout.prepare.Prints` (:meth:`Preparer.prints`, the
CPU half of the one preparer). A worker
that dies fails its requests in flight (503) and leaves the pool; with no
worker left the service fingerprints in process again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Sequence
from typing import Any

from simhash_hbase.fingerprint.workers import Channel, frame, receive_async, spawn
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout.prepare import Preparer, Prints
from simhash_hbase.serve.wire import ApiError

log = logging.getLogger("shdb.serve")
_READY = b"ready"
CHUNK_TEXTS = 64  # texts per message to a worker: ~40 ms of work


class _Worker:
    """One worker process and its stream; answers come back in request order."""

    def __init__(
        self, proc: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: Any
    ) -> None:
        self.proc, self.reader, self.writer = proc, reader, writer
        self.waiting: deque[asyncio.Future[list[Prints]]] = deque()
        self.alive = True
        self.task: asyncio.Task[None] | None = None

    async def answers(self, on_exit: Any) -> None:
        """Read answers until the worker goes; then fail what it still held."""
        try:
            while True:
                message = await receive_async(self.reader)
                future = self.waiting.popleft()
                if not future.done():
                    future.set_result(message)
        except (EOFError, ConnectionError, IndexError):
            pass
        self.alive = False  # no request is sent to it from now on
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(_gone("a fingerprinting worker exited; retry"))
        on_exit(self)
        try:  # reap it (it exits on EOF; one that lingers is killed)
            await asyncio.to_thread(self.proc.wait, 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)

    def send(self, texts: Sequence[str], probes: int) -> asyncio.Future[list[Prints]]:
        future: asyncio.Future[list[Prints]] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.writer.write(frame((list(texts), probes)))
        return future

    async def stop(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
        if self.task is not None:
            await self.task  # it reaps the process


class Preparers:
    """The pool: each request goes to the worker with the fewest in flight."""

    def __init__(self) -> None:
        self._workers: list[_Worker] = []

    @classmethod
    async def start(cls, url: str, workers: int) -> Preparers:
        pool = cls()
        try:
            for _ in range(workers):
                pool._workers.append(await _spawn(url, pool._gone))
        except BaseException:
            await pool.stop()
            raise
        return pool

    @property
    def size(self) -> int:
        return sum(w.alive for w in self._workers)

    def _gone(self, worker: _Worker) -> None:
        if worker in self._workers:
            self._workers.remove(worker)
            log.error("fingerprinting worker %d exited (%s left)", worker.proc.pid, self.size)

    async def prepare(self, texts: Sequence[str], probes: int) -> list[Prints]:
        """Each text's probe list and sketch (or its EmptyDocument message). A large
        batch goes in chunks, one at a time, so that other requests' texts are not
        queued behind all of it."""
        out: list[Prints] = []
        for at in range(0, len(texts), CHUNK_TEXTS):
            alive = [w for w in self._workers if w.alive]
            if not alive:
                raise _gone("no fingerprinting worker is running")
            worker = min(alive, key=lambda w: len(w.waiting))
            out += await worker.send(texts[at : at + CHUNK_TEXTS], probes)
        return out

    async def stop(self) -> None:
        workers, self._workers = self._workers, []
        await asyncio.gather(*(w.stop() for w in workers))


async def _spawn(url: str, on_exit: Any) -> _Worker:
    proc, ours = spawn("simhash_hbase.serve.prepare", url)
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        if await receive_async(reader) != _READY:
            raise _gone("a fingerprinting worker did not start")
    except (EOFError, ConnectionError):
        writer.close()
        proc.wait()
        raise _gone(f"a fingerprinting worker exited at start ({proc.returncode})") from None
    worker = _Worker(proc, reader, writer)
    worker.task = asyncio.get_running_loop().create_task(worker.answers(on_exit))
    return worker


def _gone(message: str) -> ApiError:
    return ApiError(503, "worker_exited", message, {"Retry-After": "1"})


# -- the worker process ------------------------------------------------------------
def _main(fd: int, url: str) -> None:
    """Serve requests on socket ``fd`` until the service closes it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service drains, then closes us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    channel = Channel.of_fd(fd)
    with SimhashIndex.open(url, readonly=True) as index:
        index.fingerprinter.fingerprint("预热 warm-up")  # load the segmenter and IDF now
        _ = index.minhasher
        # What start-up loaded stays for good: a full collection walks none of it
        # (measured: ~8 ms a full collection of the warmed-up heap, ~0 ms frozen).
        gc.freeze()
        channel.send(_READY)
        while True:
            try:
                texts, probes = channel.receive()
            except EOFError:  # the service closed us
                return
            channel.send(Preparer(index.fingerprinter, index.minhasher, probes).prints_of(texts))


if __name__ == "__main__":
    _main(int(sys.argv[1]), sys.argv[2])
    os._exit(0)
