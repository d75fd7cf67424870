"""The near-duplicate graph of a batch by both nets, in work linear in documents.

Documents are grouped into *nodes* (identical fingerprint, sketch and band keys),
and candidate pairs of nodes come from groups: nodes sharing a fingerprint, nodes
sharing one band key, and the nodes of two distinct fingerprints within k. Every
pair of a group is a candidate, so N one-character edits of one text are a few
groups of N nodes and N²/2 pairs, almost all matches. Instead of all of them:

- **Neighbours** (the edges :func:`~simhash_hbase.layout.pairs.nearest_earlier`
  reads): a group of up to ``SMALL + 1`` nodes has all its pairs judged; in a
  larger one each node is judged against its ``WINDOW`` (fingerprint groups) or
  ``BAND_WINDOW`` (band groups) neighbours in input order, and is marked
  incomplete: its count is then a lower bound. Two fingerprints within k pair
  their first ``WINDOW`` nodes each.
- **Clusters stay exact**: after those edges are joined, each large group is
  settled. Its components but the largest each compare their members with every
  member of the group outside their component (vectorised, stopping at one match
  per component met) and join what they match. Every matching pair of the group
  is then inside one component, so the components are those of the full pair
  graph. Mass copies make one component at once: the settle costs one pass.

A pair matches by :func:`~simhash_hbase.layout.nets.is_match`, judged over whole
arrays: Hamming distance of the fingerprints, and the sketches' agreement counted
on their packed words (XOR, lanes folded, popcount), the same estimate as
:func:`~simhash_hbase.layout.nets.pair_similarities`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simhash_hbase.fingerprint.minhash import BINS, MinHashParams
from simhash_hbase.layout.pairs import NearGraph, near_graph, roots
from simhash_hbase.layout.scheme import Scheme

#: Groups up to SMALL + 1 nodes are judged whole (exact neighbours and counts).
SMALL = 32
#: Neighbours judged per node in a larger group sharing a fingerprint (distance 0).
WINDOW = 16
#: ... and in a larger group sharing one band key (25 bands: 25 such groups a node).
BAND_WINDOW = 4
#: Pairs judged at once while settling (each ~4 x the sketch's bytes of scratch).
_CHUNK = 1 << 18


class Judge:
    """How two nodes match: their fingerprints, packed sketches and the predicate."""

    def __init__(
        self, fps: np.ndarray, k: int, lsh: MinHashParams, sketches: Sequence[bytes | None]
    ) -> None:
        self.fps, self.k, self.lsh = fps, k, lsh
        self.has = np.array([s is not None for s in sketches], dtype=bool)
        blank = bytes(lsh.sketch_bytes)
        raw = b"".join(blank if s is None else s for s in sketches)
        self.words = np.frombuffer(raw, dtype="<u8").reshape(len(sketches), -1)
        bits = lsh.sketch_bits
        self.lanes = np.uint64(sum(1 << i for i in range(0, 64, bits)))  # each lane's low bit

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(match, distance, similarity: NaN unless both have a sketch) of pairs a[i], b[i],
        judged _CHUNK at a time (scratch memory ~4 x the sketches of a chunk)."""
        if len(a) <= _CHUNK:
            return self._judged(a, b)
        parts = [
            self._judged(a[at : at + _CHUNK], b[at : at + _CHUNK])
            for at in range(0, len(a), _CHUNK)
        ]
        match, dist, sim = zip(*parts)
        return np.concatenate(match), np.concatenate(dist), np.concatenate(sim)

    def _judged(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dist = np.bitwise_count(self.fps[a] ^ self.fps[b]).astype(np.int64)
        x = self.words[a] ^ self.words[b]
        folded = x.copy()
        for shift in range(1, self.lsh.sketch_bits):
            folded |= x >> np.uint64(shift)
        differ = np.bitwise_count(folded & self.lanes).sum(axis=1, dtype=np.int64)
        agree = (BINS - differ) / BINS
        chance = 2.0**-self.lsh.sketch_bits
        sim = np.round(np.clip((agree - chance) / (1.0 - chance), 0.0, 1.0), 4)
        both = self.has[a] & self.has[b]
        near = dist <= self.k
        match = np.where(near, ~both | (sim >= self.lsh.floor), both & (sim >= self.lsh.threshold))
        return match, dist, np.where(both, sim, np.nan)


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


class _Forest:
    """Union-find over node numbers: ``parent`` roots are their own parent."""

    def __init__(self, label: np.ndarray) -> None:
        self.parent = label.copy()

    def find(self, nodes: np.ndarray) -> np.ndarray:
        top = self.parent[nodes]
        while not np.array_equal(up := self.parent[top], top):
            top = up
        self.parent[nodes] = top
        return top

    def join(self, a: int, b: int) -> bool:
        ra, rb = self.find(np.array([a, b])).tolist()
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)
        return bool(ra != rb)


def _meet(forest: _Forest, judge: Judge, mine: np.ndarray, pool: np.ndarray) -> list[int]:
    """Join ``mine`` (one component) with every component of ``pool`` one of its
    members matches; the pairs that joined, flat (a, b, a, b, ...)."""
    out: list[int] = []
    at = 0
    while at < len(mine):
        own = forest.find(mine[:1])[0]
        theirs = pool[forest.find(pool) != own]
        if not len(theirs):
            break
        part = mine[at : at + max(1, _CHUNK // len(theirs))]
        at += len(part)
        a, b = np.repeat(part, len(theirs)), np.tile(theirs, len(part))
        match, _, _ = judge(a, b)
        a, b = a[match], b[match]
        _, first = np.unique(forest.find(b), return_index=True)
        for x, y in zip(a[first].tolist(), b[first].tolist()):
            if forest.join(x, y):
                out += (x, y)
    return out


def _settle(
    forest: _Forest, judge: Judge, left: np.ndarray, right: np.ndarray | None = None
) -> list[int]:
    """Make the components exact over one group: the pairs within ``left``, or with
    ``right`` the pairs across (left x right). Every component but the largest
    meets the rest of the group; the pairs that joined, flat."""
    everyone = left if right is None else np.concatenate([left, right])
    start = forest.find(everyone)
    comps, sizes = np.unique(start, return_counts=True)
    if len(comps) == 1:
        return []
    largest = comps[np.argmax(sizes)]
    sides = [(left, start[: len(left)], left if right is None else right)]
    if right is not None:
        sides.append((right, start[len(left) :], left))
    out: list[int] = []
    for comp in comps[np.argsort(sizes, kind="stable")].tolist():
        if comp == largest:
            continue
        for members, at_start, pool in sides:
            mine = members[at_start == comp]
            if len(mine):
                out += _meet(forest, judge, mine, pool)
    return out


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
                self.codes = [np.unique(np.concatenate(self.codes))]
        for members in big:
            self.incomplete[members] = True
            self.big.append((members, None))

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        codes = np.unique(np.concatenate(self.codes))
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
    cands.add(*_windowed(nodes, np.arange(n, dtype=np.int64), WINDOW))
    banded = np.flatnonzero(judge.has & np.array([b is not None for _, _, b in keys], dtype=bool))
    if len(banded):
        table = np.frombuffer(b"".join(keys[i][2] for i in banded.tolist()), dtype=">u4")  # type: ignore[misc]
        table = table.reshape(len(banded), -1)
        for band in range(table.shape[1]):
            cands.add(*_windowed(table[:, band], banded, BAND_WINDOW))
    _near_fingerprints(cands, nodes, k, scheme)
    a, b = cands.edges()
    forest = _Forest(roots(n, np.stack([a, b])))
    joined: list[int] = []
    for left, right in cands.big:
        joined += _settle(forest, judge, left, right)
    extra = np.array(joined, dtype=np.int64).reshape(-1, 2)
    a = np.concatenate([a, np.minimum(extra[:, 0], extra[:, 1])])
    b = np.concatenate([b, np.maximum(extra[:, 0], extra[:, 1])])
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    _, dist, sim = judge(a, b)
    return NearGraph(nodes, inverse, np.stack([a, b, dist]), sim, judge.has, ~cands.incomplete)
