"""What :class:`~simhash_hbase.store.hbase.store.HBaseStore` needs from a Thrift gateway.

Two transports implement :class:`Transport`: Thrift1 (the gateway happybase
speaks, ``thrift1``) and Thrift2 (``thrift2``). The store keeps
everything that must not differ between them: table names, timestamps, the
write order, how rows become documents and cells. Both share
:class:`ClientPool`, which also hides connections the server has dropped.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from thriftpy2.thrift import TApplicationException, TException
from thriftpy2.transport import TTransportException

from simhash_hbase.errors import NotAuthenticated, StoreClosed, StoreError, StoreUnavailable
from simhash_hbase.store.hbase.connect import Gateways, tls_refusal
from simhash_hbase.store.hbase.settings import Gateway

log = logging.getLogger(__name__)

C = TypeVar("C")
T = TypeVar("T")
J = TypeVar("J")

#: A row as read: its key and ``{b"family:qualifier": value}``.
Row = tuple[bytes, dict[bytes, bytes]]
#: A page of a wide row: its key and the qualifiers of its cells (family left
#: out), in qualifier order; the values are not read (a bucket cell's is empty).
Page = tuple[bytes, list[bytes]]
#: Cells to write per row key: ``[(b"family:qualifier", value), ...]``.
Puts = Mapping[bytes, Sequence[tuple[bytes, bytes]]]
#: Columns to delete per row key (every version up to the timestamp).
Deletes = Mapping[bytes, Sequence[bytes]]
#: One conditional put: (row key, the value expected or None for absent, the new value).
CheckAndPut = tuple[bytes, bytes | None, bytes]

#: checkAndPuts in flight at once, on connections of their own: each is a row lock
#: and a WAL sync of its own on the server, which groups the syncs of concurrent
#: ones, so width is what makes them cheap (a putMultiple syncs once per call).
CHECK_AND_PUT_WIDTH = 48

#: Errors of a socket that could not be used; translated to StoreUnavailable.
NETWORK_ERRORS = (TTransportException, socket.error)
#: The pause before the second retry of a call (doubling after it; the first is at once).
RETRY_PAUSE_S = 0.1


class Transport(Protocol):
    """One gateway protocol. Errors leave as :class:`~simhash_hbase.errors.ShdbError`."""

    api: str  # "thrift1" or "thrift2"

    def table_names(self) -> set[bytes]: ...

    def create_namespace(self, name: str) -> None:
        """Create the HBase namespace ``name``; one that exists already is fine."""
        ...

    def create_table(
        self, name: bytes, table: str, splits: Sequence[bytes], ttl: int | None = None
    ) -> None:
        """Create ``name`` as schema table ``table``, split at ``splits`` where the
        protocol can; one that exists already is fine. ``ttl``: its cells' time to
        live in seconds (a retained index's per-document tables)."""
        ...

    def get_rows(
        self, table: bytes, keys: Sequence[bytes], columns: Sequence[bytes] = ()
    ) -> list[Row]:
        """The rows that exist among ``keys`` (at most a few thousand keys); with
        ``columns`` (``b"family:qualifier"``), only those cells."""
        ...

    def get_row_pages(
        self, table: bytes, starts: Sequence[tuple[bytes, bytes]], columns: int
    ) -> list[Page]:
        """One multi-get of wide rows, a page each: for each (row key, qualifier),
        the qualifiers of at most ``columns`` cells of the row from that qualifier
        on (``b""``: from its first), in qualifier order. Rows with none are left out."""
        ...

    def mutate(self, table: bytes, puts: Puts, deletes: Deletes, ts: int) -> None:
        """Write ``puts`` and ``deletes`` with timestamp ``ts``; idempotent."""
        ...

    def check_and_put(
        self, table: bytes, column: bytes, items: Sequence[CheckAndPut]
    ) -> list[bool]:
        """For each (row key, expected value or None, value): put ``value`` in
        ``column`` only if it holds ``expected`` (None: only if it is absent),
        atomically; whether each was written. The calls are pipelined; the region
        server stamps the cells, so writes through either gateway order alike. A
        call retried after a dropped connection may say False for a put it made:
        read the cell back to know."""
        ...

    def scan_prefixes(
        self, table: bytes, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> list[Row]:
        """Keys-only rows starting with any of ``prefixes`` (sorted, distinct); with
        ``row_cap``, only each row's first ``row_cap`` columns (ColumnPaginationFilter,
        applied by the region server: a wide row never crosses the wire whole)."""
        ...

    def scan_page(
        self, table: bytes, start: bytes, rows: int, keys_only: bool, stop: bytes = b""
    ) -> list[Row]:
        """Up to ``rows`` rows from ``start`` on (before ``stop``, unless empty), in key order."""
        ...

    def region_starts(self, table: bytes) -> list[bytes]:
        """The start keys of ``table``'s regions, sorted (the first is ``b""``)."""
        ...

    def close(self) -> None: ...


@contextmanager
def translate(
    where: str,
    api: str,
    action: str,
    failures: tuple[type[Exception], ...],
    rejections: tuple[type[Exception], ...],
) -> Iterator[None]:
    """Thrift and socket errors of ``action`` -> :class:`StoreError`s.

    ``failures`` and ``rejections`` are the transport's own server exceptions
    (an I/O error, an illegal argument), each with a ``message``.
    """
    try:
        yield
    except ssl.SSLError as exc:  # after the handshake: TLS 1.3 refuses a client certificate so
        raise StoreUnavailable(tls_refusal(where, exc)) from exc
    except NETWORK_ERRORS as exc:
        raise StoreUnavailable(
            f"{where} is not reachable while trying to {action} ({exc})"
        ) from exc
    except failures as exc:
        raise StoreError(f"{where} failed to {action}: {first_line(exc)}") from exc
    except rejections as exc:
        raise StoreError(f"{where} rejected {action}: {first_line(exc)}") from exc
    except TApplicationException as exc:
        if exc.type == TApplicationException.UNKNOWN_METHOD:
            raise StoreError(
                f"{where} does not serve the {api} protocol ({exc}); "
                "leave api out of the index URL to detect it"
            ) from exc
        raise StoreError(f"{where}: Thrift error while trying to {action}: {exc}") from exc
    except TException as exc:
        raise StoreError(f"{where}: Thrift error while trying to {action}: {exc}") from exc


#: Where the gateways listen unless moved, for messages about a wrong port.
GATEWAY_PORTS = "the HBase Thrift gateways listen on 9090 (Thrift1) and 9091 (Thrift2) by default"
#: A getThriftServerType call (binary protocol), the first thing shdb sends: the
#: probe of :func:`first_contact` sends it again to see what answers it.
#: Why a gateway may wait in silence, by whether the URL has sasl= (a SASL gateway
#: reads a plain call's first bytes as a frame length, and a plain one a SASL
#: handshake's: each waits for megabytes that never come).
_SILENT_SASL = {
    False: "or one that requires Kerberos (hbase.thrift.security.qop): then add "
    "sasl=gssapi to the index URL and get a ticket (kinit)",
    True: "or one that does not take SASL: is it set to hbase.thrift.security.qop? "
    "Without it, leave sasl= out of the index URL",
}
_PROBE = b"\x80\x01\x00\x01\x00\x00\x00\x13getThriftServerType\x00\x00\x00\x00\x00"


@contextmanager
def first_contact(gateways: Gateways) -> Iterator[None]:
    """The first exchange with a gateway, when a store opens: whatever fails in
    it is :class:`StoreUnavailable`, saying what answered when it was not an HBase
    Thrift gateway (HTTP, TLS, other bytes, a close, a reset, silence).

    Translated here, once, because a wrong port fails in the Thrift client's
    decoding in ways no call site can name; what answered is told by sending the
    same first call again on a socket of our own and reading the reply's bytes
    (over HBase's default wire only: a TLS, framed or HTTP client's own error says
    more than a plain probe could).
    """
    where, timeout = gateways.where, gateways.timeout
    try:
        yield
    except Exception as exc:
        if _in_chain(exc, TimeoutError):
            if isinstance(exc, StoreUnavailable) and _in_chain(exc, TTransportException):
                raise  # the connection itself timed out: "not reachable" says it
            raise StoreUnavailable(
                f"{where} accepted the connection but sent no answer within {timeout} ms: "
                f"a busy gateway, or a server that is not a Thrift gateway ({GATEWAY_PORTS}); "
                + _SILENT_SASL[gateways.wire.sasl is not None],
                answered="a silent server",
            ) from exc
        if not gateways.wire.plain:
            raise _wire_mismatch(gateways, exc) from exc
        gateway = gateways.current
        answered, what = _identify(gateway.host, gateway.port, timeout)
        if answered is None:  # nothing listens (or a gateway answered): the message stands
            if isinstance(exc, StoreUnavailable):
                raise
            detail = (
                str(exc)
                if isinstance(exc, StoreError)
                else f"{where}: the reply is not an HBase gateway's ({_named(exc)}; "
                f"{GATEWAY_PORTS})"
            )
            raise StoreUnavailable(detail) from exc
        raise StoreUnavailable(f"{where}: {what}", answered=answered) from exc


def _wire_mismatch(gateways: Gateways, exc: Exception) -> StoreUnavailable:
    """A first call that failed over a URL's own wire (TLS, framed, HTTP, compact):
    a TLS refusal or nothing listening says so itself; anything else answered in a
    way this wire could not read, so the gateway is likely set otherwise."""
    if isinstance(exc, NotAuthenticated):  # it says what to do itself
        return exc
    if (isinstance(exc, StoreUnavailable) and _in_chain(exc, ssl.SSLError)) or _refused(exc):
        return exc if isinstance(exc, StoreUnavailable) else StoreUnavailable(str(exc))
    said = str(exc) if isinstance(exc, StoreError) else f"{gateways.where}: {_named(exc)}"
    return StoreUnavailable(
        f"{said}; is the gateway set to this URL's transport, protocol and TLS "
        "(transport=framed: hbase.regionserver.thrift.framed; transport=http: "
        ".http; protocol=compact: .compact; tls=1: hbase.thrift.ssl.enabled, over http; "
        "sasl=gssapi: hbase.thrift.security.qop)?"
    )


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection that could not open (nothing answered)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or (
            isinstance(seen, TTransportException) and seen.type == TTransportException.NOT_OPEN
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _in_chain(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _named(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _identify(host: str, port: int, timeout: int) -> tuple[str | None, str]:
    """(what answered, a sentence about it) for the server at ``host:port``; None
    when nothing accepts the connection or a Thrift server answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout / 1000) as sock:
            sock.sendall(_PROBE)
            reply = sock.recv(512)
    except ConnectionResetError:
        return "a reset", f"the server reset the connection without answering ({GATEWAY_PORTS})"
    except TimeoutError:
        return "a silent server", (
            f"the server answered once, then sent nothing within {timeout} ms; "
            f"it is not a Thrift gateway ({GATEWAY_PORTS})"
        )
    except OSError:
        return None, ""
    if not reply:
        return "a close", (
            "the server closed the connection without answering: not a Thrift gateway, or "
            "one set to the framed transport or compact protocol (then say so in the index "
            f"URL: transport=framed, protocol=compact) ({GATEWAY_PORTS})"
        )
    if reply.startswith(b"HTTP/"):
        status = reply.split(b"\r\n", 1)[0].decode("latin-1")
        return "an HTTP server", (
            f"an HTTP server answered ({status}), not a Thrift gateway: is this the serve or "
            f"REST port, or HBase's web UI? The Thrift gateways are on 9090 (Thrift1) and "
            "9091 (Thrift2) by default"
        )
    if reply[0] in (0x15, 0x16) and reply[1:2] == b"\x03":
        return "a TLS server", (
            "a TLS server answered (it expects an encrypted connection), not a plain "
            f"Thrift gateway ({GATEWAY_PORTS}); a gateway set to TLS takes tls=1 and "
            "ca=PATH in the index URL"
        )
    if reply.startswith(b"\x80\x01"):  # a gateway (of the other protocol?): its error says
        return None, ""
    return "other bytes", (
        f"the server answered with bytes that are not Thrift ({reply[:16].hex(' ')}), "
        f"so it is not an HBase Thrift gateway ({GATEWAY_PORTS})"
    )


def first_line(exc: Exception) -> str:
    """Server messages carry Java stack traces; the first line says what happened."""
    message = getattr(exc, "message", None) or "no message"
    return str(message).strip().split("\n", 1)[0]


def is_dropped(exc: BaseException) -> bool:
    """A connection that worked and was cut, as opposed to one that cannot open."""
    if isinstance(exc, TTransportException):
        return exc.type == TTransportException.END_OF_FILE
    return isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError))


class ClientPool(Generic[C]):
    """Thrift clients, opened on demand through :class:`~.connect.Gateways` (which
    gateway, failover) and kept (up to ``size`` idle) for reuse.

    A client whose call failed in any way is closed, never reused: after a
    timeout or an error mid-message its socket is in an unknown state. A call
    that failed on the network (a dropped connection: idle timeout, gateway
    restart or death; a refused one; a timeout where another gateway can take
    over) is tried again up to ``retries`` times, after closing every idle
    client of the gateway that failed, the first time at once (a pooled
    connection the gateway had dropped), then after a growing pause. Every call
    made through here is idempotent (fixed keys, explicit timestamps), so a
    retry never writes twice. Each attempt is reported to the gateways' observer.
    """

    def __init__(
        self,
        gateways: Gateways,
        make_client: Callable[[Any], C],
        size: int,
        retries: int,
    ) -> None:
        self._gateways, self._make, self._size, self._retries = gateways, make_client, size, retries
        self._idle: list[tuple[Gateway, C]] = []
        self._lock = threading.Lock()
        self._closed = False
        #: The gateway of the connection whose call failed last, per thread.
        self._failed = threading.local()

    def check_open(self, action: str) -> None:
        if self._closed:
            raise StoreClosed(f"cannot {action}: the HBase store was closed")

    def _take(self) -> tuple[Gateway, C]:
        with self._lock:
            if self._closed:
                raise StoreClosed("the HBase store was closed")
            if self._idle:
                return self._idle.pop()
        gateway, protocol = self._gateways.connect()
        return gateway, self._make(protocol)

    def _give_back(self, conn: tuple[Gateway, C]) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append(conn)
                return
        _close(conn[1])

    def _discard(self, conn: tuple[Gateway, C]) -> None:
        self._failed.gateway = conn[0]
        try:
            _close(conn[1])
        except NETWORK_ERRORS as exc:  # closing a broken socket may fail too
            log.debug("closing a failed connection: %s", exc)

    def _forget(self, gateway: Gateway) -> None:
        """Close every idle client of ``gateway``: after one failed, the rest are suspect."""
        with self._lock:
            stale = [conn for conn in self._idle if conn[0] == gateway]
            self._idle = [conn for conn in self._idle if conn[0] != gateway]
        for conn in stale:
            self._discard(conn)

    def call(self, action: str, fn: Callable[[C], T]) -> T:
        return self._retried(action, lambda: self._once(fn))

    def call_many(
        self,
        action: str,
        jobs: Sequence[J],
        send: Callable[[C, J], None],
        receive: Callable[[C, J], tuple[T, J | None]],
    ) -> list[T]:
        """Every job's call, each on its own connection, from this one thread.

        All requests go out (``size`` at most in flight) before the first reply
        is read, so the gateway serves them in parallel and no thread handoff
        costs anything. ``receive`` reads a job's reply and may name a follow-up
        job (the next page) for the same connection. Every client in flight when
        anything fails is closed (its reply is unread); after a dropped
        connection the whole set starts over, as :meth:`call` retries.
        """
        return self._retried(action, lambda: self._pipelined(jobs, send, receive))

    def _retried(self, action: str, attempt: Callable[[], T]) -> T:
        gateways, observer = self._gateways, self._gateways.observer
        for tries in range(self._retries + 1):
            self._failed.gateway = None
            started = time.monotonic()
            try:
                result = attempt()
            except BaseException as exc:
                gateway = self._failed.gateway or gateways.current
                kind = _network_kind(exc)
                if kind is None:
                    if isinstance(exc, TException):
                        observer.error(str(gateway), "call")
                    raise
                observer.error(str(gateway), kind)
                if kind == "timeout" and len(gateways.all) == 1:
                    # One gateway that timed out is busy (or waiting on HBase): asking
                    # it again would only double the wait.
                    raise StoreUnavailable(
                        f"{gateways.where} did not answer within {gateways.timeout} ms while "
                        f"trying to {action}: the gateway may still be waiting on HBase (its "
                        "hbase.client.operation.timeout and hbase.client.retries.number, "
                        'docs/hbase.md "Retries and timeouts"); give a larger timeout= in the '
                        "index URL, or a second gateway to fail over to"
                    ) from exc
                if kind != "dropped" or tries > 0:  # one cut connection may be an idle cut
                    gateways.failed(gateway)
                self._forget(gateway)
                if tries == self._retries:
                    raise StoreUnavailable(
                        f"{gateways.where} is not reachable while trying to {action} "
                        f"(gateway {gateway}: {_named(exc)}; {tries + 1} attempts, "
                        f"retries={self._retries} in the index URL)"
                    ) from exc
                observer.retry(str(gateway))
                log.info("retrying %s after %s on %s: %s", action, kind, gateway, exc)
                time.sleep(0 if tries == 0 and kind == "dropped" else RETRY_PAUSE_S * 2**tries)
                continue
            observer.call(str(self._gateways.current), time.monotonic() - started)
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _once(self, fn: Callable[[C], T]) -> T:
        conn = self._take()
        try:
            result = fn(conn[1])
        except BaseException:
            self._discard(conn)
            raise
        self._give_back(conn)
        return result

    def _pipelined(
        self,
        jobs: Sequence[J],
        send: Callable[[C, J], None],
        receive: Callable[[C, J], tuple[T, J | None]],
    ) -> list[T]:
        results: list[T] = []
        waiting = deque(jobs)
        # sent, reply unread, in sending order
        in_flight: deque[tuple[tuple[Gateway, C], J]] = deque()
        try:
            while waiting or in_flight:
                while waiting and len(in_flight) < self._size:
                    in_flight.append((self._take(), waiting.popleft()))
                    send(in_flight[-1][0][1], in_flight[-1][1])
                conn, job = in_flight[0]
                result, more = receive(conn[1], job)
                in_flight.popleft()
                results.append(result)
                if more is None:
                    self._give_back(conn)
                else:
                    in_flight.append((conn, more))
                    send(conn[1], more)
        except BaseException:
            failed = in_flight[0][0] if in_flight else None
            for conn, _ in in_flight:
                self._discard(conn)
            self._failed.gateway = failed[0] if failed else None
            raise
        return results

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)


def _close(client: Any) -> None:
    client.close()


def _network_kind(exc: BaseException) -> str | None:
    """How ``exc`` failed on the network (``dropped``, ``connect``, ``timeout``), or
    None for what no retry mends: a server's answer, a TLS refusal, a bug."""
    if is_dropped(exc):
        return "dropped"
    if isinstance(exc, TimeoutError) or (
        isinstance(exc, TTransportException) and exc.type == TTransportException.TIMED_OUT
    ):
        return "timeout"
    if isinstance(exc, NETWORK_ERRORS) and not isinstance(exc, ssl.SSLError):
        return "connect"
    return None
