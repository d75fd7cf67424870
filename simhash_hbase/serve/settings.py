"""What `shdb serve` is started with, and the rule that guards a public bind."""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.minhash import check_similarity
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES, check_probes
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.layout.window import duration_ms
from simhash_hbase.records import DEFAULT_LIMIT, check_limit

TOKEN_ENV = "SHDB_TOKEN"


@dataclass(frozen=True)
class Limits:
    """What one connection may make the server hold, and for how long, before the app
    (and its token check) sees the request: see :mod:`simhash_hbase.serve.bounds`."""

    max_head_bytes: int = 64 * 1024  # request line and headers; beyond: 431
    max_headers: int = 100  # header fields; beyond: 431
    max_request_line: int = 8 * 1024  # the request target; beyond: 414
    head_seconds: float = 10.0  # from the connection (or a request's first byte) to its head
    body_seconds: float = 60.0  # from the head to the whole body; then the connection closes


@dataclass(frozen=True)
class ServeSettings:
    index: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None  # required unless bound to loopback
    k: int = DEFAULT_K
    limit: int = DEFAULT_LIMIT  # matches shown per item (all are counted in "total")
    probes: int = DEFAULT_QUERY_PROBES  # multi-probe lookups of texts (not of fingerprints)
    similarity: float | None = None  # None: the index's (its manifest's lsh.threshold)
    within: str | None = None  # requests asking no window: this duration back (e.g. "30d")
    max_body_bytes: int = 64 * 1024 * 1024
    max_items: int = 10_000  # per request
    max_text_bytes: int = 4 * 1024 * 1024  # per item
    queue_documents: int = 200_000  # waiting to be written; beyond: 429
    group_documents: int = 20_000  # per group commit
    fingerprint_workers: int = 0  # processes that fingerprint texts (0: the event loop's)
    limits: Limits = Limits()
    idle_seconds: int = 5  # a kept-alive connection with no request is closed

    def check(self) -> None:
        """Refuse bad defaults, and to serve an index to the network without a token."""
        check_limit(self.limit)
        check_probes(self.probes)
        if self.similarity is not None:
            check_similarity(self.similarity)
        if self.within is not None:
            duration_ms(self.within)
        if not self.token and not is_loopback(self.host):
            raise InvalidSetting(
                "token",
                f"binding to {self.host} (not loopback) needs a bearer token: give --token-file "
                f"FILE or set ${TOKEN_ENV}, and put TLS in front (docs/serve.md)",
            )
        if self.token is not None and len(self.token) < 16:
            raise InvalidSetting("token", "the bearer token is shorter than 16 characters")
        if self.token is not None and not (self.token.isascii() and self.token.isprintable()):
            raise InvalidSetting(
                "token",
                "the bearer token holds a character that is not printable ASCII: an HTTP "
                "header cannot carry it, so no client could authenticate; use letters, "
                "digits and -._~+/ (e.g. `openssl rand -hex 32`)",
            )

    def listen(self) -> socket.socket:
        """The service's socket, bound and listening before the index is opened or
        anything is said: a port in use is an error naming it (exit 2), not a line
        after "startup complete" (uvicorn binds only once the app has started)."""
        host = self.host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            return socket.create_server((host, self.port), family=family, backlog=2048)
        except OSError as exc:
            raise InvalidSetting("port", _bind_error(host, self.port, exc)) from None


def _bind_error(host: str, port: int, exc: OSError) -> str:
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: port {port} is in use (another shdb serve, or "
            "another program); stop it, or give another --port (--port 0 picks a free one)"
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: port {port} needs privileges; give --port 1024 or above"
    return (
        f"cannot listen on {where}: {exc.strerror or exc}; give --host an address of this "
        "machine (127.0.0.1: this machine only) and a free --port"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False
