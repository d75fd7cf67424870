"""A batch of the compact format (:class:`CompactBatch`) and its commit protocol
(:class:`_Commit`): the cells of new documents in parts, then names, docs and every
other change in one last commit, which is what readers see change at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any, cast

import numpy as np

from simhash_hbase.records import Document
from simhash_hbase.store.base import CellBlock, CellsOf, IndexCell
from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.buckets import _append_cells, _check_room, _holds, _remove_cells
from simhash_hbase.store.lmdb.cells import (
    _BARE,
    _NUM,
    CELL_BYTES,
    FRESH,
    Buckets,
    Txn,
    bare_rows,
    cell_rows,
    grouped,
    spilled_leads,
)
from simhash_hbase.store.lmdb.filters import PrefixFilter
from simhash_hbase.store.lmdb.merge import merge_fresh
from simhash_hbase.store.lmdb.tables import Tables
from simhash_hbase.store.lmdb.times import retime, untime


class CompactBatch:
    """One batch: mutations are recorded, then written by :meth:`commit`."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self._ops: list[tuple[str, Any]] = []
        self.prewritten: dict[bytes, bytes] = {}  # docs rows written ahead of the last commit
        # The docs rows (None: none) this batch saw; a different row at its commit
        # was written by another process meanwhile (see _Commit.run).
        self._observed: dict[bytes, bytes | None] = {}

    # -- protocol (recording) -------------------------------------------------
    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        raws = {doc_id.encode("utf-8", "surrogateescape"): doc_id for doc_id in doc_ids}
        with self._t.env.begin() as txn:
            found = self._t.lookup(txn, raws)
        self._observed.update(dict.fromkeys(raws))
        self._observed.update(found)
        return self._t.docs_of(found, raws)

    def claim_docs(
        self, intents: Mapping[str, Document | None], cells_of: CellsOf
    ) -> dict[str, Document]:
        """The rows read are the rows observed: a row another process changed by the
        commit is handled there (see :class:`_Commit`), in the one write transaction."""
        return self.get_docs(list(intents))

    def put_index(self, cells: Iterable[IndexCell]) -> None:
        self._cells("put", cells)

    def delete_index(self, cells: Iterable[IndexCell]) -> None:
        self._cells("delete", cells)

    def _cells(self, op: str, cells: Iterable[IndexCell]) -> None:
        """Record cells as (an (n, c) row-key array, the n raw ids): a
        :class:`CellBlock` (a document's cells a row) with no tuple per cell."""
        if isinstance(cells, CellBlock):
            rows, ids = cells.rows, list(cells.doc_ids)
            if rows.ndim == 1:
                rows = rows.reshape(len(ids), -1)
        else:
            listed = list(cells)
            rows, ids = cell_rows(listed).reshape(-1, 1), [doc_id for _, doc_id in listed]
        if ids:
            self._ops.append((op, (rows, [i.encode("utf-8", "surrogateescape") for i in ids])))

    def put_docs(self, docs: Iterable[Document]) -> None:
        # The last one wins; ids were checked by the index (surrogates: a damaged id read back).
        latest = {doc.doc_id.encode("utf-8", "surrogateescape"): doc for doc in docs}
        if latest:
            self._ops.append(("docs", latest))

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        raws = [doc_id.encode("utf-8", "surrogateescape") for doc_id in doc_ids]
        if raws:
            self._ops.append(("undocs", raws))

    # -- writing --------------------------------------------------------------
    def commit(self) -> None:
        """New documents' cells in parts, then everything else in one commit."""
        fresh = self._fresh()
        nums: dict[bytes, int] = {}
        written: Buckets = ([], [])
        if fresh:
            nums = self._reserve(fresh)
            written = self._write_fresh(nums)
        with self._t.env.begin(write=True) as txn:
            commit = _Commit(self._t, txn, nums, written, self.prewritten)
            commit.run(self._ops, self._observed)
        self._t.mine = commit.saved  # committed: the file holds that filter now
        merge_fresh(self._t)

    def _fresh(self) -> list[bytes]:
        """Ids whose cells can go ahead of the last commit: ids put with many cells
        that have no docs row and that no other op of the batch touches."""
        puts = [arg[1] for op, arg in self._ops if op == "put"]
        if sum(map(len, puts)) < tuning.PART_MIN_CELLS or self._parts() < 2:
            return []
        touched = {raw for op, arg in self._ops if op == "delete" for raw in arg[1]}
        touched.update(raw for op, arg in self._ops if op == "undocs" for raw in arg)
        candidates = list(dict.fromkeys(raw for raws in puts for raw in raws))
        if touched:
            candidates = [raw for raw in candidates if raw not in touched]
        unknown = [raw for raw in candidates if raw not in self._observed]
        if unknown:  # rows get_docs did not look for
            with self._t.env.begin() as txn:
                found = self._t.lookup(txn, unknown)
            self._observed.update(dict.fromkeys(unknown))
            self._observed.update(found)
        return [raw for raw in candidates if self._observed[raw] is None]

    def _parts(self) -> int:
        """How many commits a batch's new cells take: more as the index grows."""
        with self._t.env.begin() as txn:
            state = self._t.state(txn)
        cells = state["cells"] if self._t.fresh is None else state.get("fresh", 0)
        return int(min(tuning.MAX_PARTS, cells * (CELL_BYTES + 1) // tuning.PART_BYTES))

    def _reserve(self, fresh: list[bytes]) -> dict[bytes, int]:
        with self._t.env.begin(write=True) as txn:
            state = self._t.state(txn)
            start = state["next"]
            _check_room(self._t, start, len(fresh))
            state["next"] = start + len(fresh)
            self._t.put_state(txn, state)
        return dict(zip(fresh, range(start, start + len(fresh))))

    def _write_fresh(self, nums: dict[bytes, int]) -> Buckets:
        """The cells of the reserved numbers, in :meth:`_parts` commits: the keys
        of the buckets written and their packed cells."""
        blocks = []
        for i, (op, arg) in enumerate(self._ops):
            if op != "put":
                continue
            rows, raws = arg
            count = sum(map(nums.__contains__, raws))
            if count == len(raws):  # the common case: a block of new documents
                blocks.append((rows, raws))
                self._ops[i] = ("put", (rows[:0], []))
            elif count:
                mine = [raw in nums for raw in raws]
                picked = np.array(mine)
                blocks.append((rows[picked], [raw for raw, m in zip(raws, mine) if m]))
                rest = [raw for raw, m in zip(raws, mine) if not m]
                self._ops[i] = ("put", (rows[~picked], rest))
        rows = np.concatenate([r.reshape(-1) for r, _ in blocks])
        per_cell = np.concatenate(
            [
                np.repeat(
                    np.fromiter(map(nums.__getitem__, raws), dtype=np.uint32, count=len(raws)),
                    r.shape[1],
                )
                for r, raws in blocks
            ]
        )
        keys, packed = grouped(rows.reshape(-1, 1), per_cell)
        parts = self._parts()
        step = -(-len(keys) // parts)
        for at in range(0, len(keys), step):
            part = slice(at, at + step)
            with self._t.env.begin(write=True) as txn:
                tier = self._t.new_cells_tier()
                dropped, moved = _append_cells(self._t, txn, tier, keys[part], packed[part])
                if dropped or moved:  # hot leads spilled: the counts, in the same commit
                    state = self._t.state(txn)
                    state["cells"] -= dropped
                    if tier is self._t.fresh:
                        state["fresh"] = state.get("fresh", 0) - moved
                    self._t.put_state(txn, state)
        self._write_fresh_docs(nums, parts)
        return keys, packed

    def _write_fresh_docs(self, nums: dict[bytes, int], parts: int) -> None:
        """The docs rows of reserved numbers (bare ones: number and fingerprint), in
        parts by id; they count once their names rows exist (the last commit)."""
        latest: dict[bytes, Document] = {}
        for op, arg in self._ops:
            if op == "docs":
                latest.update(arg)
        raws = sorted(raw for raw in latest if raw in nums)
        if not raws or max(map(len, raws)) >= self._t.h.max_key:
            return
        values = bare_rows([nums[raw] for raw in raws], [latest[raw] for raw in raws])
        if values is None:
            return
        step = -(-len(raws) // parts)
        for at in range(0, len(raws), step):
            with self._t.env.begin(write=True) as txn:
                chunk = dict(zip(raws[at : at + step], values[at : at + step]))
                for raw in self._t.lookup(txn, chunk):  # written by another process since
                    del chunk[raw]  # the last commit replaces it (see _Commit.run)
                txn.cursor(self._t.docs).putmulti(chunk.items())
            self.prewritten.update(chunk)


class _Commit:
    """The last commit of a batch: its ops in order, in one write transaction."""

    def __init__(
        self,
        tables: Tables,
        txn: Txn,
        reserved: dict[bytes, int],
        written: Buckets,
        prewritten: dict[bytes, bytes],
    ) -> None:
        self._prewritten = prewritten
        # (bucket key, packed cells) put in the tier of new cells, by this batch:
        # their bits go in its filter at this commit, where they become visible.
        self._added = written
        self.saved: tuple[bytes, bytes, PrefixFilter] | None = None  # see Tables.mine
        self._t = tables
        self._txn = txn
        self._h = tables.h
        self._state = tables.state(txn)
        count = sum(map(len, written[1])) // CELL_BYTES
        self._state["cells"] += count  # the reserved numbers' cells, visible from here
        self._fresh_cells(count)
        self._reserved = reserved
        self._nums: dict[bytes, int] = {}
        self._documented: set[bytes] = set()  # ids given a docs row in this commit
        self._docs_ids: set[bytes] = set()  # ids the commit's ops give a docs row
        self._first_new = self._state["next"]  # numbers from here on have no cells held yet
        self._rows: dict[bytes, bytes | None] = {}  # raw id -> its docs row now (None: none)
        self._named: dict[int, tuple[int, bytes]] = {}  # number -> (fp, raw id) to write

    def _fresh_cells(self, count: int) -> None:
        if self._t.fresh is not None:
            self._state["fresh"] = self._state.get("fresh", 0) + count

    def run(self, ops: list[tuple[str, Any]], observed: dict[bytes, bytes | None]) -> None:
        """``observed``: the docs rows the batch read before this commit began."""
        written: set[bytes] = set()
        for op, arg in ops:
            if op in ("put", "docs"):
                written.update(arg[1] if op == "put" else arg)
            if op == "docs":
                self._docs_ids.update(arg)
        seen = written.intersection(observed)
        self._rows.update(zip(seen, map(observed.__getitem__, seen)))
        for raw, current in self._t.lookup(self._txn, seen).items():
            if current != observed[raw]:
                # Another process wrote this id since the batch read it: the
                # batch's version replaces it, under a new number.
                self._unname(_NUM.unpack_from(current)[0])
                if self._t.times is not None:
                    untime(self._t, self._txn, [current])
                self._rows[raw] = None
                self._prewritten.pop(raw, None)  # theirs replaced ours: write it again
        self._nums.update(self._reserved)
        for op, arg in ops:
            getattr(self, "_" + op)(arg)
        self._finish()

    def _row(self, raws: Iterable[bytes]) -> None:
        missing = [raw for raw in dict.fromkeys(raws) if raw not in self._rows]
        if missing:
            self._rows.update(dict.fromkeys(missing))
            self._rows.update(self._t.lookup(self._txn, missing))

    def _number(self, raws: Sequence[bytes], create: bool) -> list[int | None]:
        """The numbers of ``raws`` (None: none, unless ``create`` gives one)."""
        pending = [raw for raw in dict.fromkeys(raws) if raw not in self._nums]
        if pending:
            self._row(pending)
            held = [raw for raw in pending if self._rows[raw]]
            heads = b"".join([self._rows[raw][:4] for raw in held])  # type: ignore[index]
            self._nums.update(zip(held, np.frombuffer(heads, dtype=">u4").tolist()))
            new = [raw for raw in pending if raw not in self._nums]
            if create and new:
                start = self._state["next"]
                _check_room(self._t, start, len(new))
                self._state["next"] = start + len(new)
                self._nums.update(zip(new, range(start, start + len(new))))
        return list(map(self._nums.get, raws))

    def _put(self, arg: tuple[np.ndarray, list[bytes]]) -> None:
        rows, raws = arg
        if not raws:
            return
        numbered = self._number(raws, create=True)
        nums = np.array(numbered, dtype=np.uint32)
        # An id without a document gets the fingerprint of its cells in its names
        # row; a document's names row carries its own, whatever a cell says.
        if not self._docs_ids.issuperset(raws):
            fps = rows[:, 0]["fp"].astype(np.uint64).tolist()
            for raw, num, fp in zip(raws, numbered, fps):
                row = self._rows.get(raw)
                if (row is None or len(row) == _NUM.size) and raw not in self._docs_ids:
                    self._named.setdefault(num, (fp, raw))  # type: ignore[arg-type]
        self._state["cells"] += self._put_new(rows, nums)

    def _put_new(self, rows: np.ndarray, nums: np.ndarray) -> int:
        """Cells of numbers given in this commit are appended unchecked; the others
        are added where their bucket does not hold them yet. All go to the tier of
        new cells (the index changes only by merges, bulk loads and removals, so
        that its filter is rewritten only then). The cells added."""
        new = nums >= self._first_new
        added = 0
        tier = self._t.new_cells_tier()
        if new.any():
            keys, packed = grouped(rows[new], nums[new])
            dropped, moved = _append_cells(self._t, self._txn, tier, keys, packed)
            self._added[0].extend(keys)
            self._added[1].extend(packed)
            appended = int(new.sum()) * rows.shape[1]
            added += appended - dropped
            self._fresh_cells(appended - moved)
        if new.all():
            return added
        keys, packed = grouped(rows[~new], nums[~new])
        found = self._t.buckets(self._txn, keys)
        for key, cells in zip(keys, packed):
            both = found.get(key, b"")
            new = [cells[i : i + CELL_BYTES] for i in range(0, len(cells), CELL_BYTES)]
            spilled = spilled_leads(both)
            extra = b"".join(
                c
                for c in dict.fromkeys(new)
                if not _holds(both, c) and not (c[:2] in spilled and self._spilled_holds(key, c))
            )
            if extra:
                self._txn.put(key, (self._txn.get(key, db=tier) or b"") + extra, db=tier)
                self._added[0].append(key)
                self._added[1].append(extra)
                added += len(extra) // CELL_BYTES
                self._fresh_cells(len(extra) // CELL_BYTES)
        return added

    def _delete(self, arg: tuple[np.ndarray, list[bytes]]) -> None:
        """Every cell of ``arg`` (row keys, one raw id a row) whose id is numbered,
        out of both tiers and the hot rows: a bulk removal's Python work is per
        batch, not per cell (:func:`_remove_cells`)."""
        rows, raws = arg
        self._number(raws, create=False)
        nums = np.fromiter(map(self._nums.get, raws, repeat(-1)), dtype=np.int64, count=len(raws))
        held = nums >= 0
        if not held.any():
            return
        keys, packed = grouped(rows[held], nums[held].astype(np.uint32))
        spilled: dict[bytes, set[bytes]] = {}
        removed = _remove_cells(self._txn, self._t.index, keys, packed, spilled)
        if self._t.fresh is not None:
            from_fresh = _remove_cells(self._txn, self._t.fresh, keys, packed, spilled)
            self._state["fresh"] = self._state.get("fresh", 0) - from_fresh
            removed += from_fresh
        if spilled:  # a hot lead's cells may be held under keys of their own
            wanted = dict(zip(keys, packed))
            for key, leads in spilled.items():
                cells = wanted[key]
                for at in range(0, len(cells), CELL_BYTES):
                    if cells[at : at + 2] in leads:
                        removed += self._unspill(key, cells[at : at + CELL_BYTES])
        self._state["cells"] -= removed

    def _spilled_key(self, bucket: bytes, cell: bytes) -> bytes | None:
        """The key ``cell`` (lead, number) has if its lead is spilled (None: its
        number has no names row)."""
        name = self._txn.get(cell[2:], db=self._t.names)
        return None if name is None else bucket + cell[:2] + name

    def _spilled_holds(self, bucket: bytes, cell: bytes) -> bool:
        key = self._spilled_key(bucket, cell)
        hot = self._t.hot_rows()
        return key is not None and hot is not None and self._txn.get(key, db=hot) == cell[2:]

    def _unspill(self, bucket: bytes, cell: bytes) -> int:
        """Delete a cell held under a spilled lead; 1 if it was there."""
        if not self._spilled_holds(bucket, cell):
            return 0
        key = self._spilled_key(bucket, cell)
        return int(self._txn.delete(key, db=self._t.hot_rows()))

    def _docs(self, latest: dict[bytes, Document]) -> None:
        short = max(map(len, latest)) < self._h.max_key  # keys are the ids themselves
        raws = sorted(latest) if short else sorted(latest, key=self._h.fold)
        fps = [latest[raw].fingerprint for raw in raws]
        nums = self._number(raws, create=True)
        self._named.update(zip(nums, zip(fps, raws)))  # type: ignore[arg-type]
        docs = [latest[raw] for raw in raws]
        bare = bare_rows(cast(list[int], nums), docs) if short else None  # create: all numbered
        if bare is not None:  # number, fingerprint (and time) only: one NumPy pass
            keys, values = raws, bare
        else:
            keys = [self._h.fold(raw) for raw in raws]
            values = [
                self._t.doc_value(num, latest[raw], raw, key)  # type: ignore[arg-type]
                for raw, num, key in zip(raws, nums, keys)
            ]
        self._row(raws)
        if self._t.times is not None:
            olds = list(map(self._rows.__getitem__, raws))
            retime(self._t, self._txn, olds, nums, docs)  # type: ignore[arg-type]
        held = [row for row in map(self._rows.__getitem__, raws) if row is not None]
        self._state["documents"] += len(raws) - sum(len(row) != _NUM.size for row in held)
        self._rows.update(zip(raws, values))
        self._documented.update(raws)
        items = list(zip(keys, values))
        if self._prewritten:  # rows written ahead in parts, unchanged since: done
            items = [(k, v) for k, v in items if self._prewritten.get(k) != v]
        if items:
            cursor = self._txn.cursor(self._t.docs)
            append = not cursor.last() or bytes(cursor.key()) < items[0][0]
            cursor.putmulti(items, append=append)

    def _undocs(self, raws: list[bytes]) -> None:
        """Docs rows and their numbers' names rows deleted (the cells of a number
        without a names row vanish): a few C calls a document, no Python one."""
        self._row(raws)
        gone = [raw for raw in dict.fromkeys(raws) if self._rows[raw] is not None]
        if not gone:
            return
        rows = cast(list[bytes], list(map(self._rows.__getitem__, gone)))
        if self._t.times is not None:
            untime(self._t, self._txn, rows)
        names = [row[:4] for row in rows]
        if self._named:  # numbers given in this commit
            for name in names:
                self._named.pop(_NUM.unpack(name)[0], None)
        delete = self._txn.delete
        short = max(map(len, gone)) < self._h.max_key  # keys are the ids themselves
        for key in gone if short else map(self._h.fold, gone):
            delete(key, db=self._t.docs)
        for name in names:
            delete(name, db=self._t.names)
        self._state["documents"] -= len(rows) - list(map(len, rows)).count(_NUM.size)
        self._rows.update(dict.fromkeys(gone))
        for raw in gone:
            self._nums.pop(raw, None)

    def _unname(self, num: int) -> None:
        self._named.pop(num, None)
        self._txn.delete(_NUM.pack(num), db=self._t.names)

    def _finish(self) -> None:
        """Names rows (the commit record of the batch's cells), number-only docs rows
        of ids that got cells but no document, the store's record, the filter of
        the tier the cells went to."""
        if self._named:
            nums = sorted(self._named)
            fps, raws = zip(*map(self._named.__getitem__, nums))
            heads = np.empty(len(nums), dtype=_BARE)
            heads["num"] = nums
            heads["fp"] = np.array(fps, dtype=np.uint64)
            buf = heads.tobytes()
            keys = [buf[i : i + 4] for i in range(0, len(buf), _BARE.itemsize)]
            values = [buf[i + 4 : i + 12] + raw for i, raw in zip(range(0, len(buf), 12), raws)]
            cursor = self._txn.cursor(self._t.names)
            append = not cursor.last() or bytes(cursor.key()) < keys[0]
            cursor.putmulti(zip(keys, values), append=append)
            for raw in set(raws) - self._documented:
                if self._rows.get(raw) is None:  # cells but no document: number the id
                    num = self._nums[raw]
                    self._txn.put(self._h.fold(raw), _NUM.pack(num), db=self._t.docs)
            self._state["next"] = max(self._state["next"], nums[-1] + 1)
        self._t.put_state(self._txn, self._state)
        tier = FRESH if self._t.new_cells_tier() is self._t.fresh else b"index"
        self.saved = self._t.add_to_filter(self._txn, tier, self._added)
