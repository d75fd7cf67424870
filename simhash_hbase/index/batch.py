"""The documents of one write batch among themselves, and the pigeonhole's verdict
with probes: what :meth:`~simhash_hbase.index.lookup.Finder.lookups` adds to the held
documents' lookups (grouping equal keys, as ``shdb dedup``:
:func:`~simhash_hbase.layout.groups.nets_graph`)."""

from __future__ import annotations

import numpy as np

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.probes import bound
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.nets import Judge
from simhash_hbase.layout.pairs import near_graph
from simhash_hbase.layout.scheme import Scheme

#: A new document's (probe list, sketch, bands): what its lookup depends on.
InsertKey = tuple[tuple[int, ...], bytes | None, bytes | None]


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


def settle_new(
    keys: list[InsertKey], judge: Judge, s: int, targets: list[int], k: int
) -> list[tuple[int, int, float | None]]:
    """The keys of ``targets`` that key ``s`` matches, judged by the one rule (with
    its probes: :func:`probe_near`): whether a check-and-add's document is new
    must not rest on the bounded neighbours of a large group (layout.groups), so
    one whose count there is a lower bound of 0 meets every document written."""
    if not targets:
        return []
    t = np.array(targets, dtype=np.int64)
    near = probe_near([list(keys[s][0])], np.zeros(len(t), dtype=np.int64), judge.fps[t], k)
    match, dist, sim = judge(np.full(len(t), s, dtype=np.int64), t, near)
    return [
        (x, d, None if v != v else v)
        for x, d, v in zip(t[match].tolist(), dist[match].tolist(), sim[match].tolist())
    ]


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
