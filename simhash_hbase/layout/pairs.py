"""All-pairs near-duplicate search over fingerprints held in memory (`shdb dedup`).

The same pigeonhole as the index, done with sorting instead of a store: for each
segment combination, fingerprints whose combined segments are equal sit next to
each other after a sort, and only those pairs are compared. Everything is NumPy
over whole arrays; Python runs once per combination and per group-size step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from simhash_hbase.layout.scheme import Scheme


class Pair(NamedTuple):
    """Two positions in the input (i < j) and their Hamming distance."""

    i: int
    j: int
    distance: int


def _lsd_order(segments: list[np.ndarray]) -> np.ndarray:
    """Sort order by several uint16 keys, most significant first.

    A stable sort of 16-bit keys is a radix sort in NumPy, so sorting by each
    key from the least significant up (LSD) beats one sort of 32-bit keys ~2x.
    """
    order = np.argsort(segments[-1], kind="stable")
    for seg in reversed(segments[:-1]):
        order = order[np.argsort(seg[order], kind="stable")]
    return order


def _candidate_pairs(keys: np.ndarray, order: np.ndarray) -> Iterator[np.ndarray]:
    """Index pairs (2, p) of rows with equal ``keys``, each unordered pair once."""
    ordered = keys[order]
    offset = 1
    while offset < len(ordered):
        # Rows at sorted positions p and p+offset are in one group iff equal; once
        # no group is longer than offset, no later offset can match either.
        same = ordered[offset:] == ordered[:-offset]
        if not same.any():
            return
        yield np.stack([order[:-offset][same], order[offset:][same]])
        offset += 1


def _unique(fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(return_inverse) with a fast path: usually nothing repeats."""
    ordered = np.sort(fps)
    if not (ordered[1:] == ordered[:-1]).any():
        return fps, np.arange(len(fps))
    unique, inverse = np.unique(fps, return_inverse=True)
    return unique, inverse.ravel()


def near_duplicate_pairs(fps: np.ndarray, k: int, scheme: Scheme) -> list[Pair]:
    """Every pair of input positions whose fingerprints differ in at most ``k`` bits.

    Exact for k <= ``scheme.k``; exact duplicates are found once, not per combination.
    """
    scheme.check_k(k)
    unique, inverse = _unique(np.ascontiguousarray(fps, dtype=np.uint64))
    segments = scheme.segments_many(unique)
    chunks: list[np.ndarray] = []
    for combo in scheme.combos:
        order = _lsd_order([segments[i] for i in combo])
        chunks += _candidate_pairs(scheme.combo_keys(segments, combo), order)
    near = _distinct_near(unique, chunks, k)
    return _expand(near, inverse, len(unique))


def _distinct_near(unique: np.ndarray, chunks: list[np.ndarray], k: int) -> np.ndarray:
    """(3, p): unique-fingerprint index pairs (a < b) within k, and their distance."""
    if not chunks:
        return np.empty((3, 0), dtype=np.int64)
    pairs = np.concatenate(chunks, axis=1).astype(np.int64)
    a, b = np.minimum(pairs[0], pairs[1]), np.maximum(pairs[0], pairs[1])
    dist = np.bitwise_count(unique[a] ^ unique[b]).astype(np.int64)
    keep = dist <= k
    a, b, dist = a[keep], b[keep], dist[keep]
    key, first = np.unique(a * len(unique) + b, return_index=True)
    return np.stack([key // len(unique), key % len(unique), dist[first]])


def _expand(near: np.ndarray, inverse: np.ndarray, n_unique: int) -> list[Pair]:
    """Unique-fingerprint pairs -> input-position pairs, plus exact duplicates.

    Most fingerprints occur once: those pairs map through one gather; only
    fingerprints held by several inputs take the per-member loop.
    """
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


def clusters(pairs: Sequence[Pair], n: int) -> list[list[int]]:
    """Connected components of the near-duplicate graph (size >= 2), by first member."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for x in range(n):
        groups.setdefault(find(x), []).append(x)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])
