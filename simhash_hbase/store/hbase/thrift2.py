"""The Thrift2 transport: one call per scan, MultiRowRangeFilter, whole-schema tables.

Over Thrift1 every prefix scan costs three calls. Thrift2's
``getScannerResults`` opens, fetches and closes a scanner in one call, and its
``filterBytes`` take a MultiRowRangeFilter (:mod:`.filters`), so the ten
prefix ranges of a query are one scan. One scan visits regions one after the
other, though, so the ranges are grouped by region (region locations cached,
reloaded on a region error) and the groups scanned concurrently; large batches
are also cut into chunks of ``_CHUNK_RANGES`` ranges, several at once.
"Concurrently" takes no thread: one request per connection goes out before the
first reply is read (:meth:`ClientPool.call_many`). ``getScannerResults``
silently stops after ``numRows`` rows: a full page is followed by another from
the row after its last one.

A query's multi-get of bucket rows is one single-row ``get`` where the region
servers run simhash-hbase's observer (``scripts/hbase.d/observer``, docs/hbase.md
"Multi-row reads"): the gateway's HBase client sends a one-row get straight to
the region server, a multi-row one through its thread pool (~0.1 ms more). The
get names the rows in an attribute; a reply without the observer's marker means
there is none, and the transport falls back to ``getMultiple`` for good.

The interface is our own minimal IDL, ``thrift2.thrift``.
"""

from __future__ import annotations

import bisect
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any, NamedTuple, TypeVar

import thriftpy2
from thriftpy2.thrift import TApplicationException, TClient

from simhash_hbase.errors import StoreError
from simhash_hbase.layout import codec
from simhash_hbase.store.hbase import filters as hbase_filters
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.connect import Gateways, open_protocol
from simhash_hbase.store.hbase.filters import RowRange
from simhash_hbase.store.hbase.settings import Gateway, Wire
from simhash_hbase.store.hbase.transport import (
    CHECK_AND_PUT_WIDTH,
    CheckAndPut,
    ClientPool,
    Deletes,
    Page,
    Puts,
    Row,
    first_line,
    translate,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_IDL = thriftpy2.load(
    str(resources.files(__package__).joinpath("thrift2.thrift")),
    module_name="shdb_hbase2_thrift",
)
_PAGE_ROWS = 1000  # rows per getScannerResults page
_CHUNK_RANGES = 1000  # row ranges per MultiRowRangeFilter scan
_CHUNK_GETS = 1000  # gets per getMultiple of a bucket-layout lookup
_REGIONS_TTL_S = 300.0  # region locations are reloaded at least this often
_LOCATE_PAUSES_S = (0.2, 0.5, 1.0, 2.0, 4.0)  # between tries to locate regions in transition
_KEYS_ONLY = hbase_filters.key_only()
_OBSERVER_ATTRIBUTE = b"shdb.rows"  # MultiRowGetObserver.ATTRIBUTE
_OBSERVER_VERSION = b"\x01"
_OBSERVER_MARKER = b"\x00shdb-multiget-v1"


class Client(TClient):
    """A THBaseService client whose calls can also be split in two, ``send`` now and
    ``receive`` later, so one thread keeps calls in flight on several connections."""

    def send(self, api: str, **arguments: Any) -> None:
        self._send(api, **arguments)

    def receive(self, api: str) -> Any:
        return self._recv(api)


def open_client(host: str, port: int, timeout: int) -> Client:
    """A client of one gateway on HBase's default wire, for tools and tests that
    talk to a gateway directly (the store's go through :class:`Gateways`)."""
    return Client(_IDL.THBaseService, open_protocol(Gateway(host, port), Wire(), timeout, None))


def gateway_api(gateways: Gateways) -> str:
    """``"thrift1"`` or ``"thrift2"``: what the gateways serve (the first that answers).

    ``getThriftServerType`` has the same name and no arguments in both
    services, so it can be asked before the protocol is known. Gateways older
    than HBase 2.2 do not know it; those are Thrift1 servers.
    """
    with _translate(gateways.where, "connect"):
        _, protocol = gateways.connect()
        client = Client(_IDL.THBaseService, protocol)
        try:
            kind = client.getThriftServerType()
        except TApplicationException as exc:
            if exc.type != TApplicationException.UNKNOWN_METHOD:
                raise
            return "thrift1"
        finally:
            client.close()
    return "thrift2" if kind == _IDL.TThriftServerType.TWO else "thrift1"


# -- the one place Thrift2 errors are translated ------------------------------------
def _translate(where: str, action: str) -> AbstractContextManager[None]:
    return translate(where, "thrift2", action, (_IDL.TIOError,), (_IDL.TIllegalArgument,))


class Thrift2Transport:
    api = "thrift2"

    def __init__(self, gateways: Gateways, *, pool: int, retries: int) -> None:
        self._where = gateways.where

        def make_client(protocol: Any) -> Client:
            return Client(_IDL.THBaseService, protocol)

        self._pool: ClientPool[Client] = ClientPool(gateways, make_client, pool, retries)
        self._cas_pool: ClientPool[Client] = ClientPool(
            gateways, make_client, CHECK_AND_PUT_WIDTH, retries
        )
        self._regions: dict[bytes, tuple[float, _Regions]] = {}
        self._regions_lock = threading.Lock()
        #: Whether the region servers run the multi-row read observer: None until
        #: the first query tells, False to read by ``getMultiple`` only.
        self.observer: bool | None = None

    def _call(self, action: str, fn: Callable[[Client], T]) -> T:
        with _translate(self._where, action):
            return self._pool.call(action, fn)

    # -- tables ---------------------------------------------------------------
    def table_names(self) -> set[bytes]:
        names = self._call("list tables", lambda c: c.getTableNamesByPattern(None, False))
        return {
            n.qualifier if n.ns in (None, b"", b"default") else n.ns + b":" + n.qualifier
            for n in names
        }

    def create_namespace(self, name: str) -> None:
        def create(client: Any) -> None:
            try:
                client.createNamespace(_IDL.TNamespaceDescriptor(name=name))
            except _IDL.TIOError as exc:
                if "NamespaceExistException" not in (exc.message or ""):
                    raise  # it exists (another process was first): fine

        self._call(f"create namespace {name}", create)

    def create_table(
        self, name: bytes, table: str, splits: Sequence[bytes], ttl: int | None = None
    ) -> None:
        descriptor = table_descriptor(name, table, ttl)

        def create(client: Any) -> None:
            try:
                client.createTable(descriptor, list(splits) or None)
            except _IDL.TIOError as exc:
                if "TableExistsException" not in (exc.message or ""):
                    raise  # another process was first: fine, anything else is not

        self._call(f"create table {name.decode()}", create)

    # -- point reads and writes ---------------------------------------------------
    def get_rows(
        self, table: bytes, keys: Sequence[bytes], columns: Sequence[bytes] = ()
    ) -> list[Row]:
        wanted = [_IDL.TColumn(*_split(c)) for c in columns] or None
        gets = [_IDL.TGet(row=key, columns=wanted) for key in keys]
        results = self._call(f"read {table.decode()}", lambda c: c.getMultiple(table, gets))
        return [_row(r) for r in results if r.row is not None]

    def get_row_pages(
        self, table: bytes, starts: Sequence[tuple[bytes, bytes]], columns: int
    ) -> list[Page]:
        """``storeLimit`` cuts each row on the region server; a ColumnRangeFilter
        starts a row's later pages at the qualifier given. A query's rows go to the
        observer where there is one (:meth:`_observed_pages`); a batch lookup's
        thousands of rows go in chunks of ``_CHUNK_GETS``, several at once."""
        action = f"read {table.decode()}"
        if len(starts) <= _CHUNK_GETS:  # a query: one call, nothing to pipeline
            pages: list[Page] = []
            if self.observer is not False and _observable(starts):
                observed = self._observed_pages(table, starts, columns, action)
                if observed is not None:
                    pages, missing = observed
                    if not missing:
                        return pages
                    starts = [starts[i] for i in missing]  # read by getMultiple
            gets = _page_gets(starts, columns)
            return pages + _pages(self._call(action, lambda c: c.getMultiple(table, gets)))
        gets = _page_gets(starts, columns)
        chunks = [gets[i : i + _CHUNK_GETS] for i in range(0, len(gets), _CHUNK_GETS)]

        def send(client: Client, chunk: list[Any]) -> None:
            client.send("getMultiple", table=table, tgets=chunk)

        def receive(client: Client, chunk: list[Any]) -> tuple[list[Page], None]:
            return _pages(client.receive("getMultiple")), None

        with _translate(self._where, action):
            read = self._pool.call_many(action, chunks, send, receive)
        return [row for rows in read for row in rows]

    def _observed_pages(
        self, table: bytes, starts: Sequence[tuple[bytes, bytes]], columns: int, action: str
    ) -> tuple[list[Page], list[int]] | None:
        """:meth:`get_row_pages` through the observer: one get per region server
        holding some of the rows (all at once), anchored at its first row. The pages
        read, and the indexes in ``starts`` of rows no observer read (their region
        moved); None if a reply has no observer's marker (:attr:`observer` then
        turns False)."""
        with _translate(self._where, action):
            regions = self._regions_of(table, reload=False)
            by_server: dict[Any, list[int]] = {}
            for i, (key, _) in enumerate(starts):
                by_server.setdefault(regions.server_of(key), []).append(i)
            if len(by_server) == 1:  # standalone, or a query's rows on one server
                (job,) = by_server.values()
                tget = _observer_get(starts, job, columns)
                answers = [
                    self._pool.call(action, lambda c: _observed(c.get(table, tget), starts, job))
                ]
            else:

                def send(client: Client, job: list[int]) -> None:
                    client.send("get", table=table, tget=_observer_get(starts, job, columns))

                def receive(client: Client, job: list[int]) -> tuple[Any, None]:
                    return _observed(client.receive("get"), starts, job), None

                answers = self._pool.call_many(action, list(by_server.values()), send, receive)
        found = [answer for answer in answers if answer is not None]
        if len(found) < len(answers):
            log.info(
                "%s: no multi-row read observer on the region servers; reading by getMultiple",
                self._where,
            )
            self.observer = False
            return None
        self.observer = True
        if len(found) == 1:
            pages, missing = found[0]
        else:
            pages = [page for answer in found for page in answer[0]]
            missing = [i for answer in found for i in answer[1]]
        if missing:  # a region moved: its rows are read by getMultiple, locations reloaded
            with self._regions_lock:
                self._regions[table] = (-_REGIONS_TTL_S, regions)  # stale: kept as a fallback
        return pages, missing

    def mutate(self, table: bytes, puts: Puts, deletes: Deletes, ts: int) -> None:
        """Deletes, then puts, both at ``ts``, on every cell explicitly: a TDelete
        naming columns takes each column's own timestamp, not the delete's."""
        if deletes:
            tdeletes = [
                _IDL.TDelete(
                    row=key,
                    columns=[_IDL.TColumn(*_split(c), timestamp=ts) for c in columns],
                    timestamp=ts,
                    deleteType=_IDL.TDeleteType.DELETE_COLUMNS,
                )
                for key, columns in deletes.items()
            ]
            failed = self._call(
                f"delete from {table.decode()}", lambda c: c.deleteMultiple(table, tdeletes)
            )
            if failed:
                raise StoreError(f"{self._where}: {len(failed)} deletes in {table!r} failed")
        if puts:
            tputs = [
                _IDL.TPut(
                    row=key,
                    columnValues=[_IDL.TColumnValue(*_split(c), v, timestamp=ts) for c, v in cells],
                    timestamp=ts,
                )
                for key, cells in puts.items()
            ]
            self._call(f"write to {table.decode()}", lambda c: c.putMultiple(table, tputs))

    def check_and_put(
        self, table: bytes, column: bytes, items: Sequence[CheckAndPut]
    ) -> list[bool]:
        """One checkAndPut per item, ``CHECK_AND_PUT_WIDTH`` in flight at once (no
        timestamp: the server stamps the cell, as Thrift1's checkAndPut does)."""
        family, qualifier = _split(column)

        def send(client: Client, item: CheckAndPut) -> None:
            key, expected, value = item
            put = _IDL.TPut(row=key, columnValues=[_IDL.TColumnValue(family, qualifier, value)])
            client.send(
                "checkAndPut",
                table=table,
                row=key,
                family=family,
                qualifier=qualifier,
                value=expected,
                tput=put,
            )

        def receive(client: Client, item: CheckAndPut) -> tuple[bool, None]:
            return bool(client.receive("checkAndPut")), None

        action = f"write to {table.decode()}"
        with _translate(self._where, action):
            return self._cas_pool.call_many(action, items, send, receive)

    # -- scans ----------------------------------------------------------------
    def scan_prefixes(
        self, table: bytes, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> list[Row]:
        self._pool.check_open("scan the index")
        ranges = _merged([(p, codec.prefix_stop(p)) for p in prefixes])
        if not ranges:
            return []
        with _translate(self._where, "scan the index"):
            try:
                return self._scan_grouped(table, ranges, row_cap, reload=False)
            except _IDL.TIOError as exc:
                log.info("scan failed (%s); reloading region locations", first_line(exc))
                return self._scan_grouped(table, ranges, row_cap, reload=True)

    def _scan_grouped(
        self, table: bytes, ranges: list[RowRange], row_cap: int | None, reload: bool
    ) -> list[Row]:
        starts = self._region_starts(table, reload)
        groups: dict[int, list[RowRange]] = {}
        for row_range in ranges:
            groups.setdefault(bisect.bisect_right(starts, row_range[0]) - 1, []).append(row_range)
        pages = [
            _Page.first(group[i : i + _CHUNK_RANGES], row_cap)
            for group in groups.values()
            for i in range(0, len(group), _CHUNK_RANGES)
        ]

        def send(client: Client, page: _Page) -> None:
            scan = _IDL.TScan(
                startRow=page.start, stopRow=page.stop, caching=_PAGE_ROWS, filterBytes=page.filter
            )
            client.send("getScannerResults", table=table, tscan=scan, numRows=_PAGE_ROWS)

        def receive(client: Client, page: _Page) -> tuple[list[Row], _Page | None]:
            results = client.receive("getScannerResults")
            # getScannerResults stops silently at numRows: a full page has a sequel.
            sequel = None
            if len(results) == _PAGE_ROWS:
                sequel = page._replace(start=results[-1].row + b"\x00")
            return [_row(r) for r in results], sequel

        scanned = self._pool.call_many("scan the index", pages, send, receive)
        return [row for rows in scanned for row in rows]

    def _region_starts(self, table: bytes, reload: bool) -> list[bytes]:
        """Start keys of ``table``'s regions, sorted (the first is ``b""``)."""
        return self._regions_of(table, reload).starts

    def _regions_of(self, table: bytes, reload: bool) -> _Regions:
        """``table``'s regions (cached for ``_REGIONS_TTL_S``). They only group a read's
        rows by region and server (the gateway's HBase client routes each row itself), so
        when the gateway cannot list them the last ones known still serve."""
        with self._regions_lock:
            cached = self._regions.get(table)
            if cached and not reload and time.monotonic() - cached[0] < _REGIONS_TTL_S:
                return cached[1]
        for pause in (*_LOCATE_PAUSES_S, None):
            try:
                locations = self._pool.call(
                    "locate regions", lambda c: c.getAllRegionLocations(table)
                )
                break
            except TApplicationException as exc:
                # HBase 2.6.1's Thrift2 gateway fails the whole call (a NullPointerException)
                # while a region of the table has no server: in transition (split, moved,
                # its server failing over), for a second or so (tests/test_cluster.py).
                if cached is not None or pause is None:
                    log.info("%s: cannot locate regions (%s)", self._where, first_line(exc))
                    if cached is None:
                        raise
                    return cached[1]
                time.sleep(pause)
        regions = _Regions.of(locations)
        with self._regions_lock:
            self._regions[table] = (time.monotonic(), regions)
        return regions

    def region_starts(self, table: bytes) -> list[bytes]:
        return self._region_starts(table, reload=True)

    def scan_page(
        self, table: bytes, start: bytes, rows: int, keys_only: bool, stop: bytes = b""
    ) -> list[Row]:
        scan = _IDL.TScan(
            startRow=start,
            stopRow=stop or None,
            caching=rows,
            filterBytes=_KEYS_ONLY if keys_only else None,
        )
        results = self._call(
            f"scan {table.decode()}", lambda c: c.getScannerResults(table, scan, rows)
        )
        return [_row(r) for r in results]

    def close(self) -> None:
        self._pool.close()
        self._cas_pool.close()


class _Regions(NamedTuple):
    """A table's regions: start keys, sorted (the first is ``b""``), and the region
    server of each (None where unknown)."""

    starts: list[bytes]
    servers: list[tuple[str, int] | None]

    @staticmethod
    def of(locations: Sequence[Any]) -> _Regions:
        by_start: dict[bytes, tuple[str, int] | None] = {b"": None}
        for loc in locations:
            by_start[loc.regionInfo.startKey or b""] = (
                loc.serverName.hostName,
                loc.serverName.port or 0,
            )
        starts = sorted(by_start)
        return _Regions(starts, [by_start[start] for start in starts])

    def server_of(self, key: bytes) -> tuple[str, int] | None:
        return self.servers[bisect.bisect_right(self.starts, key) - 1]


def _observable(starts: Sequence[tuple[bytes, bytes]]) -> bool:
    """Whether the observer's request can name these rows (u8 key, u16 qualifier)."""
    return all(len(key) < 0x100 and len(start) < 0x10000 for key, start in starts)


def _page_gets(starts: Sequence[tuple[bytes, bytes]], columns: int) -> list[Any]:
    """The TGets of :meth:`Thrift2Transport.get_row_pages`' rows, for ``getMultiple``."""
    return [
        _IDL.TGet(
            row=key,
            storeLimit=columns,
            filterBytes=hbase_filters.column_range_from(start) if start else None,
        )
        for key, start in starts
    ]


def _observer_get(starts: Sequence[tuple[bytes, bytes]], job: list[int], columns: int) -> Any:
    """The one get that asks the observer for rows ``job`` of ``starts``, each a page of
    ``columns`` from its qualifier (the request format: docs/SPEC.md)."""
    request = bytearray(_OBSERVER_VERSION)
    request += columns.to_bytes(4, "big")
    for i in job:
        key, start = starts[i]
        request.append(len(key))
        request += key
        request += len(start).to_bytes(2, "big")
        request += start
    return _IDL.TGet(row=starts[job[0]][0], attributes={_OBSERVER_ATTRIBUTE: bytes(request)})


def _observed(
    result: Any, starts: Sequence[tuple[bytes, bytes]], job: list[int]
) -> tuple[list[Page], list[int]] | None:
    """The observer's reply to :func:`_observer_get`: the pages of rows ``job`` (rows
    with no cells left out) and the indexes in ``starts`` of those it did not read;
    None without its marker (no observer: the anchor row's own cells came back)."""
    values = result.columnValues
    if not values or values[0].qualifier != _OBSERVER_MARKER:
        return None
    unread = values[0].value
    missing = [job[int.from_bytes(unread[i : i + 2], "big")] for i in range(0, len(unread), 2)]
    pages: list[Page] = []
    last = -1
    qualifiers: list[bytes] = []
    for value in values[1:]:
        qualifier = value.qualifier
        at = qualifier[0] << 8 | qualifier[1]
        if at != last:
            last, qualifiers = at, []
            pages.append((starts[job[at]][0], qualifiers))
        qualifiers.append(qualifier[2:])
    return pages, missing


class _Page(NamedTuple):
    """One getScannerResults call: a MultiRowRangeFilter scan from ``start``."""

    start: bytes
    stop: bytes
    filter: bytes | None

    @staticmethod
    def first(ranges: list[RowRange], row_cap: int | None = None) -> _Page:
        """Index values are empty: no KeyOnlyFilter (see hbase_filters.filter_list).
        One range is the scan's own start and stop: no MultiRowRangeFilter, nor the
        FilterList around it (each costs the region server work per cell)."""
        cap = None if row_cap is None else _column_cap(row_cap)
        if len(ranges) == 1:
            return _Page(ranges[0][0], ranges[0][1], cap)
        rows = hbase_filters.multi_row_range(ranges)
        if cap is not None:  # a hot row sends its first row_cap columns, not 100,000
            rows = hbase_filters.filter_list([rows, cap])
        return _Page(ranges[0][0], ranges[-1][1], rows)


@functools.lru_cache(maxsize=64)
def _column_cap(row_cap: int) -> bytes:
    """The ColumnPaginationFilter of a row cap (a query's limit: a handful of values)."""
    return hbase_filters.column_pagination(row_cap)


def _merged(ranges: list[RowRange]) -> list[RowRange]:
    """Sorted, disjoint ranges covering ``ranges`` (MultiRowRangeFilter wants them so)."""
    out: list[RowRange] = []
    for start, stop in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


def _split(column: bytes) -> tuple[bytes, bytes]:
    family, _, qualifier = column.partition(b":")
    return family, qualifier


def _row(result: Any) -> Row:
    return result.row, {cv.family + b":" + cv.qualifier: cv.value for cv in result.columnValues}


def _pages(results: list[Any]) -> list[Page]:
    """The rows found among ``results`` as pages: a query's hot path, so no
    ``family:qualifier`` key or dict per cell (a wide row has one family)."""
    return [(r.row, [cv.qualifier for cv in r.columnValues]) for r in results if r.row is not None]


def table_descriptor(name: bytes, table: str, ttl: int | None = None) -> Any:
    """The TTableDescriptor of schema table ``table`` (index, docs, meta), named ``name``
    (``NS:NAME`` in a namespace); ``ttl``: see :func:`~.tables.family_spec`."""
    family, attributes = hbase_tables.family_spec(table, ttl)
    namespace, _, qualifier = name.rpartition(b":")
    return _IDL.TTableDescriptor(
        tableName=_IDL.TTableName(ns=namespace or None, qualifier=qualifier),
        columns=[_family_descriptor(family, attributes)],
    )


def _family_descriptor(family: str, attributes: dict[str, Any]) -> Any:
    """A TColumnFamilyDescriptor from the schema's shell-style attributes."""
    fields: dict[str, Any] = {"name": family.encode()}
    for key, value in attributes.items():
        if key == "VERSIONS":
            fields["maxVersions"] = int(value)
        elif key == "DATA_BLOCK_ENCODING":
            fields["dataBlockEncoding"] = getattr(_IDL.TDataBlockEncoding, value)
        elif key == "BLOOMFILTER":
            fields["bloomnFilterType"] = getattr(_IDL.TBloomFilterType, value)
        elif key == "COMPRESSION":
            fields["compressionType"] = getattr(_IDL.TCompressionAlgorithm, value)
        elif key == "BLOCKCACHE":
            fields["blockCacheEnabled"] = bool(value)
        elif key == "BLOCKSIZE":
            fields["blockSize"] = int(value)
        elif key == "IN_MEMORY":
            fields["inMemory"] = bool(value)
        elif key == "CACHE_DATA_ON_WRITE":
            fields["cacheDataOnWrite"] = bool(value)
        elif key == "TTL":
            fields["timeToLive"] = int(value)
        elif key == "CONFIGURATION":
            fields["configuration"] = {str(k): str(v) for k, v in value.items()}
        else:
            raise ValueError(f"hbase-tables.json: attribute {key} has no Thrift2 equivalent")
    return _IDL.TColumnFamilyDescriptor(**fields)
