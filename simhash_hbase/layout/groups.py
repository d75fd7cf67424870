"""The near-duplicate graph of a batch by both nets, in work linear in documents.

Documents are grouped into *nodes* (identical fingerprint, sketch and band keys),
and candidate pairs of nodes come from groups, the same candidates the index's
scans find (layout.nets): nodes sharing a fingerprint, one of the pigeonhole's
combination keys (any distance: beyond k, the similarity decides) or one band
key, and the nodes of two distinct fingerprints within k. Every pair of a group
is a candidate, so N one-character edits of one text are a few
groups of N nodes and N²/2 pairs, almost all matches. Instead of all of them:

- **Neighbours** (the edges :func:`~simhash_hbase.layout.pairs.nearest_earlier`
  reads): a group of up to ``SMALL + 1`` nodes has all its pairs judged; in a
  larger one each node is judged against its ``WINDOW`` (fingerprint groups) or
  ``BAND_WINDOW`` (combination and band groups) neighbours in input order, and is marked
  incomplete: its count is then a lower bound. Two fingerprints within k pair
  their first ``WINDOW`` nodes each.
- **Clusters stay exact** (star clusters, :func:`~simhash_hbase.layout.pairs.stars`):
  sweeping the nodes in input order, a node of a large group is also judged
  against every representative so far of each large group it is in, so its
  representative is the one a judge of every pair would give it (as Spark's).
  Mass copies have one representative: the sweep costs one judged pair a node.

A pair matches by :class:`~simhash_hbase.layout.nets.Judge` (the one rule,
:func:`~simhash_hbase.layout.nets.matches`), over whole arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.layout.nets import JUDGE_CHUNK as _CHUNK
from simhash_hbase.layout.nets import Judge
from simhash_hbase.layout.pairs import (
    NearGraph,
    expand_pairs,
    near_duplicate_pairs,
    near_graph,
    stars,
)
from simhash_hbase.layout.scheme import Scheme

#: Groups up to SMALL + 1 nodes are judged whole (exact neighbours and counts).
SMALL = 32
#: Neighbours judged per node in a larger group sharing a fingerprint (distance 0).
WINDOW = 16
#: ... and in a larger group sharing one band key (25 bands: 25 such groups a node).
BAND_WINDOW = 4
#: A pair (i, j) of a batch, i < j, with its Hamming distance and estimated Jaccard.
NetPair = tuple[int, int, int, float | None]


def _windowed(
    keys: np.ndarray, rows: np.ndarray, width: int
) -> tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray]]:
    """Candidate pairs (a < b) of ``rows`` sharing a key: all pairs of a group of up
    to SMALL + 1, each row's ``width`` next ones in a larger group; and the larger
    groups' members."""
    order = np.lexsort((rows, keys))
    ks, rs = keys[order], rows[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, int)
    sizes = np.diff(np.r_[starts, len(ks)])
    large = sizes > SMALL + 1
    reach = np.repeat(np.where(large, width, SMALL), sizes)
    a: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    b: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for offset in range(1, min(SMALL, len(ks) - 1) + 1):
        same = np.flatnonzero((ks[offset:] == ks[:-offset]) & (reach[:-offset] >= offset))
        if not len(same):
            break
        a.append(rs[same])
        b.append(rs[same + offset])
    big = [rs[s : s + z] for s, z in zip(starts[large].tolist(), sizes[large].tolist())]
    return (np.concatenate(a), np.concatenate(b)), big


def _distinct(codes: np.ndarray) -> np.ndarray:
    """``np.unique`` of pair codes by a sort: NumPy 2.4's hash-table unique takes
    ~14x the CPU on millions of codes (a group of mass near-copies)."""
    ordered = np.sort(codes)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


class _Candidates:
    """Candidate pairs judged as they come; the matches kept as codes a * n + b."""

    def __init__(self, judge: Judge, n: int) -> None:
        self.judge, self.n = judge, n
        self.codes: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        self.incomplete = np.zeros(n, dtype=bool)
        self.big: list[tuple[np.ndarray, np.ndarray | None]] = []

    def add(self, pairs: tuple[np.ndarray, np.ndarray], big: list[np.ndarray]) -> None:
        a, b = pairs
        if len(a):
            match, _, _ = self.judge(a, b)
            self.codes.append(a[match] * self.n + b[match])
            if sum(map(len, self.codes)) > 64 * _CHUNK:  # windows of many groups repeat pairs
                self.codes = [_distinct(np.concatenate(self.codes))]
        for members in big:
            self.incomplete[members] = True
            self.big.append((members, None))

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        codes = _distinct(np.concatenate(self.codes))
        return codes // self.n, codes % self.n


def _near_fingerprints(cands: _Candidates, fps: np.ndarray, k: int, scheme: Scheme) -> None:
    """Pairs of nodes whose distinct fingerprints are within ``k`` (1..k bits): the
    first WINDOW nodes of each fingerprint against the other's."""
    fp_graph = near_graph(fps, k, scheme)
    f, g = fp_graph.edges[0], fp_graph.edges[1]
    if not len(f):
        return
    counts = np.bincount(fp_graph.inverse, minlength=len(fp_graph.unique))
    order = np.argsort(fp_graph.inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    single = (counts[f] == 1) & (counts[g] == 1)
    x, y = order[starts[f[single]]], order[starts[g[single]]]
    cands.add((np.minimum(x, y), np.maximum(x, y)), [])
    a: list[np.ndarray] = []
    b: list[np.ndarray] = []
    for u, v in zip(f[~single].tolist(), g[~single].tolist()):
        left, right = order[starts[u] : starts[u + 1]], order[starts[v] : starts[v + 1]]
        head, tail = left[:WINDOW], right[:WINDOW]
        x, y = np.repeat(head, len(tail)), np.tile(tail, len(head))
        a.append(np.minimum(x, y))
        b.append(np.maximum(x, y))
        if len(left) > WINDOW or len(right) > WINDOW:
            cands.incomplete[left] = cands.incomplete[right] = True
            cands.big.append((left, right))
    if a:
        cands.add((np.concatenate(a), np.concatenate(b)), [])


class _Unsure:
    """:class:`~simhash_hbase.layout.pairs.Settle` of the large groups: a node whose
    edges are bounded is judged against every representative so far of each large
    group it is in (all of them share a key with it: the same candidates as Spark's,
    which judges every pair)."""

    def __init__(self, judge: Judge, big: list[tuple[np.ndarray, np.ndarray | None]]) -> None:
        self.judge = judge
        groups = [m if r is None else np.concatenate([m, r]) for m, r in big]
        nodes = np.concatenate([np.zeros(0, dtype=np.int64), *groups]).astype(np.int64)
        tags = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        order = np.argsort(nodes, kind="stable")
        self.nodes, self.tags = nodes[order], tags[order]
        self.leads: list[list[int]] = [[] for _ in groups]

    def unsure(self) -> np.ndarray:
        return np.unique(self.nodes)

    def _tags(self, v: int) -> list[int]:
        lo, hi = np.searchsorted(self.nodes, [v, v + 1]).tolist()
        return self.tags[lo:hi].tolist()  # type: ignore[no-any-return]

    def matched(self, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        found = {e for t in self._tags(v) for e in self.leads[t]}
        found.discard(v)
        theirs = np.array(sorted(found), dtype=np.int64)
        match, dist, sim = self.judge(np.full(len(theirs), v, dtype=np.int64), theirs)
        return theirs[match], dist[match], sim[match]

    def lead(self, v: int) -> None:
        for t in self._tags(v):
            self.leads[t].append(v)


def nets_graph(
    fps: np.ndarray,
    k: int,
    scheme: Scheme,
    lsh: MinHashParams,
    sketches: Sequence[bytes | None],
    bands: Sequence[bytes | None],
) -> NearGraph:
    """:class:`NearGraph` by both nets: one node per distinct (fingerprint, sketch,
    band keys); bounded neighbours per node, exact components (module docstring)."""
    node_of: dict[tuple[int, bytes | None, bytes | None], int] = {}
    inverse = np.array(
        [node_of.setdefault(key, len(node_of)) for key in zip(fps.tolist(), sketches, bands)],
        dtype=np.int64,
    )
    keys = list(node_of)
    nodes = np.array([fp for fp, _, _ in keys], dtype=np.uint64)
    n = len(nodes)
    judge = Judge(nodes, k, lsh, [s for _, s, _ in keys])
    cands = _Candidates(judge, n)
    every = np.arange(n, dtype=np.int64)
    cands.add(*_windowed(nodes, every, WINDOW))
    segments = scheme.segments_many(nodes)
    for combo in scheme.combos:  # the pigeonhole's rows: beyond k the similarity decides
        cands.add(*_windowed(scheme.combo_keys(segments, combo), every, BAND_WINDOW))
    banded = np.flatnonzero(judge.has & np.array([b is not None for _, _, b in keys], dtype=bool))
    if len(banded):
        table = np.frombuffer(b"".join(keys[i][2] for i in banded.tolist()), dtype=">u4")  # type: ignore[misc]
        table = table.reshape(len(banded), -1)
        for band in range(table.shape[1]):
            cands.add(*_windowed(table[:, band], banded, BAND_WINDOW))
    _near_fingerprints(cands, nodes, k, scheme)
    a, b = cands.edges()
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    _, dist, sim = judge(a, b)
    edges = np.stack([a, b, dist])
    leader = stars(np.arange(n, dtype=np.int64), edges, sim, _Unsure(judge, cands.big))
    return NearGraph(nodes, inverse, edges, sim, judge.has, ~cands.incomplete, leader)


def batch_pairs(
    fps: np.ndarray,
    k: int,
    scheme: Scheme,
    lsh: MinHashParams | None = None,
    sketches: Sequence[bytes | None] = (),
    bands: Sequence[bytes | None] = (),
) -> list[NetPair]:
    """Every matching pair of a batch (i, j, distance, similarity), i < j, sorted:
    the pairs of :func:`nets_graph` (of :func:`~simhash_hbase.layout.pairs.near_graph`
    without sketches), listed. Complete while no group exceeds SMALL + 1 nodes."""
    if lsh is None or not any(s is not None for s in sketches):
        return [(i, j, d, None) for i, j, d in near_duplicate_pairs(fps, k, scheme)]
    graph = nets_graph(fps, k, scheme, lsh, sketches, bands)
    assert graph.similarity is not None and graph.sketched is not None  # nets_graph's
    sims = {(a, b): s for a, b, s in zip(*graph.edges[:2].tolist(), graph.similarity.tolist())}
    same = [1.0 if s else None for s in graph.sketched.tolist()]
    out: list[NetPair] = []
    for i, j, d in expand_pairs(graph):
        u, v = sorted((int(graph.inverse[i]), int(graph.inverse[j])))
        sim = same[u] if u == v else sims[(u, v)]
        out.append((i, j, d, None if sim is None or sim != sim else sim))
    return out
