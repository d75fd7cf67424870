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
from typing import Any
from urllib.parse import parse_qs, urlsplit

from simhash_hbase.errors import InvalidIndexUrl, InvalidSetting
from simhash_hbase.layout.plan import parse_count

#: The Thrift2 gateway's usual port: the fast one (a new index gets the bucket
#: layout there); Thrift1's is 9090 (docs/hbase.md).
DEFAULT_PORT = 9091
DEFAULT_PREFIX = "shdb"
DEFAULT_POOL = 12
DEFAULT_TIMEOUT_MS = 30_000
APIS = ("thrift1", "thrift2")
#: Index table layouts (docs/SPEC.md, "index"): one row per 13-byte key, or
#: one row per 5-byte prefix (a bucket) holding a column per (fingerprint, id).
ROWS, BUCKETS = "rows", "buckets"
LAYOUTS = (ROWS, BUCKETS)
#: A table prefix, optionally in an HBase namespace (``NS:NAME``; a namespace name
#: is letters, digits and ``_``, as HBase allows).
_PREFIX_RE = re.compile(r"^(?:[A-Za-z0-9_]{1,64}:)?[A-Za-z0-9_.-]{1,64}$")


def parse_url(url: str) -> dict[str, Any]:
    """The parts of an ``hbase://HOST[:PORT][/[NS:]NAME][?prefix=NAME&...]`` URL,
    checked: the keyword arguments of :class:`~simhash_hbase.store.hbase.store.HBaseStore`."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"prefix", "pool", "timeout", "api", "layout", "expect", "docs_sample"}
    if unknown:
        raise InvalidIndexUrl(
            f"index URL {url!r}: unknown parameter {sorted(unknown)[0]!r}; known: prefix, "
            "pool, timeout (ms), api (thrift1 or thrift2), layout (rows or buckets), "
            "expect (documents), docs_sample (a file of ids)"
        )
    try:
        port = parts.port or DEFAULT_PORT
        pool = int(query.get("pool", DEFAULT_POOL))
        timeout = int(query.get("timeout", DEFAULT_TIMEOUT_MS))
        expect = parse_count(query["expect"]) if "expect" in query else None
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
    api = query.get("api")
    if api is not None and api not in APIS:
        raise InvalidIndexUrl(f"index URL {url!r}: api must be thrift1 or thrift2, not {api!r}")
    layout = query.get("layout")
    if layout is not None and layout not in LAYOUTS:
        raise InvalidIndexUrl(f"index URL {url!r}: layout must be rows or buckets, not {layout!r}")
    if not parts.hostname or not _PREFIX_RE.match(prefix) or pool < 1 or timeout < 1:
        raise InvalidIndexUrl(
            f"index URL {url!r} is not of the form hbase://HOST[:PORT][/[NS:]NAME] "
            "(NAME: letters, digits, _ . -; NS, an HBase namespace: letters, digits, _; "
            "pool and timeout positive)"
        )
    return {
        "host": parts.hostname,
        "port": port,
        "prefix": prefix,
        "pool": pool,
        "timeout": timeout,
        "api": api,
        "layout": layout,
        "expect": expect,
        "docs_sample": query.get("docs_sample"),
    }


def layout_of(manifest: dict[str, Any]) -> str:
    """The index table layout a manifest records: rows unless it says buckets."""
    return BUCKETS if manifest.get("hbase_index") == BUCKETS else ROWS
