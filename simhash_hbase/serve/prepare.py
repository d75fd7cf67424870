"""Fingerprinting in worker processes, driven by the service's event loop.

Why: a text's fingerprint, probes and sketch cost about 1 ms of Python, half of
a check-and-add's CPU. Done on the event loop they hold the GIL that the loop's
HTTP work and the store thread also need, so one core does everything and the
three queue behind each other. Here the texts go to ``workers`` processes
(``python -m simhash_hbase.serve.prepare``, each with the index opened
read-only), so the second core fingerprints while the first serves HTTP and
commits.

The loop talks to each worker over a socket pair with asyncio streams: no
thread and no executor per call, requests pipelined, answers in order. A
request is ``(texts, probes)``; its answer holds, per text, ``(probes list,
sketch, bands)`` or the message of the text's :class:`EmptyDocument`. A worker
that dies fails its requests in flight (503) and leaves the pool; with no
worker left the service fingerprints in process again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Sequence
from typing import Any

from simhash_hbase.errors import EmptyDocument
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout import codec
from simhash_hbase.serve.wire import ApiError

log = logging.getLogger("shdb.serve")
_LENGTH = struct.Struct("!I")
_READY = b"ready"
CHUNK_TEXTS = 64  # texts per message to a worker: ~40 ms of work
#: Per text: its probe list, sketch and band keys; or its EmptyDocument message.
Prepared = tuple[list[int], bytes | None, bytes | None] | str


class _Worker:
    """One worker process and its stream; answers come back in request order."""

    def __init__(
        self, proc: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: Any
    ) -> None:
        self.proc, self.reader, self.writer = proc, reader, writer
        self.waiting: deque[asyncio.Future[list[Prepared]]] = deque()
        self.alive = True
        self.task: asyncio.Task[None] | None = None

    async def answers(self, on_exit: Any) -> None:
        """Read answers until the worker goes; then fail what it still held."""
        try:
            while True:
                message = await _read(self.reader)
                future = self.waiting.popleft()
                if not future.done():
                    future.set_result(pickle.loads(message))
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
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

    def send(self, texts: Sequence[str], probes: int) -> asyncio.Future[list[Prepared]]:
        future: asyncio.Future[list[Prepared]] = asyncio.get_running_loop().create_future()
        body = pickle.dumps((list(texts), probes), protocol=pickle.HIGHEST_PROTOCOL)
        self.waiting.append(future)
        self.writer.write(_LENGTH.pack(len(body)) + body)
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

    async def prepare(self, texts: Sequence[str], probes: int) -> list[Prepared]:
        """Each text's probe list and sketch (or its EmptyDocument message). A large
        batch goes in chunks, one at a time, so that other requests' texts are not
        queued behind all of it."""
        out: list[Prepared] = []
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
    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen(
            [sys.executable, "-m", "simhash_hbase.serve.prepare", str(theirs.fileno()), url],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        if await _read(reader) != _READY:
            raise _gone("a fingerprinting worker did not start")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
        proc.wait()
        raise _gone(f"a fingerprinting worker exited at start ({proc.returncode})") from None
    worker = _Worker(proc, reader, writer)
    worker.task = asyncio.get_running_loop().create_task(worker.answers(on_exit))
    return worker


def _gone(message: str) -> ApiError:
    return ApiError(503, "worker_exited", message, {"Retry-After": "1"})


async def _read(reader: asyncio.StreamReader) -> bytes:
    (n,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return await reader.readexactly(n)


# -- the worker process ------------------------------------------------------------
def prepare(index: SimhashIndex, texts: Sequence[str], probes: int) -> list[Prepared]:
    """What a worker answers for one request (also the in-process path)."""
    out: list[Prepared] = []
    hasher = index.minhasher
    for text in texts:
        found = index.fingerprinter.probes_or_error(text, probes)
        if isinstance(found, EmptyDocument):
            out.append(str(found))
            continue
        sig = None if hasher is None else hasher.signature(text)
        if sig is None:
            out.append((found, None, None))
        else:
            out.append((found, sig.sketch, codec.encode_bands(sig.bands)))
    return out


def _main(fd: int, url: str) -> None:
    """Serve requests on socket ``fd`` until the service closes it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service drains, then closes us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    with SimhashIndex.open(url, readonly=True) as index:
        index.fingerprinter.fingerprint("预热 warm-up")  # load the segmenter and IDF now
        _ = index.minhasher
        # What start-up loaded stays for good: a full collection walks none of it
        # (measured: ~8 ms a full collection of the warmed-up heap, ~0 ms frozen).
        gc.freeze()
        inbox, outbox = sock.makefile("rb"), sock.makefile("wb")
        _write(outbox, _READY)
        while header := inbox.read(_LENGTH.size):
            (n,) = _LENGTH.unpack(header)
            texts, probes = pickle.loads(inbox.read(n))
            answer = pickle.dumps(prepare(index, texts, probes), pickle.HIGHEST_PROTOCOL)
            _write(outbox, answer)


def _write(out: Any, body: bytes) -> None:
    out.write(_LENGTH.pack(len(body)) + body)
    out.flush()


if __name__ == "__main__":
    _main(int(sys.argv[1]), sys.argv[2])
    os._exit(0)
