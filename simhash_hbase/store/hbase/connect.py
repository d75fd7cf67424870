"""From an ``hbase://`` URL's gateways and wire settings to connected Thrift protocols.

:class:`Gateways` is where failover lives: connections go to one gateway (sticky)
until it fails; a gateway that failed is skipped for a backoff, then probed again
by the next connection that needs one. What each gateway must be set to serve
(TLS, framed or HTTP transport, compact protocol, SASL) is the URL's :class:`Wire`;
docs/hbase.md has the matching gateway settings.
"""

from __future__ import annotations

import http.client
import io
import logging
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.transport import (
    TBufferedTransportFactory,
    TFramedTransportFactory,
    TSocket,
    TSSLSocket,
    TTransportBase,
    TTransportException,
)

from simhash_hbase.errors import InvalidIndexUrl, NotAuthenticated, StoreUnavailable
from simhash_hbase.store.hbase.metrics import GatewayObserver
from simhash_hbase.store.hbase.settings import Gateway, Wire

log = logging.getLogger(__name__)

#: Seconds a gateway that failed is skipped before it is tried again (doubling per
#: failure in a row, up to ``MAX_BACKOFF_S``), while another one answers.
BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
INSECURE = (
    "WARNING: %s: verify=0, so the gateways' TLS certificates are NOT checked: anyone "
    "between this process and them can read and change every call. Give ca=PATH instead"
)


def tls_context(wire: Wire, url: str) -> ssl.SSLContext | None:
    """The client TLS context of ``wire`` (None without TLS); a CA, certificate or key
    that cannot be read is an :class:`InvalidIndexUrl` naming the option."""
    if not wire.tls:
        return None
    try:
        context = ssl.create_default_context(cafile=wire.ca)
        if wire.cert:
            context.load_cert_chain(wire.cert, keyfile=wire.key)
    except (OSError, ssl.SSLError) as exc:
        option = "ca" if wire.ca and not wire.cert else "ca, cert or key"
        raise InvalidIndexUrl(f"index URL {url}: cannot load {option} ({exc})") from None
    if not wire.verify:
        log.warning(INSECURE, url)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class HttpTransport(TTransportBase):  # type: ignore[misc]
    """Thrift over HTTP POSTs on one kept-alive connection (a gateway set to
    hbase.regionserver.thrift.http), with the call timeout that thriftpy2's own
    THttpClient does not pass on."""

    def __init__(
        self, gateway: Gateway, timeout: int, context: ssl.SSLContext | None, wire: Wire
    ) -> None:
        self._gateway, self._wire = gateway, wire
        self._conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                gateway.host, gateway.port, timeout=timeout / 1000, context=context
            )
            if context is not None
            else http.client.HTTPConnection(gateway.host, gateway.port, timeout=timeout / 1000)
        )
        self._out = io.BytesIO()
        self._in = io.BytesIO()

    def open(self) -> None:
        self._conn.connect()

    def is_open(self) -> bool:
        return self._conn.sock is not None

    def close(self) -> None:
        self._conn.close()

    def write(self, data: bytes) -> None:
        self._out.write(data)

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the last reply (the buffered transport above asks
        for a buffer's worth); none left is a reply cut short."""
        data = self._in.read(size)
        if not data:
            raise TTransportException(
                TTransportException.END_OF_FILE, f"the HTTP reply from {self._gateway} ended early"
            )
        return data

    def flush(self) -> None:
        body, self._out = self._out.getvalue(), io.BytesIO()
        headers = {"Content-Type": "application/x-thrift", "Accept": "*/*"}
        if self._wire.sasl is not None:  # SPNEGO: a Kerberos token on every request
            headers["Authorization"] = "Negotiate " + spnego_token(self._gateway, self._wire)
        try:
            self._conn.request("POST", "/", body, headers)
            reply = self._conn.getresponse()
            content = reply.read()
        except http.client.HTTPException as exc:  # a protocol error, not an OSError
            raise TTransportException(TTransportException.END_OF_FILE, str(exc)) from exc
        if reply.status == 401:
            raise NotAuthenticated(self._refused())
        if reply.status != 200:
            raise TTransportException(
                TTransportException.UNKNOWN,
                f"HTTP {reply.status} {reply.reason} from {self._gateway}: is it set to "
                "hbase.regionserver.thrift.http (transport=http)?",
            )
        self._in = io.BytesIO(content)

    def _refused(self) -> str:
        """Why the gateway answered 401, and what to do."""
        where = f"HBase at {self._gateway}: the gateway refused the request (HTTP 401)"
        if self._wire.sasl is None:
            return (
                f"{where}: it requires Kerberos (SPNEGO, hbase.thrift.security.qop over "
                "HTTP): add sasl=gssapi to the index URL and get a ticket (kinit)"
            )
        return (
            f"{where}: it did not accept the ticket for "
            f"{kerberos_server(self._gateway, self._wire)}: is that its "
            "hbase.thrift.spnego.principal?"
        )


class GssapiClient:
    """pure-sasl's Kerberos (GSSAPI) client in the shape thriftpy2's
    TSaslClientTransport calls (Cyrus SASL's ``sasl.Client``: start, step, encode,
    decode, getError); a failure raises from the call that met it."""

    def __init__(self, host: str, wire: Wire) -> None:
        client_class, _ = sasl_modules()
        self._client = client_class(
            host, wire.kerberos_service, mechanism="GSSAPI", principal=wire.principal
        )

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        return True, mechanism, self._client.process()

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        return True, self._client.process(challenge)

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        return True, self._client.wrap(data)

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return True, self._client.unwrap(data)

    def getError(self) -> str:  # the name TSaslClientTransport calls
        return "see the exception raised"


def sasl_modules() -> tuple[Any, tuple[type[Exception], ...]]:
    """pure-sasl's client class and the errors a handshake raises (its own and its
    Kerberos binding's); imported here, not at the top, so that an install without
    the ``kerberos`` extra opens every other URL."""
    try:
        import kerberos  # pure-sasl offers GSSAPI only when this imports
        import puresasl
        from puresasl.client import SASLClient
    except ModuleNotFoundError as exc:
        raise InvalidIndexUrl(
            f"sasl=gssapi needs pure-sasl and kerberos ({exc.name} is not installed): "
            "pip install 'simhash-hbase[kerberos]' (kerberos builds against libkrb5: "
            "apt-get install libkrb5-dev)"
        ) from None
    return SASLClient, (kerberos.KrbError, puresasl.SASLError, puresasl.SASLProtocolException)


def open_protocol(
    gateway: Gateway, wire: Wire, timeout: int, context: ssl.SSLContext | None
) -> Any:
    """A Thrift protocol on a new connection to ``gateway``."""
    raw: Any
    if wire.transport == "http":
        raw = HttpTransport(gateway, timeout, context, wire)
    elif context is not None:
        raw = TSSLSocket(gateway.host, gateway.port, socket_timeout=timeout, ssl_context=context)
    else:  # TSocket sets TCP_NODELAY: a request is one small write, never held back
        raw = TSocket(gateway.host, gateway.port, socket_timeout=timeout)
    if wire.sasl is not None and wire.transport != "http":  # SASL frames and buffers itself
        transport = _sasl_opened(gateway, wire, raw)
    else:
        framing = (
            TFramedTransportFactory if wire.transport == "framed" else TBufferedTransportFactory
        )
        transport = framing().get_transport(raw)
        transport.open()
    coding = TCompactProtocolFactory if wire.protocol == "compact" else TBinaryProtocolFactory
    return coding().get_protocol(transport)


def _sasl_opened(gateway: Gateway, wire: Wire, raw: Any) -> Any:
    """``raw`` opened and authenticated by Kerberos (SASL GSSAPI, hbase.thrift.
    security.qop on the gateway). A connection that cannot open stays a network
    error (failover); a handshake that fails is :class:`NotAuthenticated`, saying
    whether the ticket, the principal or the gateway's setting is wrong."""
    try:
        from thriftpy2.transport.sasl import TCySaslClientTransport as Sasl
    except ImportError:  # a thriftpy2 built without Cython (PyPy): its Python twin
        from thriftpy2.transport.sasl import TSaslClientTransport as Sasl

    _, refusals = sasl_modules()
    raw.open()
    transport = Sasl(lambda: GssapiClient(gateway.host, wire), "GSSAPI", raw)
    where = f"HBase at {gateway} (sasl=gssapi)"
    try:
        transport.open()
    except (TTransportException, ConnectionError) as exc:
        raw.close()
        if isinstance(exc, TTransportException) and exc.type == TTransportException.TIMED_OUT:
            raise  # a busy gateway: a network error, as any other call's
        raise NotAuthenticated(
            f"{where}: the gateway did not take the Kerberos handshake ({exc}): is "
            "it set to require SASL (hbase.thrift.security.qop, with hbase.thrift.keytab.file "
            "and hbase.thrift.kerberos.principal)? Without it, leave sasl= out of the URL"
        ) from exc
    except refusals as exc:
        raw.close()
        raise kerberos_refusal(where, kerberos_server(gateway, wire), exc) from exc
    return transport


def spnego_token(gateway: Gateway, wire: Wire) -> str:
    """A Kerberos token for one HTTP request to ``gateway`` (SPNEGO: the gateway's
    ThriftHttpServlet checks each request's Authorization header on its own)."""
    _, refusals = sasl_modules()
    import kerberos

    try:
        _, context = kerberos.authGSSClientInit(
            f"{wire.kerberos_service}@{gateway.host}", principal=wire.principal
        )
        kerberos.authGSSClientStep(context, "")
        return str(kerberos.authGSSClientResponse(context))
    except refusals as exc:
        where = f"HBase at {gateway} (sasl=gssapi over HTTP)"
        raise kerberos_refusal(where, kerberos_server(gateway, wire), exc) from exc


def kerberos_server(gateway: Gateway, wire: Wire) -> str:
    """The gateway's principal as Kerberos is asked for it (SERVICE/HOST)."""
    return f"{wire.kerberos_service}/{gateway.host}"


def kerberos_refusal(where: str, server: str, exc: Exception) -> NotAuthenticated:
    """What a failed Kerberos step means: the KDC knows no such principal, or this
    process has no (valid) ticket."""
    said = _gss_message(exc)
    if "not found in Kerberos database" in said:
        return NotAuthenticated(
            f"{where}: the KDC knows no principal {server} ({said}): give the gateway's "
            "principal's service as service=NAME in the index URL (its "
            "hbase.thrift.kerberos.principal, over HTTP hbase.thrift.spnego.principal, is "
            "SERVICE/HOST@REALM) and name the gateway by that HOST"
        )
    return NotAuthenticated(
        f"{where}: no Kerberos credentials for {server} ({said}): get a ticket first "
        "(kinit PRINCIPAL, or kinit -kt KEYTAB PRINCIPAL; KRB5CCNAME names the ticket "
        "cache, KRB5_CONFIG the realm's krb5.conf), and give principal= in the index "
        "URL if the cache holds several"
    )


def _gss_message(exc: Exception) -> str:
    """The readable part of a GSS error: the (major, minor) messages the Kerberos
    binding puts in its arguments, the minor (the mechanism's own) first."""
    parts = [str(arg[0]) for arg in exc.args if isinstance(arg, tuple) and arg and arg[0]]
    return "; ".join(reversed(parts)).strip() if parts else str(exc)


class Gateways:
    """The gateways of one index URL, and which of them new connections go to."""

    def __init__(
        self,
        gateways: Sequence[Gateway],
        wire: Wire,
        timeout: int,
        url: str,
        observer: GatewayObserver,
    ) -> None:
        self.all = tuple(gateways)
        self.wire, self.timeout, self.url, self.observer = wire, timeout, url, observer
        self._context = tls_context(wire, url)
        if wire.sasl is not None:
            sasl_modules()  # a missing extra is a bad URL here, before any connection
        self._lock = threading.Lock()
        self._current = 0
        self._down: dict[int, tuple[float, int]] = {}  # gateway -> (retry after, failures)
        #: "HBase at HOST:PORT[,HOST:PORT...]", for messages.
        self.where = "HBase at " + ",".join(str(g) for g in self.all)

    @property
    def current(self) -> Gateway:
        """The gateway new connections go to first."""
        return self.all[self._current]

    def connect(self) -> tuple[Gateway, Any]:
        """A connected protocol to the current gateway, else to the next that answers;
        a TLS failure ends it at once (:class:`StoreUnavailable` saying what to do),
        as does the last network error when none answers."""
        last: BaseException | None = None
        for i in self._order():
            gateway = self.all[i]
            try:
                protocol = open_protocol(gateway, self.wire, self.timeout, self._context)
            except (TTransportException, OSError) as exc:
                refusal = _tls_failure(exc)  # TSocket wraps the handshake's error
                if refusal is not None:
                    self.observer.error(str(gateway), "tls")
                    raise self._tls_error(gateway, refusal) from exc
                self.observer.error(str(gateway), "connect")
                self.failed(gateway)
                last = exc
                continue
            with self._lock:
                self._current = i
                self._down.pop(i, None)
            return gateway, protocol
        assert last is not None, "a URL names at least one gateway"
        raise last

    def _order(self) -> list[int]:
        """The current gateway, then the others; those in their backoff last (soonest
        due first): tried only when no other answers."""
        now = time.monotonic()
        with self._lock:
            ring = [(self._current + k) % len(self.all) for k in range(len(self.all))]
            ready = [i for i in ring if self._down.get(i, (0.0, 0))[0] <= now]
            waiting = sorted(set(ring) - set(ready), key=lambda i: self._down[i][0])
            return ready + waiting

    def failed(self, gateway: Gateway) -> None:
        """``gateway`` failed on the network: skip it for a (growing) backoff."""
        i = self.all.index(gateway)
        with self._lock:
            _, failures = self._down.get(i, (0.0, 0))
            pause = min(BACKOFF_S * 2**failures, MAX_BACKOFF_S)
            self._down[i] = (time.monotonic() + pause, failures + 1)
            if len(self.all) > 1:
                log.info("%s: gateway %s failed; next try in %.0f s", self.url, gateway, pause)

    def _tls_error(self, gateway: Gateway, exc: ssl.SSLError) -> StoreUnavailable:
        return StoreUnavailable(tls_refusal(f"HBase at {gateway} (index URL {self.url})", exc))


def tls_refusal(where: str, exc: ssl.SSLError) -> str:
    """What a TLS failure with ``where`` means, and what to do about it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"{where}: the gateway's TLS certificate is not trusted ({exc.verify_message}): "
            "give the CA certificate that signed it as ca=PATH in the index URL, or fix the "
            "gateway's keystore (hbase.thrift.ssl.keystore.store) so that it names this host"
        )
    return (
        f"{where}: TLS failed ({exc.reason or exc}): is the gateway set to TLS "
        "(hbase.thrift.ssl.enabled, over transport=http)? Without it, leave tls=1 out of "
        "the URL; where it asks for client certificates, give cert= and key="
    )


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind a connection that failed, if that is why."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
