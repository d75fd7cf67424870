"""Stores are chosen by index URL: a path (embedded LMDB) or ``hbase://host:port``."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..errors import InvalidIndexUrl
from .base import IndexCell, Store, StoreBatch

DEFAULT_INDEX = "shdb-index"
_EMBEDDED_SCHEMES = ("", "file")

__all__ = ["IndexCell", "Store", "StoreBatch", "open_store", "resolve_url"]


def resolve_url(url: str | None) -> str:
    """The URL given, else ``$SHDB_INDEX``, else ``./shdb-index``."""
    return url or os.environ.get("SHDB_INDEX") or DEFAULT_INDEX


def open_store(url: str | None, *, create: bool = True, readonly: bool = False) -> Store:
    """The store at ``url``; ``readonly`` promises no writes (the embedded store then
    opens without write locks, so a read-only folder can be read)."""
    url = resolve_url(url)
    scheme = urlsplit(url).scheme.lower()
    if scheme == "hbase":
        from .hbase import HBaseStore  # happybase is the optional `hbase` extra

        return HBaseStore.from_url(url, create=create)
    if scheme in _EMBEDDED_SCHEMES:
        from .embedded import EmbeddedStore

        path = urlsplit(url).path if scheme == "file" else url
        return EmbeddedStore(path, create=create, readonly=readonly)
    raise InvalidIndexUrl(
        f"index URL {url!r} has an unknown scheme {scheme!r}: use a directory path for "
        "the embedded store, or hbase://HOST:PORT?prefix=NAME for HBase"
    )
