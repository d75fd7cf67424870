"""What `shdb serve` is started with, and the rule that guards a public bind."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES, check_probes
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.records import DEFAULT_LIMIT, check_limit

TOKEN_ENV = "SHDB_TOKEN"


@dataclass(frozen=True)
class ServeSettings:
    index: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None  # required unless bound to loopback
    k: int = DEFAULT_K
    limit: int = DEFAULT_LIMIT  # matches shown per item (all are counted in "total")
    probes: int = DEFAULT_QUERY_PROBES  # multi-probe lookups of texts (not of fingerprints)
    max_body_bytes: int = 64 * 1024 * 1024
    max_items: int = 10_000  # per request
    max_text_bytes: int = 4 * 1024 * 1024  # per item
    queue_documents: int = 200_000  # waiting to be written; beyond: 429
    group_documents: int = 20_000  # per group commit
    fingerprint_workers: int = 0  # processes that fingerprint texts (0: the event loop's)

    def check(self) -> None:
        """Refuse bad defaults, and to serve an index to the network without a token."""
        check_limit(self.limit)
        check_probes(self.probes)
        if not self.token and not is_loopback(self.host):
            raise InvalidSetting(
                "token",
                f"binding to {self.host} (not loopback) needs a bearer token: give --token-file "
                f"FILE or set ${TOKEN_ENV}, and put TLS in front (docs/serve.md)",
            )
        if self.token is not None and len(self.token) < 16:
            raise InvalidSetting("token", "the bearer token is shorter than 16 characters")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False
