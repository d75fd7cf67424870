"""The lookups of new documents and queries with both nets: one candidate
generator and one judge on every path (docs/nets.md, "One candidate generator").

- :class:`Finder`: the reading half of an index; its :meth:`Finder.find` answers
  every query variant of :class:`~simhash_hbase.index.client.SimhashIndex` and
  the lookups of a write (ingest, check-and-add: :meth:`Finder.lookups`);
- :func:`bucket_docs` and :func:`judged`: held documents, by scanning the rows a
  query shares with them (a batch of queries scans its distinct prefixes once);
- :mod:`~simhash_hbase.index.batch`: the documents of one batch among themselves.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any

import numpy as np

from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.minhash import MinHashParams, Signature
from simhash_hbase.fingerprint.probes import bound
from simhash_hbase.index.batch import batch_near, probe_near, settle_new
from simhash_hbase.index.clusters import assign
from simhash_hbase.layout import codec
from simhash_hbase.layout.codec import check_fingerprint, check_fingerprints
from simhash_hbase.layout.nets import Judge, first_band_flag
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.layout.window import Window
from simhash_hbase.records import Document, Match, Matches, check_limit, now_ms
from simhash_hbase.store import IndexCell, Store

_SCALAR_MAX = 4  # below this many fingerprints, plain Python beats NumPy
_SCALAR_CANDIDATES = 24  # and below this many candidates of one query (~20 breaks even)


def bucket_docs(
    store: Store, prefix_lists: list[list[bytes]], row_cap: int | None
) -> tuple[list[tuple[str, int]], list[np.ndarray], np.ndarray, int]:
    """The candidates of each query: the distinct (id, fingerprint) of every cell
    read, the numbers of those its prefixes hold (each row read to ``row_cap``
    cells), whether a row it reads was cut, and how many cells were read. The
    batch's distinct prefixes are scanned once: queries sharing buckets
    (near-copies) share the reading."""
    uniq = sorted(set().union(*prefix_lists))
    (cells,) = store.scan_prefixes_many([uniq], row_cap=row_cap) if uniq else ([],)
    if not cells:
        none = np.zeros(0, dtype=np.int64)
        return [], [none] * len(prefix_lists), np.zeros(len(prefix_lists), dtype=bool), 0
    rows = np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)
    values = np.frombuffer(b"".join(uniq), dtype=codec.PREFIX_DTYPE)
    slot = np.searchsorted(
        codec.rowkey_prefix_values(values),
        codec.rowkey_prefix_values(rows),  # type: ignore[arg-type]
    )
    cut = np.zeros(len(uniq), dtype=bool)
    if row_cap is not None:  # a row read to the cap may hold more (rows are runs)
        bounds = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1], True])
        full = np.flatnonzero(np.diff(bounds) >= row_cap)
        cut[slot[bounds[full]]] = True
    code: dict[tuple[str, int], int] = {}  # each distinct (id, fingerprint) read
    of_cell = np.array(
        [code.setdefault((d, codec.rowkey_fingerprint(r)), len(code)) for r, d in cells]
    )
    order = np.argsort(slot, kind="stable")
    bounds = np.searchsorted(slot[order], np.arange(len(uniq) + 1))
    held = [of_cell[order[lo:hi]] for lo, hi in pairwise(bounds.tolist())]
    where = {prefix: at for at, prefix in enumerate(uniq)}
    found: list[np.ndarray] = []
    partial = np.zeros(len(prefix_lists), dtype=bool)
    for q, prefixes in enumerate(prefix_lists):
        at = [where[p] for p in prefixes]
        found.append(np.unique(np.concatenate([held[a] for a in at])))
        partial[q] = cut[at].any()
    return list(code), found, partial, len(cells)


def judged(
    store: Store,
    lsh: MinHashParams | None,
    lists: list[list[int]],
    read: list[tuple[str, int]],
    found: list[np.ndarray],
    partial: np.ndarray,
    sketches: list[bytes | None],
    k: int,
    limit: int | None,
    window: Window | None = None,
) -> list[Matches]:
    """Each query's candidates (numbers in ``read``) judged by the one rule
    (:class:`~simhash_hbase.layout.nets.Judge`), the whole batch at once: the
    ``limit`` nearest matches (distance, then id) and their count, a lower bound
    where a row was cut (its unread documents' sketches are unread too). A
    ``window`` leaves out the documents whose time (read in the same multi-get)
    it does not hold."""
    if not read:
        return [Matches((), 0, not partial[q]) for q in range(len(lists))]
    ids = sorted({doc_id for doc_id, _ in read})
    code = {doc_id: c for c, doc_id in enumerate(ids)}  # in id order
    docs = store.get_docs(ids)
    held = [docs.get(doc_id) for doc_id in ids]
    of_read = np.array([code[doc_id] for doc_id, _ in read], dtype=np.int64)
    fp_read = np.array([fp for _, fp in read], dtype=np.uint64)
    query = np.repeat(np.arange(len(lists)), [len(cands) for cands in found])
    every = np.concatenate(found)
    doc, cand = of_read[every], fp_read[every]
    held_fp = np.array([0 if d is None else d.fingerprint for d in held], dtype=np.uint64)
    inside = [d is not None and (window is None or window.holds(d.time)) for d in held]
    alive = np.array(inside, dtype=bool)[doc] & (held_fp[doc] == cand)
    query, doc, cand = query[alive], doc[alive], cand[alive]
    theirs = [None if d is None else d.sketch for d in held]
    fps = np.concatenate([np.array([probes[0] for probes in lists], dtype=np.uint64), held_fp])
    judge = Judge(fps, k, lsh, [*sketches, *theirs])  # it skips sketches of other sizes
    near = probe_near(lists, query, cand, k)
    match, dist, sim = judge(query, doc + len(lists), near)
    query, doc, dist, sim = query[match], doc[match], dist[match], sim[match]
    order = np.lexsort((doc, dist, query))  # each query's hits nearest first, then by id
    query, doc, dist, sim = query[order], doc[order], dist[order], sim[order]
    bounds = np.searchsorted(query, np.arange(len(lists) + 1)).tolist()
    results: list[Matches] = []
    for q, (lo, hi) in enumerate(pairwise(bounds)):
        top = range(lo, hi if limit is None else min(hi, lo + limit))
        shown = [
            Match(ids[d], int(held_fp[d]), int(dist[i]), _sim(sim[i]), held[d].time)  # type: ignore[union-attr]
            for i in top
            for d in (doc[i],)
        ]
        results.append(Matches(shown, hi - lo, not partial[q]))
    return results


def with_times(store: Store, results: list[Matches]) -> list[Matches]:
    """Each shown match with its document's time (:attr:`Match.time`), in one
    multi-get of the documents shown (a lookup that found nothing reads nothing)."""
    ids = sorted({m.doc_id for matches in results for m in matches if m.time is None})
    if not ids:
        return results
    docs = store.get_docs(ids)
    for matches in results:
        for at, m in enumerate(matches):
            held = docs.get(m.doc_id)
            if m.time is None and held is not None and held.fingerprint == m.fingerprint:
                matches[at] = m._replace(time=held.time)
    return results


def _sim(value: float) -> float | None:
    """A judged similarity as a Match holds it (NaN: a side has no sketch)."""
    return None if value != value else float(value)


@dataclass
class QueryCost:
    """What the lookups of this index object cost so far: queries (a text, or a new
    document checked at insert), prefix scans (after deduplicating the prefixes of a
    query's probes) and the index cells those scans returned (candidates)."""

    queries: int = 0
    scans: int = 0
    candidates: int = 0


class Finder:
    """The reading half of an index: every lookup goes through :meth:`find`. The
    store is passed on each call (the index's, checked against forks and
    replaceable by tests that count its calls)."""

    def __init__(self, scheme: Scheme, lsh: MinHashParams | None, retain: int | None) -> None:
        self.scheme = scheme
        self.lsh = lsh
        self.retain = retain  # a retained index's seconds: nothing older is a match
        self.cost = QueryCost()
        #: The window a view asks for (None: every document;
        #: :meth:`~simhash_hbase.index.client.SimhashIndex.within`).
        self.asked: Window | None = None
        self._retained: tuple[int | None, Window | None] = (None, None)  # see window
        self._encode_prefixes = codec.prefix_encoder()  # the one-query hot path's

    @property
    def window(self) -> Window | None:
        """The window every lookup answers in: the view's, narrowed in a retained
        index to the documents since now minus the retention, so an expired document
        is never a match, removed yet or not (docs/lifecycle.md)."""
        if self.retain is None:
            return self.asked
        now, held = self._retained  # one window a millisecond: a query reads it often
        if now != (now := now_ms()):
            held = Window.last(self.retain * 1000, now).narrowed(self.asked)
            self._retained = (now, held)
        return held

    @window.setter
    def window(self, window: Window | None) -> None:
        self.asked = window
        self._retained = (None, None)

    def scanned(self, store: Store, fps: list[int], k: int, limit: int | None) -> list[Matches]:
        """:meth:`find`'s exact searches through the scans and the confirmation."""
        cap = self._row_cap(limit)
        if len(fps) > _SCALAR_MAX:
            hits, cells = self._near_many(store, fps, k, cap)
            cut = _cut_rows(cells, cap)
            candidates = len(cells)
        else:
            found = store.scan_prefixes_many(self.prefixes(fps), row_cap=cap)
            hits = [_near(fp, cells, k) for fp, cells in zip(fps, found)]
            cut = _cut_rows([c for cells in found for c in cells], cap)
            candidates = sum(map(len, found))
        self.cost.queries += len(fps)
        self.cost.scans += len(fps) * self.scheme.rows_per_fingerprint
        self.cost.candidates += candidates
        return self._confirm(store, hits, limit, cut)

    def one(self, store: Store, fp: int, k: int, limit: int | None) -> Matches | None:
        """One query on the store's one-query path (:meth:`Store.scan_documents`:
        the documents found, not a cell tuple each) where it has one and no cell
        can disagree with its docs row (no confirming read: batches are atomic, or
        the index follows the docs); None: take the plain path."""
        terms = self.scheme.prefix_terms
        if terms is None or not (store.atomic_batches or store.index_follows_docs):
            return None
        found = store.scan_documents(self._encode_prefixes(fp, terms), self._row_cap(limit))
        if found is None:
            return None
        docs, cells = found
        cost = self.cost
        cost.queries += 1
        cost.scans += self.scheme.rows_per_fingerprint
        cost.candidates += cells
        hits = [(i, cand, dist) for i, cand in docs if (dist := (cand ^ fp).bit_count()) <= k]
        if self.window is not None:
            return self._windowed(store, [{(i, cand): dist for i, cand, dist in hits}], limit)[0]
        hits.sort(key=_by_distance)
        return with_times(store, [Matches([Match(*hit) for hit in hits[:limit]], len(hits))])[0]

    def _near_many(
        self, store: Store, fps: list[int], k: int, row_cap: int | None
    ) -> tuple[list[dict[tuple[str, int], int]], list[IndexCell]]:
        """:func:`_near` of many queries, and the cells their scans read.

        The batch's distinct prefixes go to the store as one list in key order
        (each seek then descends through pages the one before has just read),
        and each cell found is matched to the queries of its prefix and confirmed
        by XOR and popcount in NumPy, not by a Python call per candidate.
        """
        arr = np.array(fps, dtype=np.uint64)
        values = codec.prefix_values(self.scheme.fields_many(arr)).reshape(-1)
        unique, inverse = np.unique(values, return_inverse=True)
        (cells,) = store.scan_prefixes_many([codec.encode_prefix_values(unique)], row_cap=row_cap)
        hits: list[dict[tuple[str, int], int]] = [{} for _ in fps]
        if not cells:
            return hits, cells
        rows = np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)
        slot = np.searchsorted(unique, codec.rowkey_prefix_values(rows))  # each cell's prefix
        # The queries holding distinct prefix u are owners[start[u] : start[u + 1]].
        owners = np.argsort(inverse, kind="stable") // self.scheme.rows_per_fingerprint
        start = np.zeros(len(unique) + 1, dtype=np.intp)
        np.cumsum(np.bincount(inverse, minlength=len(unique)), out=start[1:])
        per_cell = start[slot + 1] - start[slot]
        cell = np.repeat(np.arange(len(cells)), per_cell)
        first = np.cumsum(per_cell) - per_cell  # where each cell's pairs begin
        query = owners[np.repeat(start[slot] - first, per_cell) + np.arange(len(cell))]
        cands = rows["fp"].astype(np.uint64)[cell]
        dists = np.bitwise_count(cands ^ arr[query])
        keep = np.flatnonzero(dists <= k)
        for c, q, cand, dist in zip(
            cell[keep].tolist(), query[keep].tolist(), cands[keep].tolist(), dists[keep].tolist()
        ):
            hits[q][(cells[c][1], cand)] = dist
        return hits, cells

    def find(
        self,
        store: Store,
        probe_lists: Sequence[Sequence[int]],
        k: int,
        limit: int | None,
        sketches: Sequence[SketchKeys] | None = None,
        *,
        alone: bool = False,
    ) -> list[Matches]:
        """Every lookup: queries of each kind and the new documents of a write.
        Each of ``probe_lists`` is a fingerprint followed by its probes.

        The pigeonhole's verdict on one is exactly the union of the exact
        k-searches of its probes, keeping the documents whose distance to the
        fingerprint itself is at most ``bound(k, probes)``; a match reports that
        true distance. The prefixes of all probes of all queries go to the store
        in one batched scan, each distinct prefix once per query.

        ``sketches`` (per query: its sketch and band keys, or (None, None)) adds
        the LSH net: the band prefixes go in the same scan, and every candidate
        is judged by :func:`~simhash_hbase.layout.nets.is_match` with the
        similarity of the sketches read with the docs rows.

        Without probes or sketches these are exact searches, on the shortest
        path: a few fingerprints go one by one through the store's one-query path
        (:meth:`one`) where batches are atomic (remote: one multi-get is cheaper),
        or, ``alone`` (one fingerprint asked on its own), wherever the store has it.

        In a window (:attr:`window`) a hit is a document inside it: rows are read
        whole, and the times come in the one multi-get of the candidates' docs rows
        (both nets) or of the hits' (:meth:`_windowed`), so no path adds a request.
        """
        self.scheme.check_k(k)
        check_limit(limit)
        if alone:  # one exact search (query_fingerprint): the hot path, no lists built
            ((fp,),) = probe_lists
            quick = self.one(store, check_fingerprint(fp), k, limit)
            return [self.scanned(store, [fp], k, limit)[0] if quick is None else quick]
        lists = [list(probes) for probes in probe_lists]
        check_fingerprints(list(chain.from_iterable(lists)))
        if any(not probes for probes in lists):
            raise InvalidInput("a probed query needs at least its own fingerprint")
        nets = self.lsh is not None and sketches is not None and any(s for s, _ in sketches)
        if not nets and all(len(probes) == 1 for probes in lists):  # exact searches
            fps = [probes[0] for probes in lists]
            if len(fps) <= _SCALAR_MAX and store.atomic_batches:
                each = [self.one(store, fp, k, limit) for fp in fps]
                if all(result is not None for result in each):
                    return each  # type: ignore[return-value]
            return self.scanned(store, fps, k, limit)
        flat = [fp for probes in lists for fp in probes]
        per_fp = self.prefixes(flat)
        prefix_lists, at = [], 0
        for probes in lists:
            unique = dict.fromkeys(p for pl in per_fp[at : at + len(probes)] for p in pl)
            prefix_lists.append(list(unique))
            at += len(probes)
        if nets:
            assert sketches is not None
            return self._nets(store, lists, prefix_lists, sketches, k, limit)
        found = store.scan_prefixes_many(prefix_lists, row_cap=self._row_cap(limit))
        self.cost.queries += len(lists)
        self.cost.scans += sum(map(len, prefix_lists))
        self.cost.candidates += sum(map(len, found))
        cut = _cut_rows([c for cells in found for c in cells], self._row_cap(limit))
        hits: list[dict[tuple[str, int], int]] = []
        for probes, cells in zip(lists, found):
            fp, flipped, widest = probes[0], probes[1:], bound(k, len(probes) - 1)
            near: dict[tuple[str, int], int] = {}
            for row, doc_id in cells:
                cand = codec.rowkey_fingerprint(row)
                dist = (cand ^ fp).bit_count()
                if dist <= k or (
                    dist <= widest and any((cand ^ p).bit_count() <= k for p in flipped)
                ):
                    near[(doc_id, cand)] = dist
            hits.append(near)
        return self._confirm(store, hits, limit, cut)

    def _nets(
        self,
        store: Store,
        lists: list[list[int]],
        prefix_lists: list[list[bytes]],
        sketches: Sequence[SketchKeys],
        k: int,
        limit: int | None,
    ) -> list[Matches]:
        """:meth:`find` with both nets: one scan for the pigeonhole's and the
        bands' prefixes, one multi-get of the candidates' docs rows (their sketches
        and times; on HBase the read that already confirms hits), then
        :func:`is_match`."""
        first = first_band_flag(self.scheme)
        for prefixes, (_, bands) in zip(prefix_lists, sketches):
            if bands is not None:
                prefixes += codec.band_prefixes(bands, first)
        read, found, partial, cells = bucket_docs(store, prefix_lists, self._row_cap(limit))
        self.cost.queries += len(lists)
        self.cost.scans += sum(map(len, prefix_lists))
        self.cost.candidates += cells
        mine = [sketch for sketch, _ in sketches]
        return judged(store, self.lsh, lists, read, found, partial, mine, k, limit, self.window)

    def _row_cap(self, limit: int | None) -> int | None:
        """How far a scan reads a hot row: to ``limit`` (its first cells are the
        nearest), or whole in a window (those may all be outside it)."""
        return limit if self.window is None else None

    def _windowed(
        self, store: Store, hits: list[dict[tuple[str, int], int]], limit: int | None
    ) -> list[Matches]:
        """Each query's hits inside the window, ranked and cut to ``limit``, counted
        exactly (rows were read whole): one multi-get of every hit's docs row, the
        read that gives shown matches their times without a window. A hit whose row
        holds another fingerprint (a cell a write left) is not one."""
        window = self.window
        assert window is not None
        ids = sorted({i for near in hits for i, _ in near})
        docs = store.get_docs(ids) if ids else {}
        times = {i: d.time for i, d in docs.items() if window.holds(d.time)}
        results = []
        for near in hits:
            inside = {
                (i, fp): dist
                for (i, fp), dist in near.items()
                if i in times and docs[i].fingerprint == fp
            }
            ranked = _ranked(inside, limit, len(inside), True)
            results.append(
                Matches([m._replace(time=times[m.doc_id]) for m in ranked], ranked.total)
            )
        return results

    def prefixes(self, fps: Sequence[int]) -> list[list[bytes]]:
        terms = self.scheme.prefix_terms
        if len(fps) <= _SCALAR_MAX and terms:  # NumPy's per-call cost would dominate
            return [self._encode_prefixes(fp, terms) for fp in fps]
        return codec.encode_prefixes_many(self.scheme.fields_many(np.array(fps, dtype=np.uint64)))

    def _confirm(
        self,
        store: Store,
        hits: list[dict[tuple[str, int], int]],
        limit: int | None,
        cut: dict[int, bytes],
    ) -> list[Matches]:
        """Each query's hits ranked and cut to ``limit``, with their count.

        ``cut``: fingerprints whose rows the scan read only to ``limit`` cells (a
        row holds one fingerprint, so its first ids are the nearest of it); their
        documents are counted by :meth:`Store.row_sizes` where the store can, else
        the count is a lower bound.

        Where batches are not atomic, a hit is shown only if its docs row holds
        its fingerprint. Rows are read nearest first, only as far as it takes to
        fill ``limit`` (a hot query of 100,000 copies reads ~``limit`` rows); the
        hits further down are counted unread, so until ``verify --repair`` drops
        a cell an interrupted write left, it may count.
        """
        if self.window is not None:
            return self._windowed(store, hits, limit)
        counts = self._counts(store, hits, cut)
        if store.atomic_batches or store.index_follows_docs:
            # Cells and their docs row commit in one transaction, or cells are
            # written after their docs row and deleted before it changes: no cell
            # can disagree with its document, so the confirming read is not needed.
            done = [_ranked(near, limit, *count) for near, count in zip(hits, counts)]
            return with_times(store, done)
        ranked = [sorted(near, key=_hit_order(near)) for near in hits]
        held: dict[str, int | None] = {}  # id -> fingerprint in its docs row (None: no row)
        while ask := sorted({i for order in ranked for i, _ in _unsure_head(order, held, limit)}):
            fps = store.doc_fingerprints(ask)
            held.update((i, fps.get(i)) for i in ask)
        results = []
        for near, order, (total, exact) in zip(hits, ranked, counts):
            stale = sum(1 for i, fp in order if i in held and held[i] != fp)
            shown = [(i, fp) for i, fp in order if held.get(i, fp) == fp][:limit]
            matches = (Match(i, fp, near[(i, fp)]) for i, fp in shown)
            results.append(Matches(matches, total - stale, exact))
        return with_times(store, results)

    def _counts(
        self, store: Store, hits: list[dict[tuple[str, int], int]], cut: dict[int, bytes]
    ) -> list[tuple[int, bool]]:
        """(count, exact) of each query's hits, its cut fingerprints counted whole."""
        if not cut:
            return [(len(near), True) for near in hits]
        wanted = [{fp for _, fp in near} & cut.keys() for near in hits]
        sizes = store.row_sizes(sorted({cut[fp] for fps in wanted for fp in fps}))
        counts = []
        for near, fps in zip(hits, wanted):
            if not fps:
                counts.append((len(near), True))
            elif sizes is None:
                counts.append((len(near), False))
            else:
                rest = sum(1 for _, fp in near if fp not in fps)
                counts.append((rest + sum(sizes[cut[fp]] for fp in fps), True))
        return counts

    def find_at_insert(
        self, store: Store, docs: list[tuple[Document, Sequence[int]]], k: int, limit: int | None
    ) -> tuple[list[Matches | None], list[Document]]:
        """Near-copies of each new doc among held docs and earlier docs of this batch
        (all written), for ingest: see :meth:`lookups` (None: a document re-added
        unchanged, same id and fingerprint, is not new: its pairs were reported when
        it or its partners were added). And the documents with their clusters
        (:func:`~simhash_hbase.index.clusters.assign`)."""
        found, _ = self.lookups(store, docs, k, limit)
        return found, assign(store, [doc for doc, _ in docs], found)

    def lookups(
        self,
        store: Store,
        docs: list[tuple[Document, Sequence[int]]],
        k: int,
        limit: int | None,
        *,
        keep: Sequence[bool] | None = None,
    ) -> tuple[list[Matches | None], list[int]]:
        """Each doc's near-copies among held docs and the earlier docs of the batch
        that are written, by the same rule as :meth:`find` (each doc with
        its probe list): at most ``limit`` each, nearest first, and their count;
        and the positions of the docs written, in order.

        ``keep`` None (ingest): every doc is written; a doc re-added unchanged
        gets None (not new) and a changed one does not count its own old version.
        Else (check-and-add): a doc is written if ``keep`` says so or if it has no
        near-copy, and its own held version counts like any other document.
        Documents with one probe list (unprobed: one fingerprint) are looked up once,
        and the batch is compared by distinct lists, so a batch of mass copies costs
        one lookup and ``limit`` ids per copy, not a pair per copy and partner.

        In a window (:attr:`window`) the held documents are those inside it, and the
        batch's own documents (an unchanged one too: it is written again) are "now":
        they count while the window holds the clock's time.
        """
        keys = [(tuple(probes), d.sketch, d.bands) for d, probes in docs]
        distinct = list(dict.fromkeys(keys))
        slot = {key: s for s, key in enumerate(distinct)}
        # One more than shown, so that dropping a document's own older version
        # still leaves ``limit``.
        held = self.find(
            store,
            [key[0] for key in distinct],
            k,
            None if limit is None else limit + 1,
            [key[1:] for key in distinct],
        )
        if self.window is None or self.window.holds(now_ms()):  # the batch is "now"
            near, whole = batch_near(distinct, k, self.scheme, self.lsh)
        else:  # a window that ended: the batch's own documents are outside it
            near, whole = [[] for _ in distinct], [True] * len(distinct)
        ingest = keep is None
        versions = (
            self._own_versions(store, docs, [held[slot[key]] for key in keys]) if ingest else {}
        )
        count = [0] * len(distinct)  # earlier documents of the batch written, by key
        nearest: list[list[str]] = [[] for _ in distinct]  # their first ids, sorted
        written: dict[str, tuple[int, int]] = {}  # id -> (position, key) of its version
        found: list[Matches | None] = []
        judge: Judge | None = None  # over the distinct keys, made if a new document is settled
        for j, ((doc, probes), key) in enumerate(zip(docs, keys)):
            old, counted = versions.get(doc.doc_id, (None, False))
            unchanged = ingest and old == doc.fingerprint  # reported when it was added
            if unchanged and self.window is None:  # its held version stands for it
                found.append(None)
                continue
            s = slot[key]
            result = held[s]
            total, hits = 0, list[Match]()
            if result.total or len(near[s]) > 1 or count[s] or old is not None:
                total, hits = self._batch_matches(
                    result, doc, probes, old if counted else None, written, ingest, k
                )
                for t, dist, sim in near[s]:
                    total += count[t]
                    hits += [
                        Match(i, distinct[t][0][0], dist, sim, docs[written[i][0]][0].time)
                        for i in nearest[t]
                    ]
            settled = not ingest and not total and not whole[s] and bool(written)
            if settled:  # new or not: judged against every written key, so exactly
                judge = judge or Judge(
                    np.array([d[0][0] for d in distinct], dtype=np.uint64),
                    k,
                    self.lsh,
                    [d[1] for d in distinct],
                )
                seen = {t for t, _, _ in near[s]}
                rest = [t for t in range(len(distinct)) if count[t] and t not in seen]
                for t, dist, sim in settle_new(distinct, judge, s, rest, k):
                    total += count[t]
                    hits += [
                        Match(i, distinct[t][0][0], dist, sim, docs[written[i][0]][0].time)
                        for i in nearest[t]
                    ]
            # else (most documents): nothing held near, nothing near in the batch so far
            if hits:
                hits = sorted(hits, key=match_order)[:limit]
            # a key in a large group was judged against bounded neighbours: its count
            # is a lower bound, unless no earlier document of the batch is written or
            # it was settled against them all
            exact = result.total_exact and (whole[s] or not written or settled)
            found.append(None if unchanged else Matches(hits, total, exact))
            if ingest or keep[j] or not total:  # type: ignore[index]
                if doc.doc_id in written:  # its earlier version of this batch is replaced
                    _, t = written[doc.doc_id]
                    count[t] -= 1
                    if doc.doc_id in nearest[t]:
                        nearest[t].remove(doc.doc_id)
                written[doc.doc_id] = (j, s)
                count[s] += 1
                bisect.insort(nearest[s], doc.doc_id)
                del nearest[s][len(nearest[s]) if limit is None else limit :]
        return found, [j for j, _ in written.values()]

    @staticmethod
    def _batch_matches(
        result: Matches,
        doc: Document,
        probes: Sequence[int],
        old: int | None,
        written: dict[str, tuple[int, int]],
        ingest: bool,
        k: int,
    ) -> tuple[int, list[Match]]:
        """A document's held matches as :meth:`lookups` reports them: its own older
        version and the held versions of documents written earlier in the batch (they
        are counted among the batch's) left out; (their count, those shown)."""
        own = any(m.doc_id == doc.doc_id for m in result)
        total = result.total - (old is not None and (own or _within(old, probes, k)))
        total -= sum(m.doc_id in written for m in result)
        hits = [
            m for m in result if m.doc_id not in written and (m.doc_id != doc.doc_id or not ingest)
        ]
        return total, hits

    def _own_versions(
        self, store: Store, docs: list[tuple[Document, Sequence[int]]], held: list[Matches]
    ) -> dict[str, tuple[int, bool]]:
        """The fingerprint each new document's id holds already, where it has one, and
        whether its lookup counts it (inside the window): seen in its lookup's matches,
        or read when a cut result or the window may hide it (one multi-get a batch)."""
        versions: dict[str, tuple[int, bool]] = {}
        unsure = []
        window = self.window
        for (doc, _), result in zip(docs, held):
            own = [m.fingerprint for m in result if m.doc_id == doc.doc_id]
            if own:
                versions[doc.doc_id] = (own[0], True)
            elif result.total > len(result) or window is not None:
                unsure.append(doc.doc_id)
        if unsure:
            versions.update(
                (i, (d.fingerprint, window is None or window.holds(d.time)))
                for i, d in store.get_docs(unsure).items()
            )
        return versions


def _near(fp: int, cells: Sequence[IndexCell], k: int) -> dict[tuple[str, int], int]:
    """The cells within ``k`` of ``fp``: {(id, fingerprint): distance}."""
    if len(cells) > _SCALAR_CANDIDATES:  # one XOR and popcount in NumPy (4x4 at 1 M: ~60)
        rows = np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)
        cands = rows["fp"].astype(np.uint64)
        dists = np.bitwise_count(cands ^ np.uint64(fp))
        keep = np.flatnonzero(dists <= k).tolist()
        return {(cells[i][1], int(cands[i])): int(dists[i]) for i in keep}
    near: dict[tuple[str, int], int] = {}
    for row, doc_id in cells:
        cand = codec.rowkey_fingerprint(row)
        dist = (cand ^ fp).bit_count()
        if dist <= k:
            near[(doc_id, cand)] = dist
    return near


def _cut_rows(cells: Sequence[IndexCell], cap: int | None) -> dict[int, bytes]:
    """{fingerprint: its row} of the rows a scan with ``row_cap=cap`` may have cut."""
    if cap is None or len(cells) < cap:
        return {}
    counts = Counter(row for row, _ in cells)
    return {codec.rowkey_fingerprint(row): row for row, n in counts.items() if n >= cap}


def _ranked(
    near: dict[tuple[str, int], int], limit: int | None, total: int, exact: bool
) -> Matches:
    """The ``limit`` nearest hits (distance, then id) of {(id, fingerprint): distance}."""
    if not near:  # most lookups of a batch
        return Matches((), total, exact)
    hits = ((doc_id, fp, dist) for (doc_id, fp), dist in near.items())
    if limit is None or len(near) <= limit:
        top = sorted(hits, key=_by_distance)
    else:  # a hot query: no sort of every copy
        top = heapq.nsmallest(limit, hits, key=_by_distance)
    return Matches((Match(*hit) for hit in top), total, exact)


def _unsure_head(
    order: list[tuple[str, int]], held: dict[str, int | None], limit: int | None
) -> Iterator[tuple[str, int]]:
    """The unread hits among the first ones that would fill ``limit`` if all were good."""
    good = 0
    for doc_id, fp in order:
        if limit is not None and good >= limit:
            return
        if doc_id not in held:
            yield doc_id, fp
            good += 1
        elif held[doc_id] == fp:
            good += 1


def _by_distance(hit: tuple[Any, ...]) -> tuple[int, str]:
    return hit[2], hit[0]


#: A new document's lookup: its probe list, sketch and band keys.
#: A query's (sketch, band keys as stored), or (None, None) without them.
SketchKeys = tuple[bytes | None, bytes | None]


def keys_of(sig: Signature | None) -> SketchKeys:
    return (None, None) if sig is None else (sig.sketch, codec.encode_bands(sig.bands))


def _hit_order(near: dict[tuple[str, int], int]) -> Callable[[tuple[str, int]], tuple[int, str]]:
    """Sort key of the hits of ``near``: distance, then id."""
    return lambda hit: (near[hit], hit[0])


def match_order(match: Match) -> tuple[int, str]:
    return match.distance, match.doc_id


def _within(cand: int, probes: Sequence[int], k: int) -> bool:
    """Whether a probed lookup finds ``cand`` (see :meth:`SimhashIndex.query_probed`)."""
    dist = (cand ^ probes[0]).bit_count()
    return dist <= k or (
        dist <= bound(k, len(probes) - 1) and any((cand ^ p).bit_count() <= k for p in probes[1:])
    )
