"""Limits on what one connection may make the server hold, before any token is read.

uvicorn's httptools protocol (the fast parser the serve extra installs) bounds neither
the request head nor the time a client takes to send it: one connection streaming a
never-ending header line, or headers by the hundred thousand, grew the server by
gigabytes, and a client that sent a byte every few seconds held its connection for
good. :class:`BoundedHttpTools` is that protocol with limits:

* the request line (414), the head's bytes and its header count (431), counted as
  bytes arrive, so the parser holds at most one read beyond the limit;
* the head must be complete within ``head_seconds`` of the connection or of the
  request's first byte (408), and the body within ``body_seconds`` of the head
  (the connection is closed: the handler reading it sees a disconnect);
* idle kept-alive connections close after ``idle_seconds`` (uvicorn's keep-alive).

h11 (uvicorn's other parser) bounds the head's size (``h11_max_incomplete_event_size``)
but not its time, and parses in Python, several times httptools' cost a request.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from simhash_hbase.serve.settings import Limits

_REASONS = {408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large"}


class _Refused(Exception):
    """Raised in a parser callback to stop the parse of a request over a limit."""


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`Limits`; see :func:`bounded`."""

    limits: ClassVar[Limits] = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = True  # the next request's head has not arrived whole
        self._head_bytes = 0
        self._headers = 0
        self._refusal: tuple[int, str] | None = None
        self._deadline: asyncio.TimerHandle | None = None

    # -- the connection -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.head_seconds, 408)  # a connection that never sends a request

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_open:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._head_open and self._head_bytes > self.limits.max_head_bytes:
            self._refuse(431, f"the request head is over {self.limits.max_head_bytes} bytes")

    def send_400_response(self, msg: str) -> None:
        """The parser stopped: on a limit (a callback raised :class:`_Refused`), the
        limit's own answer; else uvicorn's 400."""
        if self._refusal is not None:
            self._refuse(*self._refusal)
        else:
            super().send_400_response(msg)

    # -- the parser's callbacks -------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open, self._head_bytes, self._headers = True, 0, 0
        if self._deadline is None:
            self._arm(self.limits.head_seconds, 408)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_request_line:
            self._stop(414, f"the request target is over {self.limits.max_request_line} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        if self._headers > self.limits.max_headers:
            self._stop(431, f"the request has over {self.limits.max_headers} header fields")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._disarm()
        self._arm(self.limits.body_seconds, None)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # -- limits ----------------------------------------------------------------------
    def _stop(self, status: int, message: str) -> None:
        self._refusal = (status, message)
        raise _Refused(message)

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` (plain text, the connection closed), once."""
        self._disarm()
        if self.transport.is_closing():
            return
        body = message.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status, _REASONS[status].encode(), len(body), body)
        )
        self.transport.close()

    def _arm(self, seconds: float, status: int | None) -> None:
        self._deadline = self.loop.call_later(seconds, self._expired, status)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, status: int | None) -> None:
        """A deadline passed: a head still arriving gets 408 (a connection that sent
        nothing is just closed); a body still arriving, the connection closed."""
        self._deadline = None
        if status is not None and self._head_bytes:
            self._refuse(status, "the request head did not arrive in time")
        elif not self.transport.is_closing():
            self.transport.close()


def bounded(limits: Limits) -> type[BoundedHttpTools]:
    """The protocol class uvicorn instantiates per connection, with ``limits``."""
    return type("BoundedHttpTools", (BoundedHttpTools,), {"limits": limits})
