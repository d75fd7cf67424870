"""All-pairs near-duplicate search over fingerprints held in memory (`shdb dedup`).

The same pigeonhole as the index, done with sorting instead of a store: for each
segment combination, fingerprints whose combined segments are equal sit next to
each other after a sort, and only those pairs are compared. Everything is NumPy
over whole arrays; Python runs once per combination and per group-size step.

Mass copies are grouped first: identical fingerprints become one node of a
:class:`NearGraph` whose edges join distinct fingerprints within k, so clusters
and the bounded per-document view cost work in documents, not in pairs. Clusters
are stars (:func:`stars`): every member matches its cluster's representative.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from simhash_hbase.layout.scheme import Scheme

#: Groups of equal combination keys larger than this are compared block by block
#: (an m x m matrix in blocks of _BLOCK rows), never as a list of candidate pairs.
_BIG_GROUP = 64
_BLOCK = 512


class Pair(NamedTuple):
    """Two positions in the input (i < j) and their Hamming distance."""

    i: int
    j: int
    distance: int


class NearGraph(NamedTuple):
    """An input's distinct documents as nodes: their fingerprints (``unique``),
    which node each input position is (``inverse``), and the pairs of nodes that
    match: ``edges`` is (3, e) int64 rows a < b and their distance. Inputs of one
    node match each other (identical). By the pigeonhole alone a node is a
    distinct fingerprint; with sketches (layout.nets), a distinct (fingerprint,
    sketch, bands), and ``similarity`` holds each edge's estimate (NaN: none) and
    ``sketched`` which nodes have a sketch (their copies: similarity 1.0).
    ``complete`` (None: all) marks the nodes whose edges are every match they have
    (layout.groups bounds the edges of a node in a large group, and settles its
    ``leader``: the clusters stay exact, and that node's count is a lower bound)."""

    unique: np.ndarray
    inverse: np.ndarray
    edges: np.ndarray
    similarity: np.ndarray | None = None
    sketched: np.ndarray | None = None
    complete: np.ndarray | None = None
    #: Each node's representative where the graph's builder settled it (layout.groups
    #: judges the nodes its bounded edges leave unsure); None: :func:`stars` of the edges.
    leader: np.ndarray | None = None

    def first(self) -> np.ndarray:
        """Each node's first input position."""
        first = np.full(len(self.unique), len(self.inverse), dtype=np.int64)
        np.minimum.at(first, np.asarray(self.inverse, dtype=np.int64), np.arange(len(self.inverse)))
        return first

    def counts(self) -> np.ndarray:
        return np.bincount(self.inverse, minlength=len(self.unique))

    def exact(self) -> bool:
        """Whether the edges are every matching pair (else counts are lower bounds)."""
        return self.complete is None or bool(self.complete.all())

    def pair_count(self) -> int:
        """How many input pairs match (without listing them); a lower bound unless
        :meth:`exact`."""
        counts = self.counts().astype(object)  # Python ints: no overflow at 10^5 copies
        same = sum(c * (c - 1) // 2 for c in counts.tolist() if c > 1)
        a, b = self.edges[0].tolist(), self.edges[1].tolist()
        return int(same + sum(counts[x] * counts[y] for x, y in zip(a, b)))


def _lsd_order(segments: list[np.ndarray]) -> np.ndarray:
    """Sort order by several uint16 keys, most significant first.

    A stable sort of 16-bit keys is a radix sort in NumPy, so sorting by each
    key from the least significant up (LSD) beats one sort of 32-bit keys ~2x.
    """
    order = np.argsort(segments[-1], kind="stable")
    for seg in reversed(segments[:-1]):
        order = order[np.argsort(seg[order], kind="stable")]
    return order


class _Combo(NamedTuple):
    """One combination's keys, and those of the combinations before it: a pair
    equal there was found there already, so each pair is kept once, by the first."""

    keys: np.ndarray
    earlier: list[np.ndarray]


def _near_in_combo(
    unique: np.ndarray, combo: _Combo, order: np.ndarray, k: int
) -> Iterator[np.ndarray]:
    """(3, p) pairs of rows with equal keys within ``k``, found near ones only:
    small groups by comparing rows ``offset`` apart in sorted order, big groups in
    blocks, so memory follows the pairs kept, not the candidates compared."""
    ordered = combo.keys[order]
    bounds = np.flatnonzero(np.diff(ordered)) + 1
    starts = np.concatenate([[0], bounds])
    sizes = np.diff(np.concatenate([starts, [len(ordered)]]))
    big = sizes > _BIG_GROUP
    for start, size in zip(starts[big].tolist(), sizes[big].tolist()):
        yield from _near_block(unique, combo, order[start : start + size], k)
    small = np.repeat(~big, sizes)
    order, ordered = order[small], ordered[small]
    for offset in range(1, min(_BIG_GROUP, len(ordered))):
        same = np.flatnonzero(ordered[offset:] == ordered[:-offset])
        if not len(same):
            return
        yield _kept(unique, combo, order[same], order[same + offset], k)


def _near_block(
    unique: np.ndarray, combo: _Combo, members: np.ndarray, k: int
) -> Iterator[np.ndarray]:
    """Pairs within ``k`` among the rows ``members`` of one big group."""
    fps = unique[members]
    for top in range(0, len(members), _BLOCK):
        rows = np.arange(top, min(top + _BLOCK, len(members)))
        dist = np.bitwise_count(fps[rows, None] ^ fps[None, top:])
        r, c = np.nonzero(dist <= k)
        later = c + top > rows[r]
        yield _kept(unique, combo, members[rows[r[later]]], members[c[later] + top], k)


def _kept(unique: np.ndarray, combo: _Combo, x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The pairs (x, y) within ``k`` that no earlier combination found, as (3, p)."""
    a, b = np.minimum(x, y).astype(np.int64), np.maximum(x, y).astype(np.int64)
    dist = np.bitwise_count(unique[a] ^ unique[b]).astype(np.int64)
    keep = dist <= k
    for keys in combo.earlier:
        keep &= keys[a] != keys[b]
    return np.stack([a[keep], b[keep], dist[keep]])


def _unique(fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(return_inverse) with a fast path: usually nothing repeats."""
    ordered = np.sort(fps)
    if not (ordered[1:] == ordered[:-1]).any():
        return fps, np.arange(len(fps))
    unique, inverse = np.unique(fps, return_inverse=True)
    return unique, inverse.ravel()


def near_graph(fps: np.ndarray, k: int, scheme: Scheme) -> NearGraph:
    """Identical fingerprints grouped, and every pair of distinct ones within ``k``.

    Exact for k <= ``scheme.k``. Memory: the input, one combination's sort, and
    the near pairs of distinct fingerprints (at most ~43,700 per fingerprint at
    k=3, whatever the number of copies or of candidates compared).
    """
    scheme.check_k(k)
    unique, inverse = _unique(np.ascontiguousarray(fps, dtype=np.uint64))
    segments = scheme.segments_many(unique)
    found: list[np.ndarray] = [np.empty((3, 0), dtype=np.int64)]
    earlier: list[np.ndarray] = []
    for combo in scheme.combos:
        keys = scheme.combo_keys(segments, combo)
        order = _lsd_order([segments[i] for i in combo])
        found += _near_in_combo(unique, _Combo(keys, list(earlier)), order, k)
        earlier.append(keys)
    return NearGraph(unique, inverse, np.concatenate(found, axis=1))


def pairs_in_groups(
    fps: np.ndarray, keys: np.ndarray, k: int, earlier: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """(3, p) pairs (a < b row indices, distance) of rows with equal ``keys`` within
    ``k``, less those equal in any ``earlier`` key array (found there already): one
    combination of :func:`near_graph`, for callers that hold only some rows (Spark)."""
    order = np.argsort(keys, kind="stable")
    found = _near_in_combo(fps, _Combo(keys, list(earlier)), order, k)
    return np.concatenate([np.empty((3, 0), dtype=np.int64), *found], axis=1)


def near_duplicate_pairs(fps: np.ndarray, k: int, scheme: Scheme) -> list[Pair]:
    """Every pair of input positions whose fingerprints differ in at most ``k`` bits.

    Exact for k <= ``scheme.k``. Lists every pair: n identical inputs give
    n(n-1)/2 of them; :func:`clusters_of` and :func:`nearest_earlier` do not.
    """
    return expand_pairs(near_graph(fps, k, scheme))


def expand_pairs(graph: NearGraph) -> list[Pair]:
    """Distinct-fingerprint pairs -> input-position pairs, plus exact duplicates.

    Most fingerprints occur once: those pairs map through one gather; only
    fingerprints held by several inputs take the per-member loop.
    """
    near, inverse, n_unique = graph.edges, graph.inverse, len(graph.unique)
    counts = np.bincount(inverse, minlength=n_unique)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    first = order[starts[:-1]]
    single = (counts[near[0]] == 1) & (counts[near[1]] == 1)
    x, y = first[near[0][single]], first[near[1][single]]
    out = [
        Pair(i, j, d)
        for i, j, d in zip(
            np.minimum(x, y).tolist(), np.maximum(x, y).tolist(), near[2][single].tolist()
        )
    ]

    def members(u: int) -> list[int]:
        return order[starts[u] : starts[u + 1]].tolist()  # type: ignore[no-any-return]

    for u in np.flatnonzero(counts > 1).tolist():
        group = members(u)
        out += [Pair(a, b, 0) for n, a in enumerate(group) for b in group[n + 1 :]]
    for a, b, d in near[:, ~single].T.tolist():
        out += [Pair(min(i, j), max(i, j), d) for i in members(a) for j in members(b)]
    out.sort()
    return out


class Settle(Protocol):
    """Where a node's edges are not all its matches (layout.groups bounds them in a
    large group), what :func:`stars` asks besides the edges."""

    def unsure(self) -> np.ndarray:
        """The nodes whose edges may miss a match."""

    def matched(self, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The representatives so far that ``v`` matches beyond its edges: (nodes,
        distances, similarities, NaN: none)."""

    def lead(self, v: int) -> None:
        """``v`` represents a cluster from now on."""


def stars(
    first: np.ndarray,
    edges: np.ndarray,
    similarity: np.ndarray | None = None,
    settle: Settle | None = None,
) -> np.ndarray:
    """Each node's representative (docs/nets.md, "Clusters"): nodes in input order
    (``first``: a node's first input position); a node joins the most similar
    representative before it that it matches (higher similarity, a node without
    one last; then the smaller distance; then the earlier), else it represents
    itself. So every member of a cluster matches its representative, and a chain
    of small edits is cut where its ends fall apart. One sweep over the nodes that
    have an edge, in Python per edge."""
    n = len(first)
    leader = np.arange(n, dtype=np.int64)
    a, b, d = (np.asarray(x, dtype=np.int64) for x in edges)
    sim = np.full(len(a), np.nan) if similarity is None else np.asarray(similarity, dtype=float)
    swap = first[a] > first[b]
    early, late = np.where(swap, b, a), np.where(swap, a, b)
    worse = np.where(np.isnan(sim), 2.0, -sim)  # no similarity: after every one
    order = np.lexsort((first[early], d, worse, first[late]))
    early, late, d, worse = early[order], late[order], d[order], worse[order]
    unsure = np.zeros(0, dtype=np.int64) if settle is None else settle.unsure()
    visit = np.unique(np.concatenate([late, unsure]))
    visit = visit[np.argsort(first[visit], kind="stable")]
    lo = np.searchsorted(first[late], first[visit]).tolist()
    hi = np.searchsorted(first[late], first[visit], side="right").tolist()
    unsure_of = np.zeros(n, dtype=bool)
    unsure_of[unsure] = True
    for v, start, stop in zip(visit.tolist(), lo, hi):
        best: tuple[float, int, int, int] | None = None
        ends = zip(early[start:stop].tolist(), worse[start:stop].tolist(), d[start:stop].tolist())
        for e, w, dist in ends:
            if leader[e] == e:
                best = (w, dist, int(first[e]), e)
                break
        if settle is not None and unsure_of[v]:
            nodes, dists, sims = settle.matched(v)
            for e, dist, s in zip(nodes.tolist(), dists.tolist(), sims.tolist()):
                key = (2.0 if s != s else -s, dist, int(first[e]), e)
                if best is None or key < best:
                    best = key
        if best is not None:
            leader[v] = best[3]
        elif settle is not None and unsure_of[v]:
            settle.lead(v)
    return leader


def clusters_of(graph: NearGraph) -> list[list[int]]:
    """Star clusters of the input (docs/nets.md, "Clusters") from its distinct-document
    graph, identical inputs being one node (so in one cluster): each node's
    representative (``graph.leader``, else :func:`stars` of the edges), then each
    input joins its node's; work in inputs and distinct pairs, never in copies x
    copies. Lists of input positions, in input order (the representative first)."""
    leader = graph.leader
    if leader is None:
        leader = stars(graph.first(), graph.edges, graph.similarity)
    return _groups(leader, graph.inverse)


def _groups(leader: np.ndarray, node_of: np.ndarray) -> list[list[int]]:
    """Input positions p grouped by ``leader[node_of[p]]`` (groups of two or more,
    each in input order), by first member."""
    label = leader[np.asarray(node_of, dtype=np.int64)]
    order = np.argsort(label, kind="stable")
    bounds = np.flatnonzero(np.diff(label[order])) + 1
    groups = [g.tolist() for g in np.split(order, bounds) if len(g) > 1]
    return sorted(groups, key=lambda g: g[0])


def roots(nodes: int, edges: np.ndarray) -> np.ndarray:
    """Each node's component, as its smallest node: hook each edge's larger root
    under the smaller, then jump pointers, until every edge is inside a component
    (whole arrays per round; rounds grow with the log of the longest chain)."""
    label = np.arange(nodes, dtype=np.int64)
    a, b = edges
    while True:
        la, lb = label[a], label[b]
        if (la == lb).all():
            return label
        np.minimum.at(label, np.maximum(la, lb), np.minimum(la, lb))
        while not ((jumped := label[label]) == label).all():
            label = jumped


class Nearest(NamedTuple):
    """Input ``j``'s nearest earlier inputs [(position, distance, similarity)], at
    most ``limit``, by distance then id, and how many earlier inputs match in all
    (``exact``; else a lower bound, and the nearest among those judged)."""

    j: int
    near: list[tuple[int, int, float | None]]
    total: int
    exact: bool = True


def nearest_earlier(graph: NearGraph, ids: Sequence[str], limit: int | None) -> Iterator[Nearest]:
    """For each input with near-copies before it in input order, its nearest ones.

    One sweep in input order over the inputs whose fingerprint has near ones or
    copies (the others have no near-copy, and none of them is one): per distinct
    fingerprint, how many inputs held it so far and the ``limit`` smallest ids among
    them; an input reads those of its own fingerprint and of its near ones. Work:
    inputs in pairs x (near fingerprints + limit), no Python step for the others
    (1 M inputs with 10,000 near pairs: 2.1 s of a 2.4 s ``shdb dedup`` before).
    """
    n = len(graph.unique)
    same = [1.0 if s else None for s in _flags(graph.sketched, n)]
    whole = [True] * n if graph.complete is None else graph.complete.tolist()
    nears = _near_lists(graph)
    inverse = np.asarray(graph.inverse, dtype=np.int64)
    paired = np.zeros(n, dtype=bool)
    paired[list(nears)] = True
    paired |= np.bincount(inverse, minlength=n) > 1
    inputs = np.flatnonzero(paired[inverse])
    seen: dict[int, int] = {}
    smallest: defaultdict[int, list[tuple[str, int]]] = defaultdict(list)
    for j, u in zip(inputs.tolist(), inverse[inputs].tolist()):
        hits = [(0, doc_id, i, same[u]) for doc_id, i in smallest[u]]
        total = seen.get(u, 0)
        for v, dv, sv in nears.get(u, ()):
            if v in seen:
                total += seen[v]
                hits += [(dv, doc_id, i, sv) for doc_id, i in smallest[v]]
        if total:
            top = (
                sorted(hits, key=_hit_key)
                if limit is None
                else heapq.nsmallest(limit, hits, key=_hit_key)
            )
            yield Nearest(j, [(i, dv, s) for dv, _, i, s in top], total, whole[u])
        seen[u] = seen.get(u, 0) + 1
        bisect.insort(smallest[u], (ids[j], j))
        if limit is not None:
            del smallest[u][limit:]


def _near_lists(graph: NearGraph) -> dict[int, list[tuple[int, int, float | None]]]:
    """Each distinct fingerprint's near ones [(fingerprint, distance, similarity or
    None)], in edge order, for those that have any."""
    a, b, d = graph.edges
    sims = graph.similarity
    sim = [None] * len(a) if sims is None else [None if s != s else s for s in sims.tolist()]
    nears: dict[int, list[tuple[int, int, float | None]]] = {}
    for u, v, dv, sv in zip(
        [*a.tolist(), *b.tolist()], [*b.tolist(), *a.tolist()], [*d.tolist()] * 2, sim * 2
    ):
        nears.setdefault(u, []).append((v, dv, sv))
    return nears


def _hit_key(hit: tuple[int, str, int, float | None]) -> tuple[int, str, int]:
    return hit[0], hit[1], hit[2]


def _flags(sketched: np.ndarray | None, n: int) -> list[bool]:
    return [False] * n if sketched is None else sketched.tolist()  # type: ignore[no-any-return]
