"""The lookups of new documents and queries with both nets: one candidate
generator and one judge on every path (docs/nets.md, "One candidate generator").

- :func:`bucket_docs` and :func:`judged`: held documents, by scanning the rows a
  query shares with them (a batch of queries scans its distinct prefixes once);
- :func:`batch_near`: the documents of one batch among themselves, by grouping
  equal keys (:func:`~simhash_hbase.layout.groups.nets_graph`, as ``shdb dedup``).
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.probes import bound
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.nets import Judge
from simhash_hbase.layout.pairs import near_graph
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import Match, Matches
from simhash_hbase.store import Store

#: A new document's (probe list, sketch, bands): what its lookup depends on.
InsertKey = tuple[tuple[int, ...], bytes | None, bytes | None]


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
) -> list[Matches]:
    """Each query's candidates (numbers in ``read``) judged by the one rule
    (:class:`~simhash_hbase.layout.nets.Judge`), the whole batch at once: the
    ``limit`` nearest matches (distance, then id) and their count, a lower bound
    where a row was cut (its unread documents' sketches are unread too)."""
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
    alive = np.array([d is not None for d in held], dtype=bool)[doc] & (held_fp[doc] == cand)
    query, doc, cand = query[alive], doc[alive], cand[alive]
    size = None if lsh is None else lsh.sketch_bytes
    mine = [s if s is not None and len(s) == size else None for s in sketches]
    theirs = [
        None if d is None or d.sketch is None or len(d.sketch) != size else d.sketch for d in held
    ]
    fps = np.concatenate([np.array([probes[0] for probes in lists], dtype=np.uint64), held_fp])
    judge = Judge(fps, k, lsh, mine + theirs)
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


def probe_near(lists: list[list[int]], query: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
    """The pigeonhole's verdict on each candidate of its query (``query``: sorted
    numbers into ``lists``, each a fingerprint and its probes): within ``k`` of
    the fingerprint, or of a probe and within the probe bound (multi-probe, see
    :meth:`~simhash_hbase.index.client.SimhashIndex.query_probed`). Such a
    candidate shares a combination with the query or that probe: the pigeonhole's
    rows find it, whatever else found it first."""
    own = np.array([probes[0] for probes in lists], dtype=np.uint64)
    dist = np.bitwise_count(cand ^ own[query])
    near = dist <= k
    bounds = np.searchsorted(query, np.arange(len(lists) + 1)).tolist()  # query is sorted
    for q, probes in enumerate(lists):
        if len(probes) > 1:
            cells = np.arange(bounds[q], bounds[q + 1])
            cells = cells[~near[cells]]
            flipped = np.array(probes[1:], dtype=np.uint64)
            hit = (np.bitwise_count(cand[cells, None] ^ flipped[None, :]) <= k).any(axis=1)
            hit &= dist[cells] <= bound(k, len(probes) - 1)
            near[cells[hit]] = True
    return near


def batch_near(
    keys: list[InsertKey], k: int, scheme: Scheme, lsh: MinHashParams | None
) -> tuple[list[list[tuple[int, int, float | None]]], list[bool]]:
    """For each distinct (probe list, sketch, bands), those (itself first) it
    matches by the candidates and the judge of every path (layout.groups:
    :func:`~simhash_hbase.layout.groups.nets_graph`, the pigeonhole's
    :func:`~simhash_hbase.layout.pairs.near_graph` without sketches), as
    [(key index, distance, similarity)]; and whether each list is all it
    matches (a key in a large group of near-copies is judged against a bounded
    number of neighbours: its count is then a lower bound)."""
    fps = np.array([key[0][0] for key in keys], dtype=np.uint64)
    sketches = [key[1] for key in keys]
    lsh = lsh if any(s is not None for s in sketches) else None
    if lsh is None:
        graph = near_graph(fps, k, scheme)
    else:
        graph = nets_graph(fps, k, scheme, lsh, sketches, [key[2] for key in keys])
    node = graph.inverse.tolist()
    sims = graph.similarity
    same = [1.0 if s is not None and lsh is not None else None for s in sketches]
    members: dict[int, list[int]] = {}
    for s, u in enumerate(node):
        members.setdefault(u, []).append(s)
    # the keys of one node are identical (probe lists aside): one list each node
    lists = {u: [(t, 0, same[t]) for t in group] for u, group in members.items()}
    a, b, d = graph.edges.tolist()
    sim = [None] * len(a) if sims is None else [None if x != x else x for x in sims.tolist()]
    for u, v, dist, similarity in zip(a, b, d, sim):
        lists[u] += [(t, dist, similarity) for t in members[v]]
        lists[v] += [(t, dist, similarity) for t in members[u]]
    near = [lists[u] for u in node]
    probed = [s for s, key in enumerate(keys) if len(key[0]) > 1]
    if probed:
        _probe_hits(keys, fps, probed, near, k, lsh)
    whole = [True] * len(keys) if graph.complete is None else graph.complete.tolist()
    return near, [whole[u] for u in node]


def _probe_hits(
    keys: list[InsertKey],
    fps: np.ndarray,
    probed: list[int],
    near: list[list[tuple[int, int, float | None]]],
    k: int,
    lsh: MinHashParams | None,
) -> None:
    """Add to ``near`` the keys a probed key's probes find (within k of a probe
    and the probe bound of its fingerprint), judged as the pigeonhole's finds."""
    a: list[int] = []
    b: list[int] = []
    every = np.zeros(len(keys), dtype=np.int64)
    for s in probed:
        near[s] = list(near[s])  # its own: other keys of its node probe otherwise
        known = {t for t, _, _ in near[s]}
        hit = probe_near([list(keys[s][0])], every, fps, k)
        new = [t for t in np.flatnonzero(hit).tolist() if t not in known]
        a += [s] * len(new)
        b += new
    if not a:
        return
    judge = Judge(fps, k, lsh, [key[1] for key in keys])
    x, y = np.array(a), np.array(b)
    match, dist, sim = judge(x, y, np.ones(len(x), dtype=bool))
    for s, t, dv, sv in zip(
        x[match].tolist(), y[match].tolist(), dist[match].tolist(), sim[match].tolist()
    ):
        near[s].append((t, dv, None if sv != sv else sv))


def _sim(value: float) -> float | None:
    """A judged similarity as a Match holds it (NaN: a side has no sketch)."""
    return None if value != value else float(value)
