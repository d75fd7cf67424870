"""Apache HBase over Thrift1 (happybase's connection pool, raw Thrift calls).

Round trips are what cost here, so a query's prefix scans run concurrently, one
pooled connection each, and a scanner is closed after its rows are handed back.
Thrift and socket errors become :class:`StoreError`s in :meth:`HBaseStore._call`,
the one place that translates them.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import happybase
import Hbase_thrift
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from .. import codec
from ..errors import (
    IndexNotFound,
    InvalidIndexUrl,
    ShdbError,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
)
from ..records import Document
from . import hbase_tables as schema
from .base import IndexCell

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PORT = 9090
DEFAULT_PREFIX = "shdb"
DEFAULT_POOL = 12
DEFAULT_TIMEOUT_MS = 30_000
_SCAN_ROWS = 1000  # rows per scannerGetList; a prefix rarely holds more than a few
_GET_ROWS = 1000  # rows per getRows call
_FLUSH_CELLS = 20_000  # buffered mutations before a batch flushes
_META_COL = b"m:json"
_KEYS_ONLY = b"KeyOnlyFilter()"  # constant: no filter string is ever built from input
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_DOC_COLUMNS = (codec.COL_FINGERPRINT, codec.COL_TEXT, codec.COL_META)
_RETRYABLE = (TTransportException, socket.error)


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
    unknown = set(query) - {"prefix", "pool", "timeout"}
    if unknown:
        raise InvalidIndexUrl(
            f"index URL {url!r}: unknown parameter {sorted(unknown)[0]!r}; "
            "known: prefix, pool, timeout (ms)"
        )
    try:
        port = parts.port or DEFAULT_PORT
        pool = int(query.get("pool", DEFAULT_POOL))
        timeout = int(query.get("timeout", DEFAULT_TIMEOUT_MS))
    except ValueError as exc:
        raise InvalidIndexUrl(f"index URL {url!r}: {exc}") from None
    prefix = query.get("prefix", DEFAULT_PREFIX)
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
    }


class _HBaseBatch:
    """Buffers mutations; flushes index cells before docs rows (see store.base)."""

    def __init__(self, store: HBaseStore) -> None:
        self._store = store
        self._index_puts: dict[bytes, list[Any]] = defaultdict(list)
        self._index_deletes: dict[bytes, list[Any]] = defaultdict(list)
        self._docs: list[Any] = []
        self._pending = 0

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        return self._store.get_docs(doc_ids)

    def _add(
        self, target: dict[bytes, list[Any]], cells: Iterable[IndexCell], delete: bool
    ) -> None:
        mutation = Hbase_thrift.Mutation
        for row, doc_id in cells:
            column = b"d:" + codec.encode_doc_id(doc_id)
            target[row].append(mutation(isDelete=delete, column=column, value=b""))
            self._pending += 1
        self._maybe_flush()

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        self._add(self._index_puts, cells, delete=False)

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        self._add(self._index_deletes, cells, delete=True)

    def put_docs(self, docs: Iterable[Document]) -> None:
        mutation = Hbase_thrift.Mutation
        for doc in docs:
            cols = codec.doc_to_columns(doc)
            # Columns the new version lacks are deleted, so a row is replaced whole.
            muts = [
                mutation(isDelete=c not in cols, column=c, value=cols.get(c, b""))
                for c in _DOC_COLUMNS
            ]
            self._docs.append(Hbase_thrift.BatchMutation(codec.encode_doc_id(doc.doc_id), muts))
            self._pending += len(muts)
        self._maybe_flush()

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        mutation = Hbase_thrift.Mutation
        for doc_id in doc_ids:
            muts = [mutation(isDelete=True, column=c) for c in _DOC_COLUMNS]
            self._docs.append(Hbase_thrift.BatchMutation(codec.encode_doc_id(doc_id), muts))
            self._pending += len(muts)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self._pending >= _FLUSH_CELLS:
            self.flush()

    def flush(self) -> None:
        deletes_ts, puts_ts = _clock.pair()
        batch = Hbase_thrift.BatchMutation
        store = self._store
        store._mutate(
            store.tables["index"], [batch(r, m) for r, m in self._index_deletes.items()], deletes_ts
        )
        store._mutate(
            store.tables["index"], [batch(r, m) for r, m in self._index_puts.items()], puts_ts
        )
        store._mutate(store.tables["docs"], self._docs, puts_ts)
        self._index_puts.clear()
        self._index_deletes.clear()
        self._docs = []
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
        create: bool = True,
    ) -> None:
        self.host, self.port, self.prefix = host, port, prefix
        self.url = f"hbase://{host}:{port}?prefix={prefix}"
        self.tables = {t: schema.table_name(prefix, t).encode() for t in schema.TABLES}
        with self._translate("connect"):  # the pool opens one connection to test it
            self._pool = happybase.ConnectionPool(pool, host=host, port=port, timeout=timeout)
        self._pool_size = pool
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, pool - 2), thread_name_prefix="shdb-scan"
        )
        try:
            self._ensure_tables(create)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> HBaseStore:
        return cls(**_parse_url(url), create=create)

    # -- the one place Thrift errors are translated ------------------------------
    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        try:
            yield
        except _RETRYABLE as exc:
            raise StoreUnavailable(
                f"HBase at {self.host}:{self.port} is not reachable while trying to {action} "
                f"({exc}; index {self.url})"
            ) from exc
        except Hbase_thrift.IOError as exc:
            raise StoreError(f"HBase failed to {action}: {exc.message}") from exc
        except Hbase_thrift.IllegalArgument as exc:
            raise StoreError(f"HBase rejected {action}: {exc.message}") from exc
        except TException as exc:
            raise StoreError(f"HBase Thrift error while trying to {action}: {exc}") from exc

    def _call(self, action: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn(thrift_client)`` on a pooled connection.

        A connection the server dropped (idle timeout, server restart) fails
        with end-of-file; happybase then replaces it and the call is retried on
        the next one. Every pooled connection may be dead at once, so this goes
        on up to the pool's size; a connection that cannot even be opened ends
        it at once. Every call we make is idempotent (fixed keys, explicit
        timestamps), so a retry never writes twice.
        """
        with self._translate(action):
            for _ in range(self._pool_size):
                try:
                    with self._pool.connection() as conn:
                        return fn(conn.client)
                except _RETRYABLE as exc:
                    if not _is_dropped(exc):
                        raise
                    log.info("retrying %s after a dropped connection: %s", action, exc)
            with self._pool.connection() as conn:
                return fn(conn.client)

    # -- tables ---------------------------------------------------------------
    def _ensure_tables(self, create: bool) -> None:
        existing = set(self._call("list tables", lambda c: c.getTableNames()))
        missing = [t for t, name in self.tables.items() if name not in existing]
        if create:
            for table in missing:  # meta last: its presence marks a complete index
                self._create_table(table)
        elif "meta" in missing:
            raise IndexNotFound(self.url)
        elif missing:
            raise StoreError(
                f"index {self.url} is incomplete: tables {', '.join(missing)} are missing"
            )

    def _create_table(self, table: str) -> None:
        descriptor = Hbase_thrift.ColumnDescriptor(**schema.thrift1_family_options(table))

        def create(client: Any) -> None:
            with suppress(Hbase_thrift.AlreadyExists):  # another process was first: fine
                client.createTable(self.tables[table], [descriptor])

        self._call(f"create table {self.tables[table].decode()}", create)

    def _mutate(self, table: bytes, batch: list[Any], ts: int) -> None:
        if batch:
            self._call(f"write to {table.decode()}", lambda c: c.mutateRowsTs(table, batch, ts, {}))

    # -- protocol -------------------------------------------------------------
    def get_meta(self, name: str) -> dict[str, Any] | None:
        table = self.tables["meta"]
        rows = self._call("read the meta table", lambda c: c.getRow(table, name.encode(), {}))
        if not rows or _META_COL not in rows[0].columns:
            return None
        return codec.decode_json(rows[0].columns[_META_COL].value)

    def put_meta(self, name: str, value: dict[str, Any]) -> None:
        mutation = Hbase_thrift.Mutation(column=_META_COL, value=codec.encode_json(value))
        table = self.tables["meta"]
        self._call(
            "write the meta table", lambda c: c.mutateRow(table, name.encode(), [mutation], {})
        )

    def put_meta_if_absent(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        mutation = Hbase_thrift.Mutation(column=_META_COL, value=codec.encode_json(value))
        table = self.tables["meta"]
        written = self._call(  # checkAndPut without a value: put only if the cell is absent
            "write the meta table",
            lambda c: c.checkAndPut(table, name.encode(), _META_COL, None, mutation, {}),
        )
        held = value if written else self.get_meta(name)
        if held is None:
            raise StoreError(f"meta record {name!r} of {self.url} vanished while being created")
        return held

    def delete_meta(self, name: str) -> None:
        table = self.tables["meta"]
        self._call("write the meta table", lambda c: c.deleteAllRow(table, name.encode(), {}))

    @contextmanager
    def batch(self) -> Iterator[_HBaseBatch]:
        batch = _HBaseBatch(self)
        yield batch
        batch.flush()

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        out: dict[str, Document] = {}
        table = self.tables["docs"]
        for start in range(0, len(doc_ids), _GET_ROWS):
            keys = [codec.encode_doc_id(d) for d in doc_ids[start : start + _GET_ROWS]]

            def get_rows(client: Any, keys: list[bytes] = keys) -> list[Any]:
                return list(client.getRows(table, keys, {}))

            for result in self._call("read documents", get_rows):
                out[result.row.decode("utf-8")] = self._doc_from_result(result)
        return out

    @staticmethod
    def _doc_from_result(result: Any) -> Document:
        cols = {name: cell.value for name, cell in result.columns.items()}
        return codec.doc_from_columns(result.row.decode("utf-8"), cols)

    def _probe(self, prefix: bytes, result: Future[list[IndexCell]]) -> None:
        """One prefix scan; the caller gets the rows before the scanner is closed,
        so a query waits for two round trips (open, fetch), not three."""
        scan = Hbase_thrift.TScan(
            startRow=prefix,
            stopRow=codec.prefix_stop(prefix),
            caching=_SCAN_ROWS,
            filterString=_KEYS_ONLY,
        )

        def run(client: Any) -> None:
            scanner = client.scannerOpenWithScan(self.tables["index"], scan, {})
            try:
                rows = batch = client.scannerGetList(scanner, _SCAN_ROWS)
                while len(batch) == _SCAN_ROWS:  # fewer rows than asked: scan is done
                    batch = client.scannerGetList(scanner, _SCAN_ROWS)
                    rows += batch
                result.set_result(_cells_of(rows))
            finally:
                _close_scanner(client, scanner)

        try:
            self._call("scan the index", run)
        except ShdbError as exc:
            result.set_exception(exc)
        finally:
            if not result.done():  # a bug, not an HBase error: do not leave the caller hanging
                result.set_exception(StoreError(f"scan of {prefix.hex()} failed; see the log"))

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[IndexCell]:
        return self.scan_prefixes_many([prefixes])[0]

    def scan_prefixes_many(self, prefix_lists: Sequence[Sequence[bytes]]) -> list[list[IndexCell]]:
        futures: list[list[Future[list[IndexCell]]]] = [
            [Future() for _ in prefixes] for prefixes in prefix_lists
        ]
        for prefixes, results in zip(prefix_lists, futures):
            for prefix, result in zip(prefixes, results):
                self._executor.submit(self._probe, prefix, result)
        return [[cell for f in results for cell in f.result()] for results in futures]

    def _scan_all(self, table: str, keys_only: bool) -> Iterator[Any]:
        scan = Hbase_thrift.TScan(
            caching=_SCAN_ROWS, filterString=_KEYS_ONLY if keys_only else None
        )
        name = self.tables[table]
        start = b""
        # One scanner per page (restarting after the last row), so a slow
        # consumer never holds a scanner past its lease.
        while True:
            scan.startRow = start

            def page(client: Any) -> list[Any]:
                scanner = client.scannerOpenWithScan(name, scan, {})
                try:
                    return list(client.scannerGetList(scanner, _SCAN_ROWS))
                finally:
                    _close_scanner(client, scanner)

            rows = self._call(f"scan {name.decode()}", page)
            yield from rows
            if len(rows) < _SCAN_ROWS:
                return
            start = rows[-1].row + b"\x00"

    def iter_docs(
        self, on_corrupt: Callable[[str, StoreCorrupt], None] | None = None
    ) -> Iterator[Document]:
        for result in self._scan_all("docs", keys_only=False):
            try:
                yield self._doc_from_result(result)
            except StoreCorrupt as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(result.row.decode("utf-8", "surrogateescape"), exc)

    def iter_index(self) -> Iterator[IndexCell]:
        for result in self._scan_all("index", keys_only=True):
            yield from _cells_of([result])

    def stats(self) -> dict[str, Any]:
        docs = sum(1 for _ in self._scan_all("docs", keys_only=True))
        cells = sum(len(r.columns) for r in self._scan_all("index", keys_only=True))
        return {
            "store": "hbase",
            "url": self.url,
            "tables": {t: n.decode() for t, n in self.tables.items()},
            "documents": docs,
            "index_cells": cells,
            "counted_by": "full keys-only scan (use HBase's RowCounter on big tables)",
        }

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        # happybase's pool has no close(); close each idle connection's socket.
        while not self._pool._queue.empty():
            self._pool._queue.get_nowait().close()

    def __enter__(self) -> HBaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cells_of(rows: Iterable[Any]) -> list[IndexCell]:
    """Keys-only index rows -> (row key, doc id) cells; qualifiers follow ``d:``."""
    return [(r.row, name[2:].decode("utf-8")) for r in rows for name in r.columns]


def _close_scanner(client: Any, scanner: int) -> None:
    """Best effort: a scanner left open expires with its lease on the server."""
    try:
        client.scannerClose(scanner)
    except (*_RETRYABLE, TException) as exc:
        log.info("could not close scanner %s: %s", scanner, exc)


def _is_dropped(exc: BaseException) -> bool:
    """A connection that worked and was cut, as opposed to one that cannot open."""
    if isinstance(exc, TTransportException):
        return exc.type == TTransportException.END_OF_FILE
    return isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError))
