"""Stores are chosen by index URL: a path (embedded LMDB) or ``hbase://host:port``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.store.base import CellBlock, IndexCell, Store, StoreBatch

if TYPE_CHECKING:
    from simhash_hbase.store.hbase.store import HBaseStore

DEFAULT_INDEX = "shdb-index"

__all__ = [
    "CellBlock",
    "IndexCell",
    "Store",
    "StoreBatch",
    "local_path",
    "open_store",
    "resolve_url",
]


def resolve_url(url: str | None) -> str:
    """The URL given, else ``$SHDB_INDEX``, else ``./shdb-index``."""
    return url or os.environ.get("SHDB_INDEX") or DEFAULT_INDEX


def local_path(url: str | None) -> Path | None:
    """The folder of an embedded index URL; None for a server store.

    Only ``scheme://`` makes a URL, so a folder named ``snap:2024`` is a folder.
    ``file://ix`` and ``file:///abs/ix`` name the folders ``ix`` and ``/abs/ix``.
    """
    url = resolve_url(url)
    if "://" not in url:
        return Path(url)
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    if parts.query or parts.fragment:
        raise InvalidIndexUrl(f"index URL {url!r}: a file:// URL takes no ?query or #fragment")
    return Path(unquote(parts.netloc + parts.path))


def _hbase_store() -> type[HBaseStore]:
    """The HBase store class; a clear error when the `hbase` extra is not installed."""
    try:
        from simhash_hbase.store.hbase.store import HBaseStore
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]  # thriftpy2.protocol: thriftpy2's
        if missing not in ("thriftpy2", "happybase"):
            raise
        raise InvalidIndexUrl(
            f"hbase:// indexes need the HBase client ({missing} is not installed): "
            "pip install 'simhash-hbase[hbase]'"
        ) from None
    return HBaseStore


def open_store(
    url: str | None, *, create: bool = True, readonly: bool = False, retain: int | None = None
) -> Store:
    """The store at ``url``; ``readonly`` promises no writes (the embedded store then
    opens without write locks, so a read-only folder can be read). ``retain``: a new
    index's retention in seconds, for a store that keeps it in its tables (HBase's TTL)."""
    url = resolve_url(url)
    path = local_path(url)
    if path is not None:
        from simhash_hbase.store.lmdb.store import EmbeddedStore

        return EmbeddedStore(path, create=create and not readonly, readonly=readonly)
    scheme = urlsplit(url).scheme.lower()
    if scheme == "hbase":
        return _hbase_store().from_url(url, create=create, retain=retain)
    raise InvalidIndexUrl(
        f"index URL {url!r} has an unknown scheme {scheme!r}: a folder (or file://FOLDER) "
        "for the embedded store, or hbase://HOST:PORT?prefix=NAME for HBase"
    )
