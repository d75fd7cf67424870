"""An open-loop HTTP/1.1 load generator that costs little CPU.

Why not httpx or locust: on the bench machine the generator shares the two cores
with the service, and a client that spends a millisecond of Python per request
takes that millisecond from the server it measures (httpx with a task per request:
2.6-6.1 ms of CPU a request, measured beside this one at 0.10-0.14 ms). This one uses asyncio
protocols and callbacks only (no task or future per request): every request is
built before the step starts, sent by a timer at its due time ``start + i /
rate`` on an idle keep-alive connection (a new one when none is idle), and its
latency is counted from that due time, so a server that falls behind shows as
queueing (no coordinated omission). Responses are read by their
``Content-Length``, which is all the service sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

_LENGTH = re.compile(rb"(?i)\r\ncontent-length:[ \t]*(\d+)")
MAX_CONNECTIONS = 512  # beyond this, due requests wait for a free connection


def post(host: str, path: str, body: bytes, content_type: str = "application/json") -> bytes:
    """One POST request's bytes, keep-alive."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Outcome:
    """Latencies (seconds, from each request's due time) by status; 0: failed."""

    latencies: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    wall: float = 0.0

    def ok(self) -> list[float]:
        return [t for t, s in zip(self.latencies, self.statuses) if s == 200]


class _Conn(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self, gen: _Generator) -> None:
        self.gen = gen
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.due: float | None = None  # the request in flight, by its due time

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def send(self, request: bytes, due: float) -> None:
        assert self.transport is not None
        self.due = due
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        found = _LENGTH.search(self.buf, 0, end)
        length = int(found.group(1)) if found else 0
        if len(self.buf) < end + 4 + length:
            return
        status = int(self.buf[9:12])
        del self.buf[: end + 4 + length]
        due, self.due = self.due, None
        assert due is not None
        self.gen.done(self, due, status)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.due is not None:
            due, self.due = self.due, None
            self.gen.done(None, due, 0)
        self.gen.lost(self)


class _Generator:
    def __init__(self, host: str, port: int, requests: Sequence[bytes]) -> None:
        self.loop = asyncio.get_running_loop()
        self.host, self.port = host, port
        self.requests = requests
        self.idle: list[_Conn] = []
        self.conns: set[_Conn] = set()
        self.opening = 0
        self.backlog: list[tuple[bytes, float]] = []  # due, but no connection yet
        self.outcome = Outcome()
        self.remaining = len(requests)
        self.finished = self.loop.create_future()

    async def open(self, n: int) -> None:
        await asyncio.gather(*(self._open() for _ in range(n)))

    async def _open(self) -> None:
        self.opening += 1
        try:
            _, conn = await self.loop.create_connection(lambda: _Conn(self), self.host, self.port)
        except OSError:
            self.opening -= 1
            if self.backlog:  # nothing will send it: count it failed
                _, due = self.backlog.pop(0)
                self.done(None, due, 0)
            return
        self.opening -= 1
        self.conns.add(conn)
        self._ready(conn)

    def fire(self, i: int, due: float) -> None:
        request = self.requests[i]
        if self.idle:
            self.idle.pop().send(request, due)
            return
        self.backlog.append((request, due))
        if len(self.conns) + self.opening < MAX_CONNECTIONS:
            self.loop.create_task(self._open())

    def _ready(self, conn: _Conn) -> None:
        if self.backlog:
            request, due = self.backlog.pop(0)
            conn.send(request, due)
        else:
            self.idle.append(conn)

    def done(self, conn: _Conn | None, due: float, status: int) -> None:
        self.outcome.latencies.append(time.perf_counter() - due)
        self.outcome.statuses.append(status)
        if conn is not None:
            self._ready(conn)
        self.remaining -= 1
        if self.remaining == 0 and not self.finished.done():
            self.finished.set_result(None)

    def lost(self, conn: _Conn) -> None:
        self.conns.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    def close(self) -> None:
        for conn in list(self.conns):
            if conn.transport is not None:
                conn.transport.close()


async def open_loop(
    url: str, requests: Sequence[bytes], rate: float, *, grace: float, connections: int = 32
) -> Outcome:
    """Send ``requests[i]`` at ``start + i / rate``; what is not answered ``grace``
    seconds after the last is due counts as failed (status 0)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    gen = _Generator(host, port, requests)
    await gen.open(connections)
    # Due times are kept on perf_counter: uvloop's loop.time() is libuv's cached
    # millisecond clock, too coarse for latencies of a few ms; the timers use it.
    start, clock = gen.loop.time() + 0.05, time.perf_counter() + 0.05
    for i in range(len(requests)):
        gen.loop.call_at(start + i / rate, gen.fire, i, clock + i / rate)
    last = start + (len(requests) - 1) / rate
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(gen.finished), last + grace - gen.loop.time())
    gen.outcome.wall = gen.loop.time() - start
    unanswered = gen.remaining
    gen.outcome.latencies.extend([grace] * unanswered)
    gen.outcome.statuses.extend([0] * unanswered)
    gen.close()
    return gen.outcome
