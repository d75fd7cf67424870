"""Apache HBase through its Thrift gateway: Thrift2 by preference, Thrift1 where that is all.

One :class:`HBaseStore` holds what must not differ between the protocols:
table names, timestamps, the write order, rows to documents and cells. A
transport (``hbase_thrift1`` or ``hbase_thrift2``, behind the small
:class:`~.hbase_transport.Transport` interface) makes the calls and
translates its errors into :class:`StoreError`s. The protocol is asked of the
gateway when the store opens, or forced with ``?api=thrift1|thrift2``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

from simhash_hbase.errors import IndexNotFound, InvalidIndexUrl, StoreCorrupt, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store import hbase_tables
from simhash_hbase.store.base import IndexCell
from simhash_hbase.store.hbase_thrift1 import Thrift1Transport
from simhash_hbase.store.hbase_thrift2 import Thrift2Transport, gateway_api
from simhash_hbase.store.hbase_transport import Row, Transport

DEFAULT_PORT = 9090
DEFAULT_PREFIX = "shdb"
DEFAULT_POOL = 12
DEFAULT_TIMEOUT_MS = 30_000
APIS = ("thrift1", "thrift2")
_SCAN_ROWS = 1000  # rows per page of a full-table scan
_GET_ROWS = 1000  # rows per multi-get
_FLUSH_CELLS = 20_000  # buffered mutations before a batch flushes
_META_COL = b"m:json"
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_DOC_COLUMNS = (
    codec.COL_FINGERPRINT,
    codec.COL_TEXT,
    codec.COL_META,
    codec.COL_SKETCH,
    codec.COL_BANDS,
)
_INDEX_FAMILY = b"d:"


class _Clock:
    """Strictly increasing millisecond timestamps for this process.

    HBase quirk: a delete at timestamp T masks every put at <= T, even one sent
    later. Deletes therefore get T and the puts that follow get T+1, and no two
    flushes share a timestamp, so a remove-then-re-add in one millisecond works.
    """

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def pair(self) -> tuple[int, int]:
        with self._lock:
            t = max(int(time.time() * 1000), self._last + 1)
            self._last = t + 1
            return t, t + 1


_clock = _Clock()


def _parse_url(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"prefix", "pool", "timeout", "api"}
    if unknown:
        raise InvalidIndexUrl(
            f"index URL {url!r}: unknown parameter {sorted(unknown)[0]!r}; "
            "known: prefix, pool, timeout (ms), api (thrift1 or thrift2)"
        )
    try:
        port = parts.port or DEFAULT_PORT
        pool = int(query.get("pool", DEFAULT_POOL))
        timeout = int(query.get("timeout", DEFAULT_TIMEOUT_MS))
    except ValueError as exc:
        raise InvalidIndexUrl(f"index URL {url!r}: {exc}") from None
    prefix = query.get("prefix", DEFAULT_PREFIX)
    api = query.get("api")
    if api is not None and api not in APIS:
        raise InvalidIndexUrl(f"index URL {url!r}: api must be thrift1 or thrift2, not {api!r}")
    if not parts.hostname or not _PREFIX_RE.match(prefix) or pool < 1 or timeout < 1:
        raise InvalidIndexUrl(
            f"index URL {url!r} is not of the form hbase://HOST[:PORT][?prefix=NAME] "
            "(prefix: letters, digits, _ . -; pool and timeout positive)"
        )
    return {
        "host": parts.hostname,
        "port": port,
        "prefix": prefix,
        "pool": pool,
        "timeout": timeout,
        "api": api,
    }


class _HBaseBatch:
    """Buffers mutations; flushes index cells before docs rows (see store.base)."""

    def __init__(self, store: HBaseStore) -> None:
        self._store = store
        self._index_puts: dict[bytes, list[tuple[bytes, bytes]]] = defaultdict(list)
        self._index_deletes: dict[bytes, list[bytes]] = defaultdict(list)
        self._doc_puts: dict[bytes, list[tuple[bytes, bytes]]] = {}
        self._doc_deletes: dict[bytes, list[bytes]] = {}
        self._pending = 0

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        return self._store.get_docs(doc_ids)

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        for row, doc_id in cells:
            self._index_puts[row].append((_INDEX_FAMILY + codec.encode_doc_id(doc_id), b""))
            self._count(1)

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        for row, doc_id in cells:
            self._index_deletes[row].append(_INDEX_FAMILY + codec.encode_doc_id(doc_id))
            self._count(1)

    def put_docs(self, docs: Iterable[Document]) -> None:
        for doc in docs:
            key = codec.encode_doc_id(doc.doc_id)
            cols = codec.doc_to_columns(doc)
            # Columns the new version lacks are deleted, so a row is replaced whole.
            self._doc_puts[key] = list(cols.items())
            self._doc_deletes[key] = [c for c in _DOC_COLUMNS if c not in cols]
            self._count(len(_DOC_COLUMNS))

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        for doc_id in doc_ids:
            key = codec.encode_doc_id(doc_id)
            self._doc_puts.pop(key, None)
            self._doc_deletes[key] = list(_DOC_COLUMNS)
            self._count(len(_DOC_COLUMNS))

    def _count(self, mutations: int) -> None:
        """Flush inside a call, not after it: one call may carry a whole ingest batch
        (200,000 documents = 2,000,000 cells), and a Thrift gateway builds each request
        in its heap (a 512 MB Thrift2 gateway died of OutOfMemoryError on one such
        putMultiple). Flushing mid-call keeps the order: a document's cells are
        buffered before its docs row, so they are always sent first."""
        self._pending += mutations
        if self._pending >= _FLUSH_CELLS:
            self.flush()

    def flush(self) -> None:
        """Stale index cells (at T), then new ones (T+1), then docs rows (T+1).

        A crash in between leaves cells without a docs row, never a docs row
        without its cells; readers confirm hits against the docs row.
        """
        deletes_ts, puts_ts = _clock.pair()
        transport, tables = self._store.transport, self._store.tables
        transport.mutate(tables["index"], {}, self._index_deletes, deletes_ts)
        transport.mutate(tables["index"], self._index_puts, {}, puts_ts)
        doc_deletes = {k: cols for k, cols in self._doc_deletes.items() if cols}
        transport.mutate(tables["docs"], self._doc_puts, doc_deletes, puts_ts)
        self._index_puts.clear()
        self._index_deletes.clear()
        self._doc_puts = {}
        self._doc_deletes = {}
        self._pending = 0


class HBaseStore:
    """The production store: tables ``<prefix>_index``, ``_docs``, ``_meta``."""

    atomic_batches = False

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_PORT,
        *,
        prefix: str = DEFAULT_PREFIX,
        pool: int = DEFAULT_POOL,
        timeout: int = DEFAULT_TIMEOUT_MS,
        api: str | None = None,
        create: bool = True,
    ) -> None:
        self.host, self.port, self.prefix = host, port, prefix
        self.url = f"hbase://{host}:{port}?prefix={prefix}" + (f"&api={api}" if api else "")
        self.tables = {t: hbase_tables.table_name(prefix, t).encode() for t in hbase_tables.TABLES}
        where = f"HBase at {host}:{port}"
        if api is None:
            api = gateway_api(host, port, timeout, where)
        transport_class = Thrift2Transport if api == "thrift2" else Thrift1Transport
        self.transport: Transport = transport_class(
            host, port, pool=pool, timeout=timeout, where=where
        )
        try:
            self._ensure_tables(create)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> HBaseStore:
        return cls(**_parse_url(url), create=create)

    @property
    def api(self) -> str:
        """The gateway protocol in use: ``thrift1`` or ``thrift2``."""
        return self.transport.api

    # -- tables ---------------------------------------------------------------
    def _ensure_tables(self, create: bool) -> None:
        existing = self.transport.table_names()
        missing = [t for t, name in self.tables.items() if name not in existing]
        if create:
            for table in missing:  # meta last: its presence marks a complete index
                self.transport.create_table(self.tables[table], table)
        elif "meta" in missing:
            raise IndexNotFound(self.url)
        elif missing:
            raise StoreError(
                f"index {self.url} is incomplete: tables {', '.join(missing)} are missing"
            )

    # -- protocol -------------------------------------------------------------
    def get_meta(self, name: str) -> dict[str, Any] | None:
        rows = self.transport.get_rows(self.tables["meta"], [name.encode()])
        if not rows or _META_COL not in rows[0][1]:
            return None
        return codec.decode_json(rows[0][1][_META_COL])

    def put_meta(self, name: str, value: dict[str, Any]) -> None:
        cells = [(_META_COL, codec.encode_json(value))]
        self.transport.mutate(self.tables["meta"], {name.encode(): cells}, {}, _clock.pair()[1])

    def put_meta_if_absent(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        written = self.transport.put_if_absent(
            self.tables["meta"],
            name.encode(),
            _META_COL,
            codec.encode_json(value),
            _clock.pair()[1],
        )
        held = value if written else self.get_meta(name)
        if held is None:
            raise StoreError(f"meta record {name!r} of {self.url} vanished while being created")
        return held

    def delete_meta(self, name: str) -> None:
        self.transport.mutate(
            self.tables["meta"], {}, {name.encode(): [_META_COL]}, _clock.pair()[0]
        )

    @contextmanager
    def batch(self) -> Iterator[_HBaseBatch]:
        batch = _HBaseBatch(self)
        yield batch
        batch.flush()

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        out: dict[str, Document] = {}
        for start in range(0, len(doc_ids), _GET_ROWS):
            keys = [codec.encode_doc_id(d) for d in doc_ids[start : start + _GET_ROWS]]
            for row in self.transport.get_rows(self.tables["docs"], keys):
                doc = _doc_of(row)
                out[doc.doc_id] = doc
        return out

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[IndexCell]:
        return self.scan_prefixes_many([prefixes])[0]

    def scan_prefixes_many(
        self, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        """All prefixes at once, each scanned once however many lists hold it."""
        unique = sorted({p for prefixes in prefix_lists for p in prefixes})
        index = self.tables["index"]
        rows = dict(self.transport.scan_prefixes(index, unique, row_cap)) if unique else {}
        wanted = set(unique)
        lengths = {len(p) for p in unique}
        by_prefix: dict[bytes, list[IndexCell]] = defaultdict(list)
        for key in sorted(rows):
            cells = _cells_of(key, rows[key])
            for n in lengths:
                if key[:n] in wanted:
                    by_prefix[key[:n]].extend(cells)
        return [[c for p in prefixes for c in by_prefix.get(p, ())] for prefixes in prefix_lists]

    def row_sizes(self, rows: Sequence[bytes]) -> None:
        """HBase counts a row's columns only by reading them: a cut row's count is
        a lower bound."""
        return None

    def _scan_all(self, table: str, keys_only: bool) -> Iterator[Row]:
        # One scanner per page (restarting after the last row), so a slow
        # consumer never holds a scanner past its lease.
        name, start = self.tables[table], b""
        while True:
            rows = self.transport.scan_page(name, start, _SCAN_ROWS, keys_only)
            yield from rows
            if len(rows) < _SCAN_ROWS:
                return
            start = rows[-1][0] + b"\x00"

    def iter_docs(
        self, on_corrupt: Callable[[str, StoreCorrupt], None] | None = None
    ) -> Iterator[Document]:
        for row in self._scan_all("docs", keys_only=False):
            try:
                yield _doc_of(row)
            except StoreCorrupt as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(row[0].decode("utf-8", "surrogateescape"), exc)

    def iter_index(self) -> Iterator[IndexCell]:
        for key, columns in self._scan_all("index", keys_only=True):
            yield from _cells_of(key, columns)

    def stats(self) -> dict[str, Any]:
        docs = sum(1 for _ in self._scan_all("docs", keys_only=True))
        cells = sum(len(cols) for _, cols in self._scan_all("index", keys_only=True))
        return {
            "store": "hbase",
            "url": self.url,
            "api": self.api,
            "tables": {t: n.decode() for t, n in self.tables.items()},
            "documents": docs,
            "index_cells": cells,
            "counted_by": "full keys-only scan (use HBase's RowCounter on big tables)",
        }

    def close(self) -> None:
        transport = getattr(self, "transport", None)
        if transport is not None:
            transport.close()

    def __enter__(self) -> HBaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cells_of(key: bytes, columns: Iterable[bytes]) -> list[IndexCell]:
    """A keys-only index row -> (row key, doc id) cells; qualifiers follow ``d:``."""
    return [(key, name[2:].decode("utf-8")) for name in columns]


def _doc_of(row: Row) -> Document:
    key, columns = row
    return codec.doc_from_columns(key.decode("utf-8"), columns)
