"""What names an HBase index, read without the HBase client: its ``hbase://`` URL
and its index table layout.

Kept apart from :mod:`~simhash_hbase.store.hbase.store` (which imports the Thrift
transports, the ``hbase`` extra) so that an install without that extra can list
and check every command: ``shdb --help`` loads ``shdb spark``'s module, which
reads the prefix of ``--index``, and a Spark job names its missing extra before
it touches HBase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from simhash_hbase.errors import InvalidIndexUrl, InvalidSetting
from simhash_hbase.layout.plan import parse_count

#: The Thrift2 gateway's usual port: the fast one (a new index gets the bucket
#: layout there); Thrift1's is 9090 (docs/hbase.md).
DEFAULT_PORT = 9091
DEFAULT_PREFIX = "shdb"
DEFAULT_POOL = 12
DEFAULT_TIMEOUT_MS = 30_000
#: Attempts after a call failed on the network (a refused connection, a gateway
#: that dropped it, a timeout where another gateway can take over), with a growing
#: pause; HBase-side retries are the gateway's own (hbase.client.retries.number).
DEFAULT_RETRIES = 3
APIS = ("thrift1", "thrift2")
#: Thrift transports and protocols a gateway may be set to (hbase.regionserver.thrift.
#: framed / .http / .compact); buffered binary is HBase's default.
TRANSPORTS = ("buffered", "framed", "http")
PROTOCOLS = ("binary", "compact")
#: Index table layouts (docs/SPEC.md, "index"): one row per 13-byte key, or
#: one row per 5-byte prefix (a bucket) holding a column per (fingerprint, id).
ROWS, BUCKETS = "rows", "buckets"
LAYOUTS = (ROWS, BUCKETS)
#: A table prefix, optionally in an HBase namespace (``NS:NAME``; a namespace name
#: is letters, digits and ``_``, as HBase allows).
_PREFIX_RE = re.compile(r"^(?:[A-Za-z0-9_]{1,64}:)?[A-Za-z0-9_.-]{1,64}$")
_GATEWAY_RE = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+))(?::([0-9]{1,5}))?$")
_PARAMETERS = {
    "prefix": "the table prefix",
    "pool": "connections per gateway",
    "timeout": "ms a call may take",
    "retries": "attempts after a network failure",
    "api": "thrift1 or thrift2",
    "layout": "rows or buckets",
    "expect": "documents a new index is sized for",
    "docs_sample": "a file of ids to split a new docs table at",
    "transport": "buffered, framed or http",
    "protocol": "binary or compact",
    "tls": "1: TLS to the gateways",
    "ca": "CA certificates (PEM) that signed the gateways' certificates",
    "cert": "a client certificate (PEM), for gateways that ask for one",
    "key": "the client certificate's key (PEM)",
    "verify": "0: do not check the gateways' certificates (insecure)",
    "sasl": "gssapi: Kerberos to gateways that require it (hbase.thrift.security.qop)",
    "service": "the service of the gateways' Kerberos principal (hbase; over http, HTTP)",
    "principal": "the Kerberos principal to authenticate as (the ticket cache's default)",
    "lease": "seconds a writer's lock lasts unrenewed (default 60)",
}
#: SASL mechanisms a gateway may require (hbase.thrift.security.qop): Kerberos.
SASL = ("gssapi",)
DEFAULT_SERVICE = "hbase"
SPNEGO_SERVICE = "HTTP"
_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@dataclass(frozen=True)
class Gateway:
    """One Thrift gateway of an index URL."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Wire:
    """How bytes reach the gateways: what each must be set to serve (docs/hbase.md)."""

    transport: str = "buffered"
    protocol: str = "binary"
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    verify: bool = True
    #: "gssapi": authenticate by Kerberos (SASL GSSAPI) as ``principal`` (None: the
    #: ticket cache's default) to the gateway's ``service``/HOST principal.
    sasl: str | None = None
    service: str | None = None
    principal: str | None = None

    @property
    def kerberos_service(self) -> str:
        """The service of the gateways' principal: ``service``, else HBase's usual
        one (``hbase``; over HTTP, SPNEGO's ``HTTP``)."""
        return self.service or (SPNEGO_SERVICE if self.transport == "http" else DEFAULT_SERVICE)

    @property
    def plain(self) -> bool:
        """HBase's default: buffered binary Thrift without TLS."""
        return self == PLAIN

    def query(self) -> str:
        """The URL parameters that give this wire (none for the default)."""
        parts = [
            f"{name}={quote(str(value), safe='/')}"
            for name, value, default in (
                ("transport", self.transport, "buffered"),
                ("protocol", self.protocol, "binary"),
                ("tls", int(self.tls), 0),
                ("ca", self.ca, None),
                ("cert", self.cert, None),
                ("key", self.key, None),
                ("verify", int(self.verify), 1),
                ("sasl", self.sasl, None),
                ("service", self.service, None),
                ("principal", self.principal, None),
            )
            if value != default
        ]
        return "".join(f"&{p}" for p in parts)


#: HBase's default wire: buffered binary Thrift, no TLS.
PLAIN = Wire()


def parse_url(url: str) -> dict[str, Any]:
    """The parts of an ``hbase://HOST[:PORT][,HOST[:PORT]...][/[NS:]NAME][?prefix=NAME&...]``
    URL, checked: the keyword arguments of :class:`~simhash_hbase.store.hbase.store.HBaseStore`."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - set(_PARAMETERS)
    if unknown:
        known = "; ".join(f"{name} ({what})" for name, what in _PARAMETERS.items())
        raise InvalidIndexUrl(
            f"index URL {url!r}: unknown parameter {sorted(unknown)[0]!r}; known: {known}"
        )
    try:
        gateways = tuple(_gateway(g) for g in parts.netloc.split(","))
        pool = int(query.get("pool", DEFAULT_POOL))
        timeout = int(query.get("timeout", DEFAULT_TIMEOUT_MS))
        retries = int(query.get("retries", DEFAULT_RETRIES))
        tls, verify = _flag(query, "tls", False), _flag(query, "verify", True)
        expect = parse_count(query["expect"]) if "expect" in query else None
        lease = float(query["lease"]) if "lease" in query else None
    except (ValueError, InvalidSetting) as exc:
        raise InvalidIndexUrl(f"index URL {url!r}: {exc}") from None
    if "docs_sample" in query and expect is None:
        raise InvalidIndexUrl(
            f"index URL {url!r}: docs_sample splits the docs table into the regions "
            "planned for expect=N documents; add expect"
        )
    path = parts.path.strip("/")
    if path and "prefix" in query:
        raise InvalidIndexUrl(
            f"index URL {url!r} names its prefix twice (/{path} and prefix=); keep one"
        )
    prefix = path or query.get("prefix", DEFAULT_PREFIX)
    for name, choices in (("api", APIS), ("layout", LAYOUTS)):
        _choice(url, query, name, choices)
    transport = _choice(url, query, "transport", TRANSPORTS) or "buffered"
    protocol = _choice(url, query, "protocol", PROTOCOLS) or "binary"
    paths = {name: query.get(name) for name in ("ca", "cert", "key")}
    if not tls and (any(paths.values()) or not verify):
        raise InvalidIndexUrl(
            f"index URL {url!r}: ca, cert, key and verify are TLS settings: add tls=1"
        )
    sasl = _choice(url, query, "sasl", SASL)
    _check_sasl(url, query, sasl, transport)
    if paths["key"] and not paths["cert"]:
        raise InvalidIndexUrl(f"index URL {url!r}: key= is the key of cert=: give cert= too")
    if (
        not _PREFIX_RE.match(prefix)
        or pool < 1
        or timeout < 1
        or retries < 0
        or not (lease is None or 0.3 <= lease <= 3600)
    ):
        raise InvalidIndexUrl(
            f"index URL {url!r} is not of the form hbase://HOST[:PORT][,HOST[:PORT]...]"
            "[/[NS:]NAME] (NAME: letters, digits, _ . -; NS, an HBase namespace: letters, "
            "digits, _; pool and timeout positive, retries 0 or more, lease 0.3 to 3600 s)"
        )
    return {
        "gateways": gateways,
        "prefix": prefix,
        "pool": pool,
        "timeout": timeout,
        "retries": retries,
        "api": query.get("api"),
        "layout": query.get("layout"),
        "expect": expect,
        "docs_sample": query.get("docs_sample"),
        "lease": lease,
        "wire": Wire(
            transport,
            protocol,
            tls,
            verify=verify,
            sasl=sasl,
            service=query.get("service"),
            principal=query.get("principal"),
            **paths,
        ),
    }


def _check_sasl(url: str, query: dict[str, str], sasl: str | None, transport: str) -> None:
    """Kerberos settings only with ``sasl=``, and not over the framed transport (SASL
    over the buffered one; over HTTP, SPNEGO)."""
    if sasl is None and ("service" in query or "principal" in query):
        raise InvalidIndexUrl(
            f"index URL {url!r}: service and principal are Kerberos settings: add sasl=gssapi"
        )
    if sasl is not None and transport == "framed":
        raise InvalidIndexUrl(
            f"index URL {url!r}: HBase's gateways take SASL over the buffered transport only "
            "(they refuse hbase.regionserver.thrift.framed with hbase.thrift.security.qop): "
            "leave transport=framed out"
        )


def _gateway(text: str) -> Gateway:
    match = _GATEWAY_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not of the form HOST or HOST:PORT")
    port = int(match[3] or DEFAULT_PORT)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} of {text!r} is out of range")
    return Gateway(match[1] or match[2], port)


def _flag(query: dict[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None:
        return default
    if value.lower() not in _FLAGS:
        raise ValueError(f"{name} must be 1 or 0, not {value!r}")
    return _FLAGS[value.lower()]


def _choice(url: str, query: dict[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    value = query.get(name)
    if value is not None and value not in choices:
        raise InvalidIndexUrl(
            f"index URL {url!r}: {name} must be {' or '.join(choices)}, not {value!r}"
        )
    return value


def layout_of(manifest: dict[str, Any]) -> str:
    """The index table layout a manifest records: rows unless it says buckets."""
    return BUCKETS if manifest.get("hbase_index") == BUCKETS else ROWS
