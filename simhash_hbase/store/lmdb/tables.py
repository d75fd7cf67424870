"""The compact format's tables (:class:`Tables`): opening and upgrading them,
the state record, the prefix filters held, and every read (documents, buckets,
scans, row sizes, iteration). Writes: commit.py, merge.py, load.py.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from itertools import compress, islice
from operator import itemgetter
from typing import Any, NamedTuple

import lmdb
import numpy as np

from simhash_hbase.errors import StoreCorrupt, StoreError
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import IndexCell
from simhash_hbase.store.lmdb import pages
from simhash_hbase.store.lmdb.cells import (
    _ESCAPE,
    _HEAD,
    _HEAD_BYTES,
    _ID_COLUMN,
    _NUM,
    _UTF8,
    CELL_BYTES,
    FILTERS,
    FORMAT,
    FRESH,
    HOT_ROWS,
    LOADING,
    MAX_DOCUMENTS,
    SPILLED,
    STATE,
    TABLES,
    TIERS,
    TIMES,
    Buckets,
    Helpers,
    Txn,
    bare_docs,
    decode_id,
    encode_id,
    find_cells,
)
from simhash_hbase.store.lmdb.filters import (
    _FILTER_HEAD,
    _MARK_CHUNK,
    FILTER_CHUNK,
    TIER_FILTER_BITS,
    PrefixFilter,
    TierFilters,
    filter_shift,
    fresh_due,
    marked_chunks,
    tier_cells,
)
from simhash_hbase.store.lmdb.probes import (
    _DB_RECORD,
    _NO_ROOT,
    _WALKABLE,
    Probe,
    Trees,
    _buckets_of,
    _distinct,
    _matched,
)


class _Held(NamedTuple):
    """A reader's copy of the persisted filters, as of the snapshot ``txn_id``:
    each tier's (head, filter), kept while its head (the id of the commit that
    wrote it) is unchanged; and what :meth:`Tables.query_probe` gives for that
    snapshot (and ``warm``, the filters warm() made). One object, replaced whole
    (threads share it)."""

    txn_id: int
    warm: TierFilters | None
    main: tuple[bytes, PrefixFilter] | None
    fresh: tuple[bytes, PrefixFilter] | None
    probe: tuple[PrefixFilter | None, PrefixFilter | None, Trees | None]


class Tables:
    """The databases of one environment, and how rows are encoded in them."""

    def __init__(self, env: lmdb.Environment, handles: dict[bytes, Any], helpers: Helpers) -> None:
        self.env = env
        self.index = handles[b"index"]
        self.docs = handles[b"docs"]
        self.names = handles[b"names"]
        self.meta = handles[b"meta"]
        self.fresh: Any = handles.get(FRESH)  # None: a format 2 file opened read-only
        self.hot: Any = handles.get(HOT_ROWS)  # None: a file without hot rows, read-only
        self.kept: Any = handles.get(FILTERS)  # None: a file before format 4, read-only
        self.times: Any = handles.get(TIMES)  # None: not retained (times.py)
        self.catalog = env.open_db(None)  # LMDB's main database: the named ones' records
        self.h = helpers
        self.filter: TierFilters | None = None  # see filters(); set by a warm reader
        self._held = _Held(-1, None, None, None, (None, None, None))  # see query_probe()
        self._map: tuple[int, int] | None = None  # see trees(): (address, page size)
        #: The fresh filter this process last committed: (tier, head, filter), taken
        #: by its next batch instead of reading it back (see add_to_filter).
        self.mine: tuple[bytes, bytes, PrefixFilter] | None = None
        self.probe = Probe.best()

    @staticmethod
    def open(env: lmdb.Environment, txn: Txn | None = None) -> dict[bytes, Any]:
        """The handles of the databases; with ``txn``, created in it (the fresh
        tier and the hot rows too); without, those only if the file has them."""
        handles = {name: env.open_db(name, txn=txn, create=txn is not None) for name in TABLES}
        for name in (FRESH, HOT_ROWS, FILTERS):
            with suppress(lmdb.NotFoundError):  # read-only: none yet (see tier(), hot_rows())
                handles[name] = env.open_db(name, txn=txn, create=txn is not None)
        with suppress(lmdb.NotFoundError):  # made for a retained index only (keep_times)
            handles[TIMES] = env.open_db(TIMES, txn=txn, create=False)
        return handles

    def keep_times(self) -> None:
        """Make (or open) the time order of a retained index (times.py)."""
        if self.times is None:
            with self.env.begin(write=True) as txn:
                self.times = self.env.open_db(TIMES, txn=txn)

    def upgrade(self, txn: Txn) -> None:
        """Record a format 2 or 3 file as format 4 (its fresh tier, hot rows and
        filters table, those missing made empty by :meth:`open` in ``txn``), and
        give each tier its filter (one pass over each)."""
        raw = txn.get(STATE.encode(), db=self.meta)
        if raw is not None:
            state = codec.decode_json(raw)
            state["format"] = FORMAT
            state.setdefault("fresh", 0)
            txn.put(STATE.encode(), codec.encode_json(state), db=self.meta)
        self.rebuild_filters(txn)

    # -- the tiers' persisted prefix filters (format 4) --------------------------
    def rebuild_filters(self, txn: Txn) -> None:
        """Each tier's filter made anew from its cells (one pass over each)."""
        state = self.state(txn)
        for tier in TIERS:
            self.save_filter(txn, tier, self._filter(txn, tier, self.shift_for(state, tier)))

    def load_filter(self, txn: Txn, tier: bytes) -> PrefixFilter | None:
        """A tier's persisted filter (its bits writable), None if it has none."""
        head = txn.get(tier, db=self.kept)
        return None if head is None else self._read_bits(txn, tier, head)

    def _read_bits(self, txn: Txn, tier: bytes, head: bytes) -> PrefixFilter:
        _, shift = _FILTER_HEAD.unpack(head)
        size = 1 << (64 - shift - 3)
        bits = bytearray(size)
        cursor = txn.cursor(self.kept)
        at = 0
        chunks = [tier + _NUM.pack(i) for i in range(-(-size // FILTER_CHUNK))]
        for _, chunk in cursor.getmulti(chunks):
            bits[at : at + len(chunk)] = chunk
            at += len(chunk)
        if at != size:
            raise StoreCorrupt(
                f"the embedded index at {self.h.path} holds a {tier.decode()} filter of "
                f"{at} bytes where its head says {size}; {self.h.rebuild}"
            )
        return PrefixFilter(shift, bits)

    def save_filter(
        self, txn: Txn, tier: bytes, held: PrefixFilter, dirty: set[int] | None = None
    ) -> bytes:
        """Write a tier's filter in ``txn``: what readers of its commit use; its head.
        Its chunks overwrite those of the one before (those past its end go), or,
        given ``dirty``, only those chunks: the filter is the file's own, marked."""
        bits = memoryview(held.bits)
        numbers = range(-(-len(bits) // FILTER_CHUNK)) if dirty is None else sorted(dirty)
        chunks = [
            (tier + _NUM.pack(i), bytes(bits[i * FILTER_CHUNK : (i + 1) * FILTER_CHUNK]))
            for i in numbers
        ]
        cursor = txn.cursor(self.kept)
        cursor.putmulti(chunks)
        if dirty is None:
            found = cursor.set_range(tier + _NUM.pack(len(chunks)))
            while found and cursor.key().startswith(tier):
                found = cursor.delete()
        head = _FILTER_HEAD.pack(txn.id(), held.shift)
        txn.put(tier, head, db=self.kept)
        return head

    def drop_filter(self, txn: Txn, tier: bytes) -> None:
        """Remove a tier's filter: its readers then read all of its buckets."""
        cursor = txn.cursor(self.kept)
        found = cursor.set_range(tier)
        while found and cursor.key().startswith(tier):
            found = cursor.delete()

    def add_to_filter(
        self, txn: Txn, tier: bytes, added: Buckets
    ) -> tuple[bytes, bytes, PrefixFilter] | None:
        """Keep a tier's filter exact in the commit that put the cells ``added``
        (bucket keys, their packed cells) in it: their bits set, or (the tier has
        outgrown it, or has none) made anew from the tier, bigger. (tier, head,
        filter) written, for :attr:`mine` once committed."""
        keys, packed = added
        if self.kept is None or not keys:
            return None
        state = self.state(txn)
        mine, self.mine = self.mine, None
        if mine is not None and mine[0] == tier and txn.get(tier, db=self.kept) == mine[1]:
            held: PrefixFilter | None = mine[2]  # what this process committed last, unchanged
        else:
            held = self.load_filter(txn, tier)
        if held is None or held.shift > filter_shift(
            tier_cells(state, tier), TIER_FILTER_BITS[tier]
        ):
            held = self._filter(txn, tier, self.shift_for(state, tier))
            return tier, self.save_filter(txn, tier, held), held
        dirty: set[int] = set()
        for at in range(0, len(keys), _MARK_CHUNK):  # tuples made a chunk at a time
            chunk = list(zip(keys[at : at + _MARK_CHUNK], packed[at : at + _MARK_CHUNK]))
            self.probe.mark(held.bits, held.shift, chunk)
            dirty |= marked_chunks(held.shift, chunk)
        return tier, self.save_filter(txn, tier, held, dirty), held

    @staticmethod
    def shift_for(state: dict[str, Any], tier: bytes) -> int:
        """The size (shift) of a tier's filter made anew: for the index, its cells;
        for the fresh tier, 4-8 times its cells, up to what it will hold at its
        next merge (so that it is made anew a few times a merge, not each batch)."""
        cells = tier_cells(state, tier)
        need = filter_shift(cells, TIER_FILTER_BITS[tier])
        if tier != FRESH:
            return need
        return min(need, max(need - 2, filter_shift(fresh_due(state), TIER_FILTER_BITS[FRESH])))

    def table(self, tier: bytes) -> Any:
        return self.fresh if tier == FRESH else self.index

    def query_probe(
        self, txn: Txn
    ) -> tuple[PrefixFilter | None, PrefixFilter | None, Trees | None]:
        """:func:`bucket_keys`' arguments after the prefixes for a query of
        ``txn``'s snapshot: the (index, fresh) filters it may use (the persisted
        ones, format 4: a copy held while no commit rewrote them; else those
        warm() made for this very snapshot; else none), and its :meth:`trees`.
        Worked out once a snapshot."""
        now, held = txn.id(), self._held
        if held.txn_id == now and held.warm is self.filter:
            return held.probe
        warm = self.filter
        if self.kept is None:
            main = fresh = None
            usable = warm is not None and warm.txn_id == now
            filters = (warm.main, warm.fresh) if warm is not None and usable else (None, None)
        else:
            heads = dict(txn.cursor(self.kept).getmulti(list(TIERS)))
            main, fresh = (
                self._kept(txn, tier, heads.get(tier), mine)
                for tier, mine in zip(TIERS, (held.main, held.fresh))
            )
            filters = (None if main is None else main[1], None if fresh is None else fresh[1])
        probe = (filters[0], filters[1], self.trees(txn))
        self._held = _Held(now, warm, main, fresh, probe)
        return probe

    def trees(self, txn: Txn) -> Trees | None:
        """The :class:`Trees` of ``txn``'s snapshot; None where this process's
        map of the file is not known (not Linux) or the LMDB is not one whose
        pages the C walk can read (:data:`_WALKABLE`)."""
        if self._map is None:
            start = pages.mapped_at(self.h.path / pages.DATA_FILE) if _WALKABLE else None
            self._map = (start or 0, int(self.env.stat()["psize"]))
        base, psize = self._map
        if not base:
            return None
        records = [txn.get(name, db=self.catalog) for name in (*TIERS, b"names")]
        if any(raw is not None and len(raw) != _DB_RECORD.size for raw in records):
            return None
        roots = [_NO_ROOT if raw is None else _DB_RECORD.unpack(raw)[-1] for raw in records]
        return Trees(base, int(self.env.info()["last_pgno"]) + 1, psize, *roots)

    def hot_rows(self) -> Any:
        """The hot rows' handle, or None if the file has none (then no bucket marks a
        lead as spilled: the marks and the table are written in one commit)."""
        if self.hot is None:
            with suppress(lmdb.NotFoundError):
                self.hot = self.env.open_db(HOT_ROWS, create=False)
        return self.hot

    def new_cells_tier(self) -> Any:
        """Where new cells go: the fresh tier (the index itself in a file without one,
        which is format 2's layout and as exact, only slower to write)."""
        return self.index if self.fresh is None else self.fresh

    def tier(self, txn: Txn | None = None) -> Any:
        """The fresh tier's handle, or None if the file has none: a format 2 file
        opened read-only gets one once a writer of format 3 has opened it (a get
        in LMDB's catalog of ``txn`` until then)."""
        if self.fresh is None:
            if txn is not None and txn.get(FRESH, db=self.catalog) is None:
                return None
            try:
                self.fresh = self.env.open_db(FRESH, create=False)
            except lmdb.NotFoundError:
                return None
        return self.fresh

    # -- the store's own record -------------------------------------------------
    def state(self, txn: Txn, *, loading: bool = False) -> dict[str, Any]:
        """The store's record; :class:`StoreCorrupt` while it says a bulk load runs
        (one that was killed: its rows are not all there), unless ``loading``."""
        raw = txn.get(STATE.encode(), db=self.meta)
        if raw is None:
            raise StoreCorrupt(f"the embedded index at {self.h.path} lacks its record {STATE!r}")
        state: dict[str, Any] = codec.decode_json(raw)
        if state.get(LOADING) and not loading:
            raise StoreCorrupt(
                f"a bulk load into the embedded index at {self.h.path} was cut short (its "
                "process was killed), so it holds part of the documents: run the bulk load "
                "again (it starts over), or remove the folder"
            )
        return state

    def put_state(self, txn: Txn, state: dict[str, Any]) -> None:
        txn.put(STATE.encode(), codec.encode_json(state), db=self.meta)

    # -- rows -----------------------------------------------------------------
    def doc_value(self, num: int, doc: Document, raw_id: bytes, key: bytes) -> bytes:
        cols = codec.doc_to_columns(doc)
        del cols[codec.COL_FINGERPRINT]
        if key != raw_id:
            cols[_ID_COLUMN] = raw_id
        return _HEAD.pack(num, doc.fingerprint) + self.h.pack_columns(cols)

    def doc_from(self, key: bytes, value: bytes) -> Document:
        """The document of a full docs row; a damaged row is a StoreCorrupt."""
        if len(value) < _HEAD.size:
            raise self.h.corrupt_row(
                StoreError(f"the docs row {decode_id(key)!r} is damaged (it is cut short)")
            )
        fp = _HEAD.unpack_from(value)[1]
        try:
            cols = self.h.unpack_columns(value[_HEAD.size :])
        except StoreError as exc:
            reason = f"the docs row {decode_id(key)!r} is damaged (its columns are cut short)"
            raise self.h.corrupt_row(StoreError(reason)) from exc
        doc_id = decode_id(cols.pop(_ID_COLUMN, key))
        cols[codec.COL_FINGERPRINT] = codec.fingerprint_to_bytes(fp)
        try:
            return codec.doc_from_columns(doc_id, cols)
        except StoreCorrupt as exc:
            raise self.h.corrupt_row(exc) from exc

    def lookup(self, txn: Txn, raw_ids: Iterable[bytes]) -> dict[bytes, bytes]:
        """{raw id: docs row} of the ids that have one, a multi-get in key order."""
        raws = list(raw_ids)
        if not raws:
            return {}
        if max(map(len, raws)) < self.h.max_key:  # no id is folded: keys are ids
            found = txn.cursor(self.docs).getmulti(sorted(raws))
        else:
            keys = {self.h.fold(raw): raw for raw in raws}
            found = [
                (keys[key], value)
                for key, value in txn.cursor(self.docs).getmulti(sorted(keys))
                if key == keys[key] or _held_id(value) == keys[key]  # the full id must match
            ]
        # Committed rows: those whose number has a names row, asked in one multi-get.
        named = txn.cursor(self.names).getmulti(sorted({value[:4] for _, value in found}))
        held = {num for num, _ in named}
        return {raw: value for raw, value in found if value[:4] in held}

    def committed(self, txn: Txn, row: bytes) -> bool:
        """A docs row counts once its number has a names row (see CompactBatch.commit)."""
        return txn.get(row[:4], db=self.names) is not None

    # -- reads ----------------------------------------------------------------
    def get_docs(self, txn: Txn, doc_ids: Sequence[str]) -> dict[str, Document]:
        raws = {encode_id(doc_id): doc_id for doc_id in doc_ids}
        return self.docs_of(self.lookup(txn, raws), raws)

    def docs_of(self, found: dict[bytes, bytes], ids: Mapping[bytes, str]) -> dict[str, Document]:
        """{id: document} of the docs rows ``found`` (raw id -> row; those of a
        number only are not documents), ``ids`` naming each raw id: rows of a
        fingerprint (and a time) in one pass (:func:`bare_docs`), others one by one."""
        rows = {raw: value for raw, value in found.items() if len(value) != _NUM.size}
        bare = bare_docs(list(map(ids.__getitem__, rows)), list(rows.values()))
        if bare is not None:
            return {doc.doc_id: doc for doc in bare}
        return {ids[raw]: self.doc_from(self.h.fold(raw), value) for raw, value in rows.items()}

    def buckets(self, txn: Txn, keys: list[bytes]) -> dict[bytes, bytes]:
        """{bucket key: its cells in both tiers} of the ``keys`` that hold any: one
        multi-get a tier (two C calls, not a get per key)."""
        found = dict(txn.cursor(self.index).getmulti(keys))
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        if fresh is not None:
            for key, packed in dict(txn.cursor(fresh).getmulti(keys)).items():  # a key once
                found[key] = found[key] + packed if key in found else packed
        return found

    def scan(
        self, txn: Txn, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        """Hot path: per query one multi-get of its buckets in each tier and per
        bucket found a ``find`` of its prefix's two lead bytes; each document found
        costs one more get (its names row), once per query. A lead marked spilled
        also reads its own keys, in id order: with ``row_cap``, each row's first
        ``row_cap`` visible ones."""
        get, names = txn.get, self.names
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        tiers = [txn.cursor(self.index)] + ([] if fresh is None else [txn.cursor(fresh)])
        results: list[list[IndexCell]] = []
        for prefixes in prefix_lists:
            cells: list[IndexCell] = []
            held: dict[bytes, tuple[bytes, str] | None] = {}  # a match is in up to 10 buckets
            spilled: dict[bytes, None] = {}  # prefixes whose lead a bucket marks, in order
            for prefix, packed in _buckets_of(tiers, prefixes):
                lead = prefix[2:4]
                pos = packed.find(lead)
                while pos >= 0:
                    if pos % CELL_BYTES == 0:
                        num = packed[pos + 2 : pos + 6]
                        if num not in held:
                            name = get(num, db=names)
                            held[num] = None if name is None else (name[:8], decode_id(name[8:]))
                        found = held[num]
                        if found is not None:  # else not committed, or its document removed
                            cells.append((prefix + found[0], found[1]))
                        elif num == SPILLED:
                            spilled[prefix] = None
                    pos = packed.find(lead, pos + 1)
            for prefix in spilled:
                head = prefix[4:5] + prefix[0:4]
                cells += self._spilled(txn, head, prefix, row_cap, held)
            results.append(cells)
        return results

    def scan_documents(
        self, txn: Txn, prefixes: Sequence[bytes], row_cap: int | None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """:meth:`scan` of one query's prefixes, as the distinct documents found
        ((id, fingerprint), in no order) and the count of visible cells, without
        a tuple per cell: a multi-get of the buckets a tier (only those its
        :class:`PrefixFilter` may hold, where it has one: :meth:`query_probe`),
        the cells of each lead (:func:`bucket_nums`, in C where built), one
        names get per document.
        None (use :meth:`scan`) where that would differ: two prefixes of one
        bucket, a lead marked spilled, or a prefix with ``row_cap`` cells or more
        (a capped scan may cut its row)."""
        listed = prefixes if type(prefixes) is list else list(prefixes)
        main, fresh_filter, trees = self.query_probe(txn)
        probe = self.probe.keys(listed, main, fresh_filter, trees)
        if probe is None:
            return None
        keys, asked = probe
        found = txn.cursor(self.index).getmulti(keys) if keys else []
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        if fresh is not None and asked:
            found += txn.cursor(fresh).getmulti(asked)
        counted = self.probe.nums(listed, found, row_cap, trees)
        if counted is None:
            return None
        get, names = txn.get, self.names
        docs: list[tuple[str, int]] = []
        cells = 0
        for num, count in zip(*counted):
            name = get(num, db=names)
            if name is not None:  # else not committed, or its document removed
                docs.append((decode_id(name[8:]), int.from_bytes(name[:8], "big")))
                cells += count
        return docs, cells

    def _kept(
        self, txn: Txn, tier: bytes, head: bytes | None, mine: tuple[bytes, PrefixFilter] | None
    ) -> tuple[bytes, PrefixFilter] | None:
        """A tier's filter as of ``head`` (None: it has none): the copy held if
        the same commit wrote it (this reader's, or this process's last commit's:
        a writer that queries between its batches reads nothing back), else read.
        A writer marks its copy in place for its next batch: bits set early only
        cost a bucket read, never a cell."""
        if head is None:
            return None
        if mine is not None and mine[0] == head:
            return mine
        written = self.mine
        if written is not None and written[0] == tier and written[1] == head:
            return head, written[2]
        return head, self._read_bits(txn, tier, head)

    def filters(self, txn: Txn) -> TierFilters:
        """The :class:`TierFilters` of ``txn``'s snapshot: one pass over each tier
        (warm() of a file without persisted filters)."""
        state = self.state(txn)
        fresh = self.tier(txn)
        held = state.get("fresh", 0) if fresh is not None else 0
        return TierFilters(
            txn.id(),
            self._filter(
                txn, b"index", filter_shift(state["cells"] - held, TIER_FILTER_BITS[b"index"])
            ),
            None if fresh is None else self._filter(txn, FRESH, self.shift_for(state, FRESH)),
        )

    def _filter(self, txn: Txn, tier: bytes, shift: int) -> PrefixFilter:
        """The :class:`PrefixFilter` of ``tier``'s cells, of 2^(64 - ``shift``) bits."""
        held = PrefixFilter.empty(shift)
        items = iter(txn.cursor(self.tier(txn) if tier == FRESH else self.index))
        while chunk := list(islice(items, _MARK_CHUNK)):
            self.probe.mark(held.bits, held.shift, chunk)
        return held

    def scan_wide(
        self, txn: Txn, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> list[IndexCell]:
        """:meth:`scan` of one long list of prefixes (a batch's lookups): each
        distinct bucket read once per tier (two multi-gets), cells matched to
        their prefixes (:func:`_matched`), and one multi-get of the names rows
        of the cells matched. A cell whose number is not a document's
        (:data:`MAX_DOCUMENTS`: a hot row's mark, :data:`SPILLED`) leaves its
        prefix wholly to :meth:`scan` (with ``row_cap``)."""
        want = np.frombuffer(b"".join(prefixes), dtype=codec.PREFIX_DTYPE)
        field = want["field"].astype(np.uint64)
        bucket = want["flag"].astype(np.uint64) << np.uint64(16) | field >> np.uint64(16)
        buckets = _distinct(bucket)
        keys = (buckets << np.uint64(8)).astype(">u4").view(np.uint8).reshape(-1, 4)[:, :3]
        asked = np.ascontiguousarray(keys).view("V3").reshape(-1).tolist()
        fresh = self.fresh if self.fresh is not None else self.tier(txn)
        tiers = [txn.cursor(db).getmulti(asked) for db in (self.index, fresh) if db is not None]
        which, nums = _matched(tiers, bucket << np.uint64(16) | field & np.uint64(0xFFFF))
        if not len(which):
            return []
        odd = np.isin(which, which[nums == MAX_DOCUMENTS])  # a marked prefix: scan's
        named = np.unique(nums[~odd])
        rows = dict(txn.cursor(self.names).getmulti(named.astype(">u4").view("V4").tolist()))
        # Each cell's names row (None: not committed, or its document removed), then
        # its cell, by C-level maps: no Python call per candidate (~2 a lookup at 10 M).
        names = list(map(rows.get, nums[~odd].astype(">u4").view("V4").tolist()))
        held = list(filter(None, names))  # a names row is never empty (fingerprint first)
        heads = map(prefixes.__getitem__, compress(which[~odd].tolist(), names))
        result: list[IndexCell] = list(
            zip(
                map(bytes.__add__, heads, map(itemgetter(slice(0, 8)), held)),
                map(bytes.decode, map(itemgetter(slice(8, None)), held), _UTF8, _ESCAPE),
            )
        )
        for p in dict.fromkeys(which[odd].tolist()):
            (more,) = self.scan(txn, [[prefixes[p]]], row_cap)
            result += more
        return result

    def _spilled(
        self,
        txn: Txn,
        head: bytes,
        prefix: bytes,
        row_cap: int | None,
        held: dict[bytes, tuple[bytes, str] | None],
    ) -> list[IndexCell]:
        """The visible cells of a spilled lead (keys ``head`` + fingerprint + id),
        each row's first ``row_cap`` of them (its smallest ids)."""
        cursor = txn.cursor(self.hot_rows())
        cells: list[IndexCell] = []
        found = cursor.set_range(head)
        row, taken = b"", 0
        while found:
            key = cursor.key()
            if not key.startswith(head):
                break
            fp = key[_HEAD_BYTES : _HEAD_BYTES + 8]
            if fp != row:
                row, taken = fp, 0
            elif row_cap is not None and taken >= row_cap:  # the rest of a hot row
                found = cursor.set_range(codec.prefix_stop(key[: _HEAD_BYTES + 8]))
                continue
            num = cursor.value()
            if num not in held:
                name = txn.get(num, db=self.names)
                held[num] = None if name is None else (name[:8], decode_id(name[8:]))
            visible = held[num]
            if visible is not None:
                cells.append((prefix + visible[0], visible[1]))
                taken += 1
            found = cursor.next()
        return cells

    def row_size(self, txn: Txn, row: bytes) -> int:
        """Cells held in an index row: its bucket cells, and its spilled keys
        counted by walking them undecoded (as format 1 counts a row)."""
        prefix, fp = row[: codec.PREFIX_BYTES], row[codec.PREFIX_BYTES :]
        bucket, lead = prefix[4:5] + prefix[0:2], prefix[2:4]
        packed = self.buckets(txn, [bucket]).get(bucket, b"")
        count = 0
        for pos in find_cells(packed, lead):
            name = txn.get(packed[pos + 2 : pos + 6], db=self.names)
            count += name is not None and name[:8] == fp
        head = bucket + lead + fp
        hot = self.hot_rows()
        if hot is None:
            return count
        cursor = txn.cursor(hot)
        if cursor.set_range(head):
            for key in cursor.iternext(keys=True, values=False):
                if not key.startswith(head):
                    break
                count += 1
        return count

    def iter_index(self, txn: Txn) -> Iterator[IndexCell]:
        get_name = txn.cursor(self.names).get
        fresh = self.tier()
        tiers = [txn.cursor(self.index)] + ([] if fresh is None else [txn.cursor(fresh)])
        for bucket, packed in heapq.merge(*tiers, key=itemgetter(0)):
            if len(bucket) != 3 or len(packed) % CELL_BYTES:
                raise StoreCorrupt(
                    f"the embedded index at {self.h.path} holds an index entry of "
                    f"{len(bucket)}+{len(packed)} bytes; {self.h.rebuild}"
                )
            for pos in range(0, len(packed), CELL_BYTES):
                name = get_name(packed[pos + 2 : pos + 6])
                if name is not None:
                    row = bucket[1:3] + packed[pos : pos + 2] + bucket[0:1] + name[:8]
                    yield row, decode_id(name[8:])
        hot = self.hot_rows()
        for key, num in [] if hot is None else txn.cursor(hot):
            if len(key) <= _HEAD_BYTES + 8 or len(num) != _NUM.size:
                raise StoreCorrupt(
                    f"the embedded index at {self.h.path} holds a hot-row entry of "
                    f"{len(key)}+{len(num)} bytes; {self.h.rebuild}"
                )
            name = get_name(num)
            if name is not None:
                yield key[1:5] + key[0:1] + name[:8], decode_id(name[8:])

    def iter_docs(self, txn: Txn) -> Iterator[tuple[bytes, Document | StoreCorrupt]]:
        for key, value in txn.cursor(self.docs):
            if len(value) == _NUM.size or not self.committed(txn, value):
                continue  # an id numbered by its cells alone, or a row not committed
            try:
                yield key, self.doc_from(key, value)
            except StoreCorrupt as exc:
                yield key, exc

    def counts(self, txn: Txn) -> tuple[int, int]:
        state = self.state(txn)
        return state["documents"], state["cells"]


def _held_id(value: bytes) -> bytes | None:
    """The full id a folded docs row holds (None if damaged)."""
    pos = _HEAD.size
    while pos + 5 <= len(value):
        name_len, value_len = struct.unpack_from(">BI", value, pos)
        pos += 5
        if value[pos : pos + name_len] == _ID_COLUMN:
            return value[pos + name_len : pos + name_len + value_len]
        pos += name_len + value_len
    return None
