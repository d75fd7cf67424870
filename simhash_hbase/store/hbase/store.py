"""Apache HBase through its Thrift gateway: Thrift2 by preference, Thrift1 where that is all.

One :class:`HBaseStore` holds what must not differ between the protocols:
table names, timestamps, the write order, rows to documents and cells. A
transport (``thrift1`` or ``thrift2``, behind the small
:class:`~.transport.Transport` interface) makes the calls and
translates its errors into :class:`StoreError`s. The protocol is asked of the
gateway when the store opens, or forced with ``?api=thrift1|thrift2``.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from simhash_hbase.errors import (
    IndexNotFound,
    InvalidIndexUrl,
    InvalidInput,
    StoreCorrupt,
    StoreError,
)
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import (
    WHOLE,
    CellBlock,
    CellsOf,
    IndexCell,
    KeyRange,
    Section,
    oldest_before,
)
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.clock import CLOCK
from simhash_hbase.store.hbase.connect import Gateways
from simhash_hbase.store.hbase.create import create_tables
from simhash_hbase.store.hbase.metrics import GATEWAY_STATS
from simhash_hbase.store.hbase.owners import INTENT_AT, NONCE_BYTES, owner_token, unfinished
from simhash_hbase.store.hbase.settings import (
    BUCKETS,
    DEFAULT_POOL,
    DEFAULT_PREFIX,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_MS,
    PLAIN,
    ROWS,
    Gateway,
    Wire,
    layout_of,
    parse_url,
)
from simhash_hbase.store.hbase.thrift1 import Thrift1Transport
from simhash_hbase.store.hbase.thrift2 import Thrift2Transport, gateway_api
from simhash_hbase.store.hbase.transport import Page, Row, Transport, first_contact
from simhash_hbase.store.lock import LEASE_MS, LeaseLock, LeaseSection, RunLocks

#: The manifest entries of a bucket-layout index: format 2 (versions that know only
#: format 1 refuse it, rather than write 13-byte rows into it).
log = logging.getLogger(__name__)
_BUCKET_MANIFEST = {"format_version": 2, "hbase_index": BUCKETS}
#: Said before a new index is created in the rows layout because the port is a
#: Thrift1 gateway's: the index keeps its layout for good (docs/hbase.md).
SLOW_LAYOUT = (
    "WARNING: creating %s over a Thrift1 gateway, so in the rows layout, which the index "
    "keeps for good; over Thrift2 (hbase://HOST:9091, the default port) a new index gets "
    "the bucket layout, several times faster to look up. Add &layout=rows to choose rows "
    "on purpose"
)
_BUCKET_PAGE = 1000  # columns of a bucket row per read
#: ... with a row cap (a bounded query): enough for an ordinary bucket in one page
#: (5x10 holds ~0.01-0.2 cells a bucket at 1 M, 4x4 ~15), while a bucket of 100,000
#: copies sends this many, not 1,000, before the skip to the next fingerprint.
_CAPPED_PAGE = 32
#: Buckets remembered as holding a fingerprint of ``row_cap`` ids or more, with
#: where the page past it starts: a plan, never an answer (stale, it costs a page).
_HOT_BUCKETS = 4096
_SCAN_ROWS = 1000  # rows per page of a full-table scan
_GET_ROWS = 1000  # rows per multi-get
_FLUSH_CELLS = 20_000  # buffered mutations before a batch flushes
_META_COL = b"m:json"
_DOC_COLUMNS = (
    codec.COL_FINGERPRINT,
    codec.COL_TEXT,
    codec.COL_META,
    codec.COL_SKETCH,
    codec.COL_BANDS,
    codec.COL_CLUSTER,
    codec.COL_TIME,
)
_INDEX_FAMILY = b"d:"
_OWNER = codec.COL_OWNER
_CLAIM_TRIES = 64  # rounds of claims lost to other writers before a batch gives up


class _HBaseBatch:
    """Buffers mutations; flushes index cells before docs rows (see store.base).

    The docs rows it writes it owns first (:meth:`claim_docs`), and every flush of
    the batch uses one timestamp pair, above that of every owner token it saw.
    """

    def __init__(self, store: HBaseStore) -> None:
        self._store = store
        self._buckets = store.layout == BUCKETS
        self._index_puts: dict[bytes, list[tuple[bytes, bytes]]] = defaultdict(list)
        self._index_deletes: dict[bytes, list[bytes]] = defaultdict(list)
        self._doc_puts: dict[bytes, list[tuple[bytes, bytes]]] = {}
        self._doc_deletes: dict[bytes, list[bytes]] = {}
        self._pending = 0
        self._stamps: tuple[int, int] | None = None  # (deletes, puts) of every flush
        self._nonce = os.urandom(NONCE_BYTES)
        self._flushed = False
        # Rows no writer had ever claimed, read empty: no columns to delete from them
        # (a later claimant writes above this batch anyway).
        self._fresh: set[bytes] = set()

    def stamps(self) -> tuple[int, int]:
        if self._stamps is None:
            self._stamps = CLOCK.pair()
        return self._stamps

    def claim_docs(
        self, intents: Mapping[str, Document | None], cells_of: CellsOf
    ) -> dict[str, Document]:
        """Own the docs rows of ``intents``' ids: a pipelined checkAndPut of each row's
        owner token, from the one read to one naming this batch and the version it writes
        (None: a removal, of ids holding a document only); a row claimed meanwhile by
        another writer is read and claimed again. The cells of the versions named by the
        tokens replaced (writers that may not have finished) are deleted here."""
        if self._pending or self._flushed:
            raise StoreError("docs rows must be claimed before the batch writes anything")
        ids = {codec.encode_doc_id(i): i for i in intents}
        unread = set(ids)
        held: dict[bytes, Document | None] = {}
        mine: dict[bytes, bytes] = {}  # key -> the token this batch holds on it
        replaced: list[tuple[str, bytes]] = []  # (id, token) of the other writers claimed over
        for attempt in range(_CLAIM_TRIES):
            rows = self._store.read_rows("docs", sorted(unread))
            held.update((key, _doc_of((key, rows[key])) if key in rows else None) for key in unread)
            # no document to remove: nothing to own (as if before whoever adds it next)
            unread = {k for k in unread if held[k] is not None or intents[ids[k]] is not None}
            expected = {key: rows.get(key, {}).get(_OWNER) for key in unread}
            if self._restamp(expected):  # claimed rows take the new stamp too
                expected.update(mine)
            stamp = self.stamps()[1]
            items = [
                (key, want, owner_token(stamp, self._nonce, intents[ids[key]]))
                for key, want in expected.items()
            ]
            won = self._store.transport.check_and_put(self._store.tables["docs"], _OWNER, items)
            unread = set()
            for (key, want, token), ok in zip(items, won):
                if not ok:
                    # Lost to another writer (or a retried call whose reply was lost:
                    # the re-read shows this batch's own token, claimed again).
                    unread.add(key)
                    self._fresh.discard(key)
                    continue
                mine[key] = token
                if want is None and held[key] is None:
                    self._fresh.add(key)
                elif want is not None and want[8:INTENT_AT] != self._nonce:
                    replaced.append((ids[key], want))
            if not unread:
                self.delete_index(cells_of(unfinished(replaced, intents, held)))
                return {doc.doc_id: doc for doc in held.values() if doc is not None}
            time.sleep(random.uniform(0, 0.001 * (attempt + 1)))
        raise StoreError(
            f"{self._store.url}: {len(unread)} docs rows (e.g. "
            f"{sorted(unread)[0].decode('utf-8', 'replace')!r}) were claimed by other writers "
            f"{_CLAIM_TRIES} times in a row; too many writers replace the same ids at once"
        )

    def _restamp(self, expected: dict[bytes, bytes | None]) -> bool:
        """Take the batch's timestamp pair above every other writer's token read;
        True if it replaced a pair already used in tokens."""
        seen = [t for t in expected.values() if t is not None and t[8:INTENT_AT] != self._nonce]
        newest = max((int.from_bytes(t[:8], "big") for t in seen), default=0)
        if self._stamps is not None and newest < self._stamps[0]:
            return False
        used = self._stamps is not None
        CLOCK.observe(newest)
        self._stamps = CLOCK.pair()
        return used

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        return self._store.get_docs(doc_ids)

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        for row, column in self._columns(cells):
            self._index_puts[row].append((column, b""))
            self._count(1)

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        for row, column in self._columns(cells):
            self._index_deletes[row].append(column)
            self._count(1)

    def _columns(self, cells: Iterable[IndexCell]) -> Iterator[tuple[bytes, bytes]]:
        """(row, ``d:`` column) of each index cell in this index's layout."""
        if self._buckets:
            for row, doc_id in cells:
                bucket, qualifier = codec.bucket_cell(row, doc_id)
                yield bucket, _INDEX_FAMILY + qualifier
        else:
            for row, doc_id in cells:
                yield row, _INDEX_FAMILY + codec.encode_doc_id(doc_id)

    def put_docs(self, docs: Iterable[Document]) -> None:
        for doc in docs:
            key = codec.encode_doc_id(doc.doc_id)
            cols = codec.doc_to_columns(doc)
            # Columns the new version lacks are deleted, so a row is replaced whole.
            self._doc_puts[key] = list(cols.items())
            self._doc_deletes[key] = (
                [] if key in self._fresh else [c for c in _DOC_COLUMNS if c not in cols]
            )
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
        """Stale index cells (at T), then new ones (T+1), then docs rows (T+1); in
        the bucket layout the docs rows before the new cells.

        Rows layout: a crash in between leaves cells without a docs row, never a
        docs row without its cells; readers confirm hits against the docs row.
        Bucket layout: a crash leaves a docs row without (all) its cells, which a
        query does not find until ``verify --repair``, never a cell its docs row
        disagrees with, so queries need no confirming read. A docs row claimed is
        written like any other; its token names the version it gets.
        """
        deletes_ts, puts_ts = self.stamps()
        self._flushed = True
        transport, tables = self._store.transport, self._store.tables
        transport.mutate(tables["index"], {}, self._index_deletes, deletes_ts)
        doc_deletes = {k: cols for k, cols in self._doc_deletes.items() if cols}
        if self._buckets:
            transport.mutate(tables["docs"], self._doc_puts, doc_deletes, puts_ts)
        transport.mutate(tables["index"], self._index_puts, {}, puts_ts)
        if not self._buckets:
            transport.mutate(tables["docs"], self._doc_puts, doc_deletes, puts_ts)
        self._index_puts.clear()
        self._index_deletes.clear()
        self._doc_puts = {}
        self._doc_deletes = {}
        self._pending = 0


class HBaseStore:
    """The production store: tables ``<prefix>_index``, ``_docs``, ``_meta``."""

    atomic_batches = False
    expires_itself = True  # a retained index's TTL (table_descriptor); due() finds the rest

    def __init__(
        self,
        gateways: Sequence[Gateway],
        *,
        prefix: str = DEFAULT_PREFIX,
        pool: int = DEFAULT_POOL,
        timeout: int = DEFAULT_TIMEOUT_MS,
        retries: int = DEFAULT_RETRIES,
        api: str | None = None,
        layout: str | None = None,
        wire: Wire = PLAIN,
        expect: int | None = None,
        docs_sample: str | None = None,
        create: bool = True,
        retain: int | None = None,
        lease: float | None = None,
    ) -> None:
        self.prefix = prefix
        self._sizing, self._created = hbase_tables.Sizing.of(expect, docs_sample), False
        self._hot: dict[bytes, bytes] = {}  # see _read_buckets
        lease_ms = LEASE_MS if lease is None else round(lease * 1000)
        self._run = RunLocks(lambda key: LeaseLock(self, f"run-lock/{key}", lease_ms))  # a key
        self._section = LeaseSection(self, lease_ms)  # one batch's lookups and write at a time
        hosts = ",".join(str(g) for g in gateways)
        self.url = f"hbase://{hosts}?prefix={prefix}{f'&api={api}' if api else ''}{wire.query()}"
        self.tables = {t: hbase_tables.table_name(prefix, t).encode() for t in hbase_tables.TABLES}
        self._gateways = Gateways(gateways, wire, timeout, self.url, GATEWAY_STATS)
        if api is None:
            with first_contact(self._gateways):
                api = gateway_api(self._gateways)
        transport_class = Thrift2Transport if api == "thrift2" else Thrift1Transport
        self.transport: Transport = transport_class(self._gateways, pool=pool, retries=retries)
        if layout == BUCKETS and api == "thrift1":
            self.close()
            raise InvalidIndexUrl(
                f"index URL {self.url}&layout=buckets: the bucket layout is read over "
                "Thrift2 only; give the Thrift2 gateway's port, or layout=rows"
            )
        #: The index table's layout: that of the manifest once one exists, else
        #: the one a new index gets (``layout``; buckets over Thrift2).
        self.layout: str = layout or (BUCKETS if api == "thrift2" else ROWS)
        self._rows_asked = layout == ROWS  # chosen on purpose: no warning when created
        try:
            self._ensure_tables(create, retain)
            manifest = self.get_meta("manifest")
            if manifest is not None:
                self.adopt(manifest)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, retain: int | None = None) -> HBaseStore:
        return cls(**parse_url(url), create=create, retain=retain)

    @property
    def api(self) -> str:
        """The gateway protocol in use: ``thrift1`` or ``thrift2``."""
        return self.transport.api

    @property
    def index_follows_docs(self) -> bool:
        """Bucket layout: every cell a query reads agrees with its docs row."""
        return self.layout == BUCKETS

    def manifest_entries(self) -> dict[str, Any]:
        """What a new index's manifest records of this store: its layout (the rows
        layout, unless asked for, is warned about: the index keeps it for good)."""
        if self.layout == ROWS and not self._rows_asked:
            log.warning(SLOW_LAYOUT, self.url)
        sized = self._sizing.manifest() if self._created else {}
        return (dict(_BUCKET_MANIFEST) if self.layout == BUCKETS else {}) | sized

    def adopt(self, manifest: dict[str, Any]) -> None:
        """Take the layout the index's manifest records (rows unless it says buckets)."""
        layout = layout_of(manifest)
        if layout == BUCKETS and self.api == "thrift1":
            raise StoreError(
                f"index {self.url} has the bucket layout (manifest format 2), which is "
                "read over Thrift2 only: give the port of the Thrift2 gateway"
            )
        self.layout = layout

    # -- tables ---------------------------------------------------------------
    def _ensure_tables(self, create: bool, ttl: int | None) -> None:
        # with api given, this is the first call: is a gateway there at all?
        with first_contact(self._gateways):
            existing = self.transport.table_names()
        missing = [t for t, name in self.tables.items() if name not in existing]
        if create:
            create_tables(self.transport, self.tables, missing, prefix=self.prefix, ttl=ttl,
                          layout=self.layout, sizing=self._sizing, url=self.url)  # fmt: skip
            self._created = bool(missing)
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
        self.transport.mutate(self.tables["meta"], {name.encode(): cells}, {}, CLOCK.pair()[1])

    def put_meta_if_absent(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        (written,) = self.transport.check_and_put(
            self.tables["meta"], _META_COL, [(name.encode(), None, codec.encode_json(value))]
        )
        held = value if written else self.get_meta(name)
        if held is None:
            raise StoreError(f"meta record {name!r} of {self.url} vanished while being created")
        return held

    def swap_meta(
        self, items: Sequence[tuple[str, dict[str, Any] | None, dict[str, Any]]]
    ) -> list[bool]:
        """checkAndPuts of ``m:json``, pipelined; values compare as their JSON bytes,
        which are canonical (keys sorted)."""
        return self.transport.check_and_put(
            self.tables["meta"],
            _META_COL,
            [
                (
                    name.encode(),
                    None if old is None else codec.encode_json(old),
                    codec.encode_json(new),
                )
                for name, old, new in items
            ],
        )

    def delete_meta(self, name: str) -> None:
        self.transport.mutate(
            self.tables["meta"], {}, {name.encode(): [_META_COL]}, CLOCK.pair()[0]
        )

    def write_section(self) -> AbstractContextManager[Section]:
        """The meta row ``write-section``, a lease (:class:`LeaseSection`)."""
        return self._section.held()

    def load(self, blocks: Iterable[tuple[Sequence[CellBlock], Sequence[Document]]]) -> int:
        raise InvalidInput(f"{self.url} has no bulk load (the embedded store has); ingest")

    def merge_fresh(self, on_part: Callable[[int, int, int], None] | None = None) -> int:
        return 0  # no tiers: HBase compacts its own files

    def warm(self) -> int:
        return 0  # nothing mapped here: the region servers cache

    def run_lock(
        self, job: str, wait: float = 0.0, key: str = "index"
    ) -> AbstractContextManager[None]:
        """The lease row ``run-lock/KEY`` in meta (:class:`~simhash_hbase.store.lock.LeaseLock`)."""
        return self._run.held(job, wait, key)

    @contextmanager
    def batch(self) -> Iterator[_HBaseBatch]:
        batch = _HBaseBatch(self)
        yield batch
        batch.flush()

    def read_rows(
        self, table: str, keys: Sequence[bytes], columns: Sequence[bytes] = ()
    ) -> dict[bytes, dict[bytes, bytes]]:
        """The rows that exist among ``keys``, by key (multi-gets of ``_GET_ROWS``);
        with ``columns``, only those (a row holding none of them is not returned)."""
        out: dict[bytes, dict[bytes, bytes]] = {}
        for start in range(0, len(keys), _GET_ROWS):
            chunk = keys[start : start + _GET_ROWS]
            out.update(self.transport.get_rows(self.tables[table], chunk, columns))
        return out

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        rows = self.read_rows("docs", [codec.encode_doc_id(d) for d in doc_ids])
        docs = (_doc_of(row) for row in rows.items())
        return {doc.doc_id: doc for doc in docs if doc is not None}

    def doc_fingerprints(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """One multi-get of the ``f:h`` cells alone: a removed document's row (an
        owner token only) has none, and a row's text never crosses the wire."""
        keys = [codec.encode_doc_id(d) for d in doc_ids]
        rows = self.read_rows("docs", keys, (codec.COL_FINGERPRINT,))
        return {
            key.decode("utf-8"): codec.fingerprint_from_bytes(cols[codec.COL_FINGERPRINT])
            for key, cols in rows.items()
        }

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[IndexCell]:
        return self.scan_prefixes_many([prefixes])[0]

    def scan_prefixes_many(
        self, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        """All prefixes at once, each scanned once however many lists hold it."""
        unique = sorted({p for prefixes in prefix_lists for p in prefixes})
        if self.layout == BUCKETS:
            found = self._read_buckets(unique, row_cap)
            return [[c for p in prefixes for c in found.get(p, ())] for prefixes in prefix_lists]
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

    def _read_buckets(
        self, prefixes: Sequence[bytes], row_cap: int | None, first: list[Page] | None = None
    ) -> dict[bytes, list[IndexCell]]:
        """The cells of bucket rows ``prefixes`` (one multi-get, a page of
        ``_BUCKET_PAGE`` columns per row; with a cap, of ``_CAPPED_PAGE`` or
        ``row_cap``), with at most ``row_cap`` ids per fingerprint: a full page is
        followed by another from its last qualifier, or from the next fingerprint
        when the last one has ``row_cap`` ids already (a bucket of 100,000 copies
        costs one more page, not 1,000 of them). A bucket known to hold such a
        fingerprint (:attr:`_hot`) is asked for the page past it in the first
        multi-get too: a hot text's query makes one round trip, as others do.
        ``first``: the answer to that first multi-get, already read (it asked for
        no page past a hot fingerprint)."""
        _check_bucket_keys(prefixes)
        qualifiers: dict[bytes, set[bytes]] = defaultdict(set)
        ids: dict[bytes, Counter[bytes]] = defaultdict(Counter)  # ids per fingerprint
        pending = [(p, b"") for p in prefixes]
        if row_cap is not None and first is None:
            pending += [(p, past) for p in prefixes if (past := self._hot.get(p))]
        asked = set(pending)
        page = _page_size(row_cap)
        while pending:
            if first is None:
                rows = self.transport.get_row_pages(self.tables["index"], pending, page)
            else:
                rows, first = first, None
            pending = []
            for key, columns in rows:
                after = self._take_page(key, columns, page, row_cap, qualifiers[key], ids[key])
                if after is not None and (key, after) not in asked:
                    asked.add((key, after))
                    pending.append((key, after))
        return {
            key: codec.cells_of_bucket(key, sorted(held))
            for key, held in qualifiers.items()
            if held
        }

    def _take_page(
        self,
        key: bytes,
        columns: Iterable[bytes],
        page: int,
        row_cap: int | None,
        held: set[bytes],
        seen: Counter[bytes],
    ) -> bytes | None:
        """Add one page of bucket ``key`` (its qualifiers) to ``held`` (at most
        ``row_cap`` ids a fingerprint; pages may overlap) and say where its next
        page starts (None: the row ends here). A page that ends on a capped
        fingerprint marks the bucket hot."""
        page_qualifiers = sorted(columns)
        if row_cap is None:
            held.update(page_qualifiers)
        elif len(page_qualifiers) < row_cap:  # an ordinary page: a cell at a time
            for q in page_qualifiers:
                fp = q[: codec.FINGERPRINT_BYTES]
                if q not in held and seen[fp] < row_cap:
                    seen[fp] += 1
                    held.add(q)
        else:  # a page that may reach the cap: a run of one fingerprint at a time
            _take_runs(page_qualifiers, row_cap, held, seen)
        if len(page_qualifiers) < page:
            return None
        last = page_qualifiers[-1]
        full = row_cap is not None and seen[last[: codec.FINGERPRINT_BYTES]] >= row_cap
        after = _next_page(last, full)
        if full and after is not None:
            self._remember_hot(key, after)
        return after

    def _remember_hot(self, key: bytes, after: bytes) -> None:
        """Remember bucket ``key`` as holding a capped fingerprint; ``after``: where
        the page past it starts (``b""``: its first page holds it whole)."""
        if len(self._hot) >= _HOT_BUCKETS:
            self._hot.clear()  # relearned at one more round trip each
        self._hot[key] = after

    def scan_documents(
        self, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """The bucket layout's one-query path: one multi-get, and the distinct
        documents its cells name (a qualifier is the fingerprint then the id, so a
        document met in several buckets is one qualifier), without a tuple per
        cell. None, where the plain path (:meth:`scan_prefixes_many`) answers: the
        rows layout, or a bucket known or now found to hold a fingerprint of
        ``row_cap`` ids (the plain path reports the cut; the bucket is
        remembered, so only its first query pays the one more round trip)."""
        if self.layout != BUCKETS or (
            row_cap is not None and not self._hot.keys().isdisjoint(prefixes)
        ):
            return None
        _check_bucket_keys(prefixes)
        page = _page_size(row_cap)
        rows = self.transport.get_row_pages(
            self.tables["index"], [(p, b"") for p in prefixes], page
        )
        for key, columns in rows:
            if row_cap is not None and _capped(columns, row_cap):
                self._take_page(key, columns, page, row_cap, set(), Counter())  # the page past
                if key not in self._hot:
                    self._remember_hot(key, b"")
                return None
        if any(len(columns) >= page for _, columns in rows):  # rows of more pages
            return self._documents(self._read_buckets(prefixes, row_cap, rows), row_cap)
        named = {q for _, columns in rows for q in columns}
        docs = [codec.document_of_bucket(q) for q in named]
        return docs, sum(len(columns) for _, columns in rows)

    def _documents(
        self, found: dict[bytes, list[IndexCell]], row_cap: int | None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """:meth:`scan_documents`' answer from :meth:`_read_buckets`' (None: a
        fingerprint reached ``row_cap`` in a later page; its bucket is remembered)."""
        cells = [cell for held in found.values() for cell in held]
        if row_cap is not None:
            per_row = Counter(row for row, _ in cells)
            capped = {row[: codec.PREFIX_BYTES] for row, n in per_row.items() if n >= row_cap}
            for key in capped - self._hot.keys():
                self._remember_hot(key, b"")
            if capped:
                return None
        docs = {(doc_id, codec.rowkey_fingerprint(row)) for row, doc_id in cells}
        return list(docs), len(cells)

    def row_sizes(self, rows: Sequence[bytes]) -> None:
        """HBase counts a row's columns only by reading them: a cut row's count is
        a lower bound."""
        return None

    def _scan_all(self, table: str, keys_only: bool, key_range: KeyRange = WHOLE) -> Iterator[Row]:
        # One scanner per page (restarting after the last row), so a slow
        # consumer never holds a scanner past its lease.
        name, (start, stop) = self.tables[table], key_range
        while True:
            rows = self.transport.scan_page(name, start, _SCAN_ROWS, keys_only, stop)
            yield from rows
            if len(rows) < _SCAN_ROWS:
                return
            start = rows[-1][0] + b"\x00"

    def key_ranges(self, table: str) -> list[KeyRange]:
        """The table's regions, as the gateway locates them now."""
        starts = sorted(set(self.transport.region_starts(self.tables[table])) | {b""})
        return list(zip(starts, [*starts[1:], b""]))

    def iter_docs(
        self,
        on_corrupt: Callable[[str, StoreCorrupt], None] | None = None,
        key_range: KeyRange = WHOLE,
    ) -> Iterator[Document]:
        for row in self._scan_all("docs", False, key_range):
            try:
                doc = _doc_of(row)
            except StoreCorrupt as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(row[0].decode("utf-8", "surrogateescape"), exc)
                continue
            if doc is not None:
                yield doc

    def due(self, before: int, limit: int) -> list[str]:
        """A scan of the docs: the TTL expires the rest (docs/hbase.md, "Retention")."""
        return oldest_before(self.iter_docs(), before, limit)

    def iter_index(self, key_range: KeyRange = WHOLE) -> Iterator[IndexCell]:
        for key, columns in self._scan_all("index", True, key_range):
            if self.layout == BUCKETS:
                for column in sorted(columns):
                    yield codec.cell_of_bucket(key, column[len(_INDEX_FAMILY) :])
            else:
                yield from _cells_of(key, columns)

    def stats(self, counts: bool = True) -> dict[str, Any]:
        docs = cells = None
        if counts:
            docs = sum(1 for _, cols in self._scan_all("docs", keys_only=True) if _holds_doc(cols))
            cells = sum(len(cols) for _, cols in self._scan_all("index", keys_only=True))
        return {
            "store": "hbase",
            "url": self.url,
            "api": self.api,
            "tables": {t: n.decode() for t, n in self.tables.items()},
            "documents": docs,
            "index_cells": cells,
            "counted_by": "one keys-only scan (at scale: shdb stats --workers N or --sample F)",
        }

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> HBaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_bucket_keys(prefixes: Sequence[bytes]) -> None:
    if not set(map(len, prefixes)) <= {codec.PREFIX_BYTES}:
        raise ValueError("a bucket-layout index is read by 5-byte prefixes only")


def _page_size(row_cap: int | None) -> int:
    """Columns read per bucket row at a time (see :data:`_CAPPED_PAGE`)."""
    return _BUCKET_PAGE if row_cap is None else min(max(row_cap, _CAPPED_PAGE), _BUCKET_PAGE)


def _capped(qualifiers: Sequence[bytes], row_cap: int) -> bool:
    """Whether a page of a bucket (qualifiers in order) holds ``row_cap`` ids of
    one fingerprint: the first and the last of some ``row_cap`` in a row share it."""
    fp, span = codec.FINGERPRINT_BYTES, row_cap - 1
    return any(
        qualifiers[i][:fp] == qualifiers[i + span][:fp] for i in range(len(qualifiers) - span)
    )


def _fingerprint_of(qualifier: bytes) -> bytes:
    return qualifier[: codec.FINGERPRINT_BYTES]


def _take_runs(
    qualifiers: list[bytes], row_cap: int, held: set[bytes], seen: Counter[bytes]
) -> None:
    """:meth:`HBaseStore._take_page`'s cells, a fingerprint's run of sorted
    ``qualifiers`` at a time: a page of a hot fingerprint's 32 ids is one slice,
    not 32 steps (the first ids not held yet, up to ``row_cap`` a fingerprint)."""
    at, end = 0, len(qualifiers)
    while at < end:
        fp = qualifiers[at][: codec.FINGERPRINT_BYTES]
        stop = bisect.bisect_right(qualifiers, fp, at, end, key=_fingerprint_of)
        room = row_cap - seen[fp]
        if room > 0:
            taken = [q for q in qualifiers[at:stop] if q not in held][:room]
            held.update(taken)
            seen[fp] += len(taken)
        at = stop


def _next_page(last: bytes, skip_fingerprint: bool) -> bytes | None:
    """Where a bucket row's next page starts: just after qualifier ``last``, or
    past every qualifier of its fingerprint (None: there is nothing past it)."""
    if not skip_fingerprint:
        return last + b"\x00"
    fp = int.from_bytes(last[: codec.FINGERPRINT_BYTES], "big") + 1
    return None if fp >> 64 else fp.to_bytes(codec.FINGERPRINT_BYTES, "big")


def _cells_of(key: bytes, columns: Iterable[bytes]) -> list[IndexCell]:
    """A keys-only index row -> (row key, doc id) cells; qualifiers follow ``d:``."""
    return [(key, name[2:].decode("utf-8")) for name in columns]


def _holds_doc(columns: Iterable[bytes]) -> bool:
    """False for a docs row that holds only an owner token (a removed document)."""
    return any(c != _OWNER for c in columns)


def _doc_of(row: Row) -> Document | None:
    key, columns = row
    if not _holds_doc(columns):
        return None
    return codec.doc_from_columns(key.decode("utf-8"), columns)
