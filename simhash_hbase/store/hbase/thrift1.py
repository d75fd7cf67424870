"""The Thrift1 transport: HBase's original gateway, the one happybase speaks.

Kept for clusters whose gateway serves only Thrift1. Its interface is
happybase's own IDL file, loaded here under our own module name. Thrift1 has
no one-call scan and no MultiRowRangeFilter, so each prefix is a scan of its
own (open, fetch, close): the scans of a query run concurrently on pooled
connections, and rows are handed back before the scanner is closed, so a
query waits for two round trips, not three.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any, TypeVar

import thriftpy2
from thriftpy2.thrift import TClient, TException

from simhash_hbase.errors import ShdbError, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.connect import Gateways
from simhash_hbase.store.hbase.transport import (
    CHECK_AND_PUT_WIDTH,
    NETWORK_ERRORS,
    CheckAndPut,
    ClientPool,
    Deletes,
    Page,
    Puts,
    Row,
    translate,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_IDL = thriftpy2.load(
    str(resources.files("happybase").joinpath("Hbase.thrift")), module_name="shdb_hbase1_thrift"
)
_KEYS_ONLY = b"KeyOnlyFilter()"  # constant: no filter string is ever built from input
_SCAN_ROWS = 1000  # rows per scannerGetList; a prefix rarely holds more than a few


class Thrift1Transport:
    api = "thrift1"

    def __init__(self, gateways: Gateways, *, pool: int, retries: int) -> None:
        self._where = gateways.where  # "HBase at host:port", for messages

        def make_client(protocol: Any) -> Any:
            return TClient(_IDL.Hbase, protocol)

        self._pool: ClientPool[Any] = ClientPool(gateways, make_client, pool, retries)
        self._executor = ThreadPoolExecutor(max_workers=pool, thread_name_prefix="shdb-t1")
        self._cas_pool: ClientPool[Any] = ClientPool(
            gateways, make_client, CHECK_AND_PUT_WIDTH, retries
        )
        self._cas_executor = ThreadPoolExecutor(CHECK_AND_PUT_WIDTH, thread_name_prefix="shdb-cas")

    # -- the one place Thrift1 errors are translated -------------------------------
    def _translate(self, action: str) -> AbstractContextManager[None]:
        return translate(self._where, self.api, action, (_IDL.IOError,), (_IDL.IllegalArgument,))

    def _call(self, action: str, fn: Callable[[Any], T]) -> T:
        with self._translate(action):
            return self._pool.call(action, fn)

    # -- Transport -----------------------------------------------------------
    def table_names(self) -> set[bytes]:
        return set(self._call("list tables", lambda c: c.getTableNames()))

    def create_namespace(self, name: str) -> None:
        """Thrift1 has no namespace calls: creating a table in a namespace that does
        not exist fails, and the store says to create it in the hbase shell."""

    def create_table(
        self, name: bytes, table: str, splits: Sequence[bytes], ttl: int | None = None
    ) -> None:
        """Thrift1 cannot split a new table: ``splits`` are left to `shdb schema`'s script."""
        descriptor = _IDL.ColumnDescriptor(**hbase_tables.thrift1_family_options(table, ttl))

        def create(client: Any) -> None:
            try:
                client.createTable(name, [descriptor])
            except _IDL.AlreadyExists:  # another process was first: fine
                pass
            except _IDL.IOError as exc:  # ... and the master saw it first (a race)
                if "TableExistsException" not in (exc.message or ""):
                    raise

        self._call(f"create table {name.decode()}", create)

    def get_rows(
        self, table: bytes, keys: Sequence[bytes], columns: Sequence[bytes] = ()
    ) -> list[Row]:
        def read(c: Any) -> Any:
            if columns:
                return c.getRowsWithColumns(table, list(keys), list(columns), {})
            return c.getRows(table, list(keys), {})

        results = self._call(f"read {table.decode()}", read)
        return [_row(r) for r in results if r.columns]

    def get_row_pages(
        self, table: bytes, starts: Sequence[tuple[bytes, bytes]], columns: int
    ) -> list[Page]:
        """Thrift1's gets take neither a cell limit nor a filter: a wide row could
        only be read whole, so the bucket layout is not served here."""
        raise StoreError(f"{self._where}: an index of the bucket layout is read over Thrift2 only")

    def mutate(self, table: bytes, puts: Puts, deletes: Deletes, ts: int) -> None:
        mutation = _IDL.Mutation
        rows: dict[bytes, list[Any]] = {}
        for key, columns in deletes.items():
            rows[key] = [mutation(isDelete=True, column=c) for c in columns]
        for key, cells in puts.items():
            muts = [mutation(isDelete=False, column=c, value=v) for c, v in cells]
            rows.setdefault(key, []).extend(muts)
        if rows:
            batch = [_IDL.BatchMutation(key, muts) for key, muts in rows.items()]
            self._call(f"write to {table.decode()}", lambda c: c.mutateRowsTs(table, batch, ts, {}))

    def check_and_put(
        self, table: bytes, column: bytes, items: Sequence[CheckAndPut]
    ) -> list[bool]:
        """One checkAndPut per item, ``CHECK_AND_PUT_WIDTH`` at once. Thrift1's
        checkAndPut takes no timestamp (the server's clock stamps the cell)."""
        action = f"write to {table.decode()}"

        def one(item: CheckAndPut) -> bool:
            key, expected, value = item
            mutation = _IDL.Mutation(column=column, value=value)
            with self._translate(action):
                return bool(
                    self._cas_pool.call(
                        action, lambda c: c.checkAndPut(table, key, column, expected, mutation, {})
                    )
                )

        if len(items) == 1:  # no thread hop for one
            return [one(items[0])]
        return list(self._cas_executor.map(one, items))

    def scan_prefixes(
        self, table: bytes, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> list[Row]:
        self._pool.check_open("scan the index")
        futures: list[Future[list[Row]]] = [Future() for _ in prefixes]
        filter_string = _KEYS_ONLY
        if row_cap is not None:  # an int: the string is built from no input
            filter_string += b" AND ColumnPaginationFilter(%d, 0)" % int(row_cap)
        for prefix, result in zip(prefixes, futures):
            self._executor.submit(self._probe, table, prefix, filter_string, result)
        return [row for f in futures for row in f.result()]

    def _probe(
        self, table: bytes, prefix: bytes, filter_string: bytes, result: Future[list[Row]]
    ) -> None:
        """One prefix scan; ``result`` is set before the scanner is closed."""
        scan = _IDL.TScan(
            startRow=prefix,
            stopRow=codec.prefix_stop(prefix),
            caching=_SCAN_ROWS,
            filterString=filter_string,
        )

        def run(client: Any) -> None:
            scanner = client.scannerOpenWithScan(table, scan, {})
            try:
                rows = batch = client.scannerGetList(scanner, _SCAN_ROWS)
                while len(batch) == _SCAN_ROWS:  # fewer rows than asked: scan is done
                    batch = client.scannerGetList(scanner, _SCAN_ROWS)
                    rows += batch
                result.set_result([_row(r) for r in rows])
            finally:
                _close_scanner(client, scanner)

        try:
            self._call("scan the index", run)
        except ShdbError as exc:
            result.set_exception(exc)
        finally:
            if not result.done():  # a bug, not an HBase error: do not leave the caller hanging
                result.set_exception(StoreError(f"scan of {prefix.hex()} failed; see the log"))

    def region_starts(self, table: bytes) -> list[bytes]:
        regions = self._call("locate regions", lambda c: c.getTableRegions(table))
        return sorted(r.startKey or b"" for r in regions)

    def scan_page(
        self, table: bytes, start: bytes, rows: int, keys_only: bool, stop: bytes = b""
    ) -> list[Row]:
        scan = _IDL.TScan(
            startRow=start,
            stopRow=stop or None,
            caching=rows,
            filterString=_KEYS_ONLY if keys_only else None,
        )

        def page(client: Any) -> list[Row]:
            scanner = client.scannerOpenWithScan(table, scan, {})
            try:
                return [_row(r) for r in client.scannerGetList(scanner, rows)]
            finally:
                _close_scanner(client, scanner)

        return self._call(f"scan {table.decode()}", page)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._cas_executor.shutdown(wait=True)
        self._pool.close()
        self._cas_pool.close()


def _row(result: Any) -> Row:
    return result.row, {name: cell.value for name, cell in result.columns.items()}


def _close_scanner(client: Any, scanner: int) -> None:
    """Best effort: a scanner left open expires with its lease on the server."""
    try:
        client.scannerClose(scanner)
    except (*NETWORK_ERRORS, TException) as exc:
        log.info("could not close scanner %s: %s", scanner, exc)
