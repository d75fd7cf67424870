"""The writing half of an index: batches of documents (with the lookups a write
decides by), check-and-add, removals, raw cell edits and bulk loads.

Order matters for crash safety: stale cells go first, then new cells, then the
docs row, so a docs row never points at cells that are not there (or, where the
index follows the docs, the docs row first: :attr:`Store.index_follows_docs`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import islice
from operator import attrgetter
from typing import TypeVar

import numpy as np

from simhash_hbase.errors import BatchRefused, InvalidInput, ShdbError, StoreError
from simhash_hbase.faults import fault
from simhash_hbase.index.clusters import assign, kept
from simhash_hbase.index.lookup import Finder, match_order
from simhash_hbase.index.manifest import MANIFEST
from simhash_hbase.layout import codec
from simhash_hbase.layout.nets import band_rows, pigeonhole_rows
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import Document, Lookup, Matches, Written, check_limit, now_ms
from simhash_hbase.store import CellBlock, IndexCell, Store

BULK_BATCH = 500_000  # documents a bulk load reads and spills at a time
#: Ids a batch of :meth:`Writer.remove_many` (one read of their docs rows, one write).
#: As many as an ingest batch of fingerprints: on the embedded store a batch costs
#: about one edit per bucket it touches, and there are at most 65,536 buckets a flag,
#: so 10,000 ids (~100,000 cells) a batch rewrote most buckets each time (0.33-0.41x
#: ingest's rate at 1 M documents; 200,000: above 1x, docs/lifecycle.md).
REMOVE_BATCH = 200_000
_FINGERPRINT = attrgetter("fingerprint")
#: A retained index's write also removes up to this many expired documents (or twice
#: the documents it wrote, if more), so a steady stream's expiry keeps up with it.
EXPIRE_MIN = 1_000
#: Sections a batch takes before it gives up, each lost before its write: every loss
#: is a stall of the writer longer than the section's lease (docs/SPEC.md).
RETAKES = 5
_Decision = TypeVar("_Decision")
_Done = TypeVar("_Done")


def reported(
    pairs: Sequence[tuple[Document, object]], found: Sequence[Matches | None]
) -> list[Lookup]:
    """What a batch reports: its documents with near-copies (not those re-added unchanged)."""
    return [Lookup(d.doc_id, m) for (d, _), m in zip(pairs, found) if m is not None and m.total]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold CPython's cyclic collector during one batch. A batch makes millions of
    container objects (documents, tuples of cells, lookups) that all live until it
    ends, so the collector promotes them and walks them all, again and again: at
    10 M documents ~11 full collections a batch, 28 % of a plain ingest's CPU time
    and ~25 % of a streaming dedup's (docs/embedded.md). Reference counting frees
    them as usual; cycles made meanwhile are collected by the first collection after
    the batch (the collector's counts run on). A no-op where the collector is off
    (the caller's choice, or an enclosing batch's pause)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Writer:
    """What :class:`~simhash_hbase.index.client.SimhashIndex` writes, under its
    scheme; lookups go through the index's :class:`Finder`. The store is passed
    on each call, as to the finder."""

    def __init__(self, scheme: Scheme, finder: Finder) -> None:
        self.scheme = scheme
        self.finder = finder

    def add_documents(
        self,
        store: Store,
        docs: Sequence[Document],
        find_k: int | None = None,
        probes: Sequence[Sequence[int]] | None = None,
        checked: bool = False,
        limit: int | None = None,
        before_write: Callable[[list[Lookup]], None] | None = None,
        tally: Written | None = None,
    ) -> list[Lookup]:
        """:meth:`SimhashIndex.add_documents`: the new documents' near-copies
        (with ``find_k``; :meth:`Finder.find_at_insert`), then the write.

        ``before_write`` gets the near-duplicates found before anything is written:
        an ingest saves them durably there, so that a stop between the write and
        the report never loses them (see :mod:`simhash_hbase.jobs.ingest`).
        ``tally`` counts the documents added, replaced and held unchanged (a re-run
        does not call what the index held already new).

        ``probes``, one list per document (its fingerprint first, see
        :mod:`simhash_hbase.fingerprint.probes`), makes that lookup a probed one.
        Every document must be valid (see :func:`codec.check_document`); ``checked``
        says the caller has checked each already (the ingest jobs do, per record),
        so they are not checked twice. The lookups and the write are one
        :meth:`Store.write_section`."""
        if not checked:
            for doc in docs:
                codec.check_document(doc)
        docs = self._stamped(docs)
        if probes is not None and (
            len(probes) != len(docs)
            or any(not p or p[0] != d.fingerprint for d, p in zip(docs, probes))
        ):
            raise InvalidInput("each document needs its probe list, its own fingerprint first")
        check_limit(limit)
        lists = probes or [[d.fingerprint] for d in docs]
        last = {d.doc_id: p for d, p in zip(docs, lists)}
        pairs = [(d, last[d.doc_id]) for d in {d.doc_id: d for d in docs}.values()]  # last wins

        def decide() -> tuple[list[Matches | None], dict[str, Document]]:
            if find_k is None:
                return [], {d.doc_id: d for d, _ in pairs}
            found, clustered = self.finder.find_at_insert(store, pairs, find_k, limit)
            return found, {d.doc_id: d for d in clustered}

        def commit(decision: tuple[list[Matches | None], dict[str, Document]]) -> Written:
            if before_write is not None:
                before_write(reported(pairs, decision[0]))
            return self.write(store, decision[1])

        with gc_paused():
            (found, _), written, kept = self._decided(store, decide, commit)
            if not kept and find_k is not None:
                found = self._missed(store, pairs, find_k, limit, found)
                if before_write is not None:  # the pairs it adds, durable before reported
                    before_write(reported(pairs, found))
        if tally is not None:
            tally.add(written)
        self._expire_some(store, len(docs))
        return reported(pairs, found)

    def check_and_add(
        self,
        store: Store,
        docs: Sequence[Document],
        k: int,
        probes: Sequence[Sequence[int]] | None,
        always: bool | Sequence[bool],
        limit: int | None,
    ) -> list[Matches]:
        """:meth:`SimhashIndex.check_and_add`. Every document is checked first: a
        bad one raises :class:`BatchRefused` naming each, and nothing is written.

        Near-copies are found as ingest finds them (:meth:`Finder.lookups`): among
        the held documents and the documents of this call before it that are
        written. Unlike ingest, a document's own held version counts: a
        re-submitted document (same id and text) is a near-copy of itself, so it is
        not new. Of many identical submissions exactly one is new, however they
        overlap: the lookups and the write are one section (:meth:`_add_exclusively`)."""
        refused: dict[int, ShdbError] = {}
        for n, doc in enumerate(docs):
            try:
                codec.check_document(doc)
            except InvalidInput as exc:
                refused[n] = exc
        if refused:
            raise BatchRefused(refused, len(docs))
        check_limit(limit)
        lists = [list(p) for p in probes] if probes is not None else [[d.fingerprint] for d in docs]
        every = [always] * len(docs) if isinstance(always, bool) else list(always)
        if len(lists) != len(docs) or len(every) != len(docs):
            raise InvalidInput("give one probe list and always flag per document")
        if not docs:
            return []
        found = self._add_exclusively(store, list(zip(docs, lists)), k, limit, every)
        return [m if m is not None else Matches() for m in found]

    def _add_exclusively(
        self,
        store: Store,
        pairs: list[tuple[Document, Sequence[int]]],
        k: int,
        limit: int | None,
        every: list[bool],
    ) -> list[Matches | None]:
        """Documents looked up and written in one :meth:`Store.write_section`
        (every writer of the index, a ``shdb serve`` replica or an ingest, takes
        it): of identical documents submitted anywhere at once exactly one is new,
        and the others find it (a writer that lost its section first: :meth:`_decided`)."""

        def decide() -> tuple[list[Matches | None], list[Document]]:
            found, written = self.finder.lookups(store, pairs, k, limit, keep=every)
            clustered = assign(store, [doc for doc, _ in pairs], found)
            return found, [clustered[i] for i in written]

        def commit(decision: tuple[list[Matches | None], list[Document]]) -> None:
            if decision[1]:
                self.write(store, {d.doc_id: d for d in self._stamped(decision[1])})

        (found, _), _, kept = self._decided(store, decide, commit)
        self._expire_some(store, len(pairs))
        return found if kept else self._missed(store, pairs, k, limit, found)

    def _decided(
        self, store: Store, decide: Callable[[], _Decision], commit: Callable[[_Decision], _Done]
    ) -> tuple[_Decision, _Done, bool]:
        """``decide`` (a batch's lookups) then ``commit`` (the write they decide) in
        one write section, after checking the index is still there; and whether the
        section was still this writer's alone when the write ended (:meth:`Section.kept`).

        A writer stalled past its section's lease (HBase) may find that another took
        the section meanwhile, and wrote what this one's lookups did not see: if so
        before its write, it writes nothing and decides again in a new section, which
        sees the other's documents (so the pairs and the answers are one writer's).
        If the section was lost during the write itself, the caller adds what the
        others committed meanwhile (:meth:`_missed`). docs/SPEC.md, "Concurrent writers"."""
        for _ in range(RETAKES):
            with store.write_section() as section:
                if store.get_meta(MANIFEST) is None:  # SimhashIndex.discard, by its creator
                    raise StoreError(
                        f"the index at {store.url} was discarded as this run wrote: the run "
                        "that created it added nothing; run this one again, which creates it anew"
                    )
                decision = decide()
                fault("looked-up")  # a test's writer stalled here, inside its section
                if section.kept():
                    done = commit(decision)
                    return decision, done, section.kept()
        raise StoreError(
            f"the write section of {store.url} was taken from this writer {RETAKES} times in "
            "a row: each time it stalled longer than the section's lease (a pause, a frozen "
            "VM, a network stall) between its lookups and its write; nothing was written: "
            "run it again, or give the URL a longer lease=SECONDS"
        )

    def _missed(
        self,
        store: Store,
        pairs: list[tuple[Document, Sequence[int]]],
        k: int,
        limit: int | None,
        found: list[Matches | None],
    ) -> list[Matches | None]:
        """``found`` (a batch's lookups, before its write) with the documents other
        writers committed while this one wrote without its section (it stalled past
        the lease inside its write): each document is looked up again, in a new
        section (after the others' writes), among the documents other than its own
        batch's; a match not found before joins its matches (nearest first, at most
        ``limit``, counted in ``total``). A document re-added unchanged (None) stays
        so: its pairs were reported when it was first added."""
        own = {doc.doc_id for doc, _ in pairs}
        wider = None if limit is None else limit + len(own)
        with store.write_section():
            again = self.finder.find(
                store, [p for _, p in pairs], k, wider, [(d.sketch, d.bands) for d, _ in pairs]
            )
        out: list[Matches | None] = []
        for before, now in zip(found, again):
            seen = own | {m.doc_id for m in before or ()}
            new = [m for m in now if m.doc_id not in seen]
            if before is None or not new:
                out.append(before)
                continue
            hits = sorted([*before, *new], key=match_order)[:limit]
            merged = Matches(hits, before.total + len(new), before.total_exact)
            merged.cluster = before.cluster
            out.append(merged)
        return out

    def _stamped(self, docs: Sequence[Document]) -> list[Document]:
        """Every document of a retained index has a time: now, where it has none."""
        if self.finder.retain is None:
            return list(docs)
        now = now_ms()
        return [d if d.time is not None else replace(d, time=now) for d in docs]

    def _expire_some(self, store: Store, written: int) -> None:
        """A retained index's write also removes expired documents (:data:`EXPIRE_MIN`)."""
        if self.finder.retain is not None and not store.expires_itself:
            self.expire(store, now_ms() - self.finder.retain * 1000, max(EXPIRE_MIN, 2 * written))

    def write(self, store: Store, latest: dict[str, Document]) -> Written:
        """One batch of documents by id (see :meth:`add_documents`). The batch owns
        the docs rows it replaces (:meth:`StoreBatch.claim_docs`), so the cells it
        deletes are those of the version it replaces, even with other writers of the
        same ids at work; the versions it replaced say what it did to each id. A
        document rewritten unchanged keeps its cluster."""
        with store.batch() as batch:
            state = batch.claim_docs(latest, self.cells)
            changed = [
                state[i]
                for i in latest
                if i in state
                and (state[i].fingerprint, state[i].bands)
                != (latest[i].fingerprint, latest[i].bands)
            ]
            batch.delete_index(self.cells(changed))
            new = [kept(doc, state.get(i)) for i, doc in latest.items()]
            docs_first = store.index_follows_docs
            if docs_first:
                batch.put_docs(new)
            for block in self.cell_blocks(new):
                batch.put_index(block)
            if not docs_first:
                batch.put_docs(new)
        return Written(len(latest) - len(state), len(changed), len(state) - len(changed))

    def remove_many(
        self, store: Store, doc_ids: Iterable[str], batch_size: int = REMOVE_BATCH
    ) -> list[str]:
        """Delete documents and all their index cells, ``batch_size`` ids a batch
        (one read of their docs rows, one write); the ids that were held, in order.

        A batch is written as an ingest's is (atomic on the embedded store; on
        HBase cells go before docs rows), and removing is idempotent: a run cut
        short is finished by running it again (the ids already gone are missing)."""
        removed: list[str] = []
        items = iter(doc_ids)
        while chunk := list(dict.fromkeys(islice(items, batch_size))):
            codec.check_doc_ids(chunk)
            with store.write_section(), store.batch() as batch:
                # the versions held (an id not held, or removed meanwhile, is not)
                olds = batch.claim_docs(dict.fromkeys(chunk), self.cells)
                for block in self.cell_blocks(list(olds.values())):
                    batch.delete_index(block)
                batch.delete_docs(list(olds))
            removed += [doc_id for doc_id in chunk if doc_id in olds]
        return removed

    def expire(
        self,
        store: Store,
        before: int,
        limit: int | None = None,
        batch_size: int = REMOVE_BATCH,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Remove the documents that arrived before ``before`` (ms), oldest first, in
        batches of :meth:`remove_many`, at most ``limit``; those removed (``on_batch``
        sees the count so far). Each batch picks its documents (:meth:`Store.due`) in
        the write section it removes them in, so on the embedded store a document
        rewritten meanwhile is never taken for its old time."""
        removed = 0
        while limit is None or removed < limit:
            size = batch_size if limit is None else min(batch_size, limit - removed)
            with store.write_section():
                gone = self.remove_many(store, store.due(before, size), size)
            removed += len(gone)
            if on_batch is not None and gone:
                on_batch(removed)
            if len(gone) < size:
                break
        return removed

    @staticmethod
    def write_cells(
        store: Store,
        put: Sequence[IndexCell],
        delete: Sequence[IndexCell],
        drop_rows: Sequence[str],
    ) -> None:
        """Raw cell edits, deletions first, and docs rows dropped outright."""
        with store.batch() as batch:
            batch.delete_docs(drop_rows)
            batch.delete_index(delete)
            batch.put_index(put)

    def cells(self, docs: Sequence[Document]) -> list[IndexCell]:
        """The index cells (row key, id) that ``docs`` own: the pigeonhole's under
        this scheme, and the LSH bands of those that have band keys."""
        return [cell for block in self.cell_blocks(docs) for cell in block]

    def cell_blocks(self, docs: Sequence[Document]) -> list[CellBlock]:
        """:meth:`cells` as arrays, for a store to write in bulk: the pigeonhole's
        block (every document, in order), then the band rows of those of them that
        have band keys, if any (in order too)."""
        banded = self._band_block(docs)
        return [self._cell_block(docs), *([] if banded is None else [banded])]

    def _band_block(self, docs: Sequence[Document]) -> CellBlock | None:
        """The band rows of the documents that have band keys (flags after the
        combinations: docs/SPEC.md, "Nets"); None if none has."""
        banded = [d for d in docs if d.bands is not None]
        if not banded:
            return None
        fps = np.fromiter(map(_FINGERPRINT, banded), dtype=np.uint64, count=len(banded))
        keys = np.frombuffer(b"".join([d.bands for d in banded]), dtype=">u4")  # type: ignore[misc]
        rows = band_rows(self.scheme, fps, keys.reshape(len(banded), -1))
        return CellBlock(rows, [d.doc_id for d in banded])

    def _cell_block(self, docs: Sequence[Document]) -> CellBlock:
        """:meth:`cells` as arrays, for a store to write in bulk."""
        fps = np.fromiter(map(_FINGERPRINT, docs), dtype=np.uint64, count=len(docs))
        return CellBlock(pigeonhole_rows(self.scheme, fps), [d.doc_id for d in docs])

    def bulk_load(self, store: Store, docs: Iterable[Document], batch_size: int) -> int:
        """Fill an empty index with ``docs`` (unique ids) through the store's
        bulk load (:meth:`Store.load`; HBase refuses)."""
        items = iter(docs)

        def blocks() -> Iterator[tuple[list[CellBlock], list[Document]]]:
            while chunk := list(islice(items, batch_size)):
                codec.check_documents(chunk)
                yield self.cell_blocks(chunk), chunk

        with gc_paused():  # every block's documents and cells: see gc_paused
            return int(store.load(blocks()))
