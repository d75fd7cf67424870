"""The one worker transport: pickled messages, each framed by its length, over
a socket pair to a child process. Three users, one wire:

- :func:`map_chunks` (``shdb ingest``/``dedup --workers``): forked children,
  chunks of texts in order;
- ``shdb serve``'s fingerprinting workers (:mod:`simhash_hbase.serve.prepare`),
  read by the event loop with :func:`receive_async`;
- the Scrapy pipeline's index process (:mod:`simhash_hbase.integrations.indexer`).

The last two are started by :func:`spawn` (``python -m MODULE FD``: a fresh
interpreter that imports only what it needs) and talk over a :class:`Channel`.
A child that dies closes its end: the parent reads end of input
(:class:`EOFError`), never a hang.

``multiprocessing.Pool`` loses the task of a child that dies (kill -9, the OOM
killer, ``os._exit`` in a C library) and waits for its result forever. In
:func:`map_chunks` each worker holds one chunk at a time and writes, in shared
memory, which text of it it is on: the parent sees a death at once (the process
sentinel), stops the others and raises :class:`WorkerDied` with the chunk and
the text.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from simhash_hbase.errors import WorkerDied

_LENGTH = struct.Struct("!Q")


def frame(message: Any) -> bytes:
    """``message`` pickled, after its length: what goes on the wire."""
    body = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


def _unframe(header: bytes, read: Callable[[int], bytes]) -> Any:
    if len(header) < _LENGTH.size:
        raise EOFError("the other end closed the channel")
    (n,) = _LENGTH.unpack(header)
    body = read(n)
    if len(body) < n:
        raise EOFError("the channel closed inside a message")
    return pickle.loads(body)


async def receive_async(reader: asyncio.StreamReader) -> Any:
    """The next message of an asyncio stream over a channel's socket;
    :class:`EOFError` once the other end is gone."""
    try:
        (n,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        return pickle.loads(await reader.readexactly(n))
    except asyncio.IncompleteReadError:
        raise EOFError("the other end closed the channel") from None


class Channel:
    """One end of a socket pair, messages both ways (:func:`frame`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._inbox = sock.makefile("rb")
        self._outbox = sock.makefile("wb")

    @classmethod
    def of_fd(cls, fd: int) -> Channel:
        """The channel a :func:`spawn` child was given (its first argument)."""
        return cls(socket.socket(fileno=fd))

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any) -> None:
        """Write one message (:class:`OSError`, e.g. BrokenPipeError: the other end is gone)."""
        self._outbox.write(frame(message))
        self._outbox.flush()

    def receive(self) -> Any:
        """The next message; :class:`EOFError` once the other end is gone."""
        try:
            return _unframe(self._inbox.read(_LENGTH.size), self._inbox.read)
        except ConnectionError:
            raise EOFError("the other end reset the channel") from None

    def close(self) -> None:
        for part in (self._inbox, self._outbox):
            with contextlib.suppress(OSError):  # unflushed bytes for a peer that is gone
                part.close()
        self.sock.close()


def spawn(
    module: str, *args: str, new_session: bool = False
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """``python -m module FD *args``, FD its end of a socket pair (for
    :meth:`Channel.of_fd`); the process and our end."""
    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(theirs.fileno()), *args],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=new_session,
        )
    return proc, ours


#: Work done on one chunk in a worker: (texts, argument) -> one result per text.
ChunkFn = Callable[[Sequence[str], Any], list[Any]]


#: The parent's ends of the forked workers' channels. A fork copies every one of
#: them, the new worker's own included: each worker closes its copies first, so
#: that its channel ends when the parent dies, even by kill -9 (a worker holding
#: the other end of its own channel, or a sibling's, would wait for input forever).
_PARENT_ENDS: weakref.WeakSet[Channel] = weakref.WeakSet()


class _Worker:
    """One forked process, its channel, and the text it is on (-1: none)."""

    def __init__(self, ctx: Any, init: Callable[[], None], fn: ChunkFn) -> None:
        ours, theirs = socket.socketpair()
        self.channel = Channel(ours)
        _PARENT_ENDS.add(self.channel)
        self.at = ctx.RawValue("q", -1)
        self.process = ctx.Process(target=_serve, args=(theirs, self.at, init, fn), daemon=True)
        self.process.start()
        theirs.close()
        self.chunk: int | None = None  # the number of the chunk it holds

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        _PARENT_ENDS.discard(self.channel)
        self.channel.close()


def _serve(sock: socket.socket, at: Any, init: Callable[[], None], fn: ChunkFn) -> None:
    """A worker's loop: chunks in, results (or the error a text raised) out."""
    for end in list(_PARENT_ENDS):
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    init()
    channel = Channel(sock)
    while True:
        try:
            texts, arg = channel.receive()
        except EOFError:  # the parent is gone
            os._exit(0)
        results: list[Any] = []
        try:
            for i, text in enumerate(texts):
                at.value = i
                results.extend(fn([text], arg))
        except BaseException as exc:
            channel.send(("error", at.value, f"{type(exc).__name__}: {exc}".strip()))
            del results
            traceback.clear_frames(exc.__traceback__)
            continue
        at.value = -1
        channel.send(("ok", results))


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
                    _send(worker, item)
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1
            busy = [w for w in pool if w.chunk is not None]
            if not busy:
                if exhausted and not queued:
                    return
                continue
            ready = wait([w.channel.sock for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                if worker.channel.sock in ready or worker.process.sentinel in ready:
                    _collect(worker, done)
    finally:
        for worker in pool:
            worker.stop()


def _send(worker: _Worker, item: tuple[Sequence[str], Any]) -> None:
    """Hand the worker its chunk; one already dead is named by :func:`_collect`."""
    with contextlib.suppress(OSError):
        worker.channel.send(item)


def _collect(worker: _Worker, done: dict[int, list[Any]]) -> None:
    """The worker's result, or :class:`WorkerDied` if it died or a text raised."""
    assert worker.chunk is not None
    try:
        reply = worker.channel.receive()
    except (EOFError, OSError):
        worker.process.join(5)
        raise WorkerDied(
            worker.chunk, max(worker.at.value, 0), _how(worker.process.exitcode)
        ) from None
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
