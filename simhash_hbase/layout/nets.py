"""The two nets of one index and the one meaning of a match (docs/SPEC.md, "Nets").

- ``simhash``: the pigeonhole, flags 1..c (the scheme's segment combinations).
- ``lsh``: MinHash bands of character shingles, flags c+1..c+bands, in the same
  13-byte row keys (4-byte band key, flag, 8-byte fingerprint).

:func:`matches` is the rule every surface applies (the library's queries, the
ingest report, batch ``dedup``, both stores): a pair is a match when the
pigeonhole finds it within k bits (unless both sketches exist and say the texts
share almost nothing), or when their sketches' estimated Jaccard reaches the
threshold. :class:`Judge` applies it to arrays of pairs of prepared documents.

The candidates it judges are the same on every path: the documents sharing a
row prefix with the query (one of the pigeonhole's combination keys, or a band
key). The index finds them by scanning those prefixes; a batch (ingest's
within-batch pairs, ``shdb dedup``) by grouping equal keys
(:func:`~simhash_hbase.layout.groups.nets_graph`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.minhash import BINS, MinHashParams
from simhash_hbase.layout.scheme import Scheme

SIMHASH = "simhash"
SIMHASH_LSH = "simhash+lsh"
NETS = (SIMHASH, SIMHASH_LSH)
#: New indexes get both nets; an index whose manifest names none has the pigeonhole only.
DEFAULT_NETS = SIMHASH_LSH

#: Pairs judged at once (each ~4 x the sketch's bytes of scratch).
JUDGE_CHUNK = 1 << 18


def check_nets(nets: str) -> str:
    if nets not in NETS:
        raise InvalidSetting("nets", f"unknown nets {nets!r}; one of: {', '.join(NETS)}")
    return nets


def first_band_flag(scheme: Scheme) -> int:
    """Band b (0-based) has flag ``first_band_flag + b``: right after the combinations."""
    return scheme.rows_per_fingerprint + 1


def matches(near: ArrayLike, similarity: ArrayLike, lsh: MinHashParams | None) -> np.ndarray:
    """The one rule, over arrays of pairs: ``near`` is the pigeonhole's verdict
    (within k, or a probe within k and the probe bound); ``similarity`` the
    sketches' estimated Jaccard, NaN where a side has no sketch (the pigeonhole
    alone decides). Every judge of a pair calls this (docs/nets.md)."""
    near = np.asarray(near, dtype=bool)
    if lsh is None:
        return near
    sim = np.asarray(similarity, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN compares False: then ``near`` decides
        judged = (sim >= lsh.threshold) | (near & (sim >= lsh.floor))
    return np.where(np.isnan(sim), near, judged)


def is_match(near: bool, similarity: float | None, lsh: MinHashParams | None) -> bool:
    """:func:`matches` of one pair (``similarity`` None: a side has no sketch)."""
    return bool(
        matches(np.bool_(near), np.float64(np.nan if similarity is None else similarity), lsh)
    )


class Judge:
    """:func:`matches` over pairs of prepared documents held in arrays: their
    fingerprints, packed sketches (None: no sketch) and the rule's parameters."""

    def __init__(
        self,
        fps: np.ndarray,
        k: int,
        lsh: MinHashParams | None,
        sketches: Sequence[bytes | None] = (),
    ) -> None:
        self.fps, self.k, self.lsh = np.asarray(fps, dtype=np.uint64), k, lsh
        self.has = np.array([s is not None for s in sketches], dtype=bool).reshape(-1)
        if lsh is None or not self.has.any():
            self.lsh, self.has = None, np.zeros(len(self.fps), dtype=bool)
            return
        blank = bytes(lsh.sketch_bytes)
        raw = b"".join(blank if s is None else s for s in sketches)
        self.words = np.frombuffer(raw, dtype="<u8").reshape(len(sketches), -1)
        self.lanes = np.uint64(sum(1 << i for i in range(0, 64, lsh.sketch_bits)))

    def __call__(
        self, a: np.ndarray, b: np.ndarray, near: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(match, distance, similarity: NaN unless both have a sketch) of pairs a[i],
        b[i]; ``near``: the pigeonhole's verdict where it is more than distance <= k
        (probes), judged JUDGE_CHUNK at a time."""
        if len(a) <= JUDGE_CHUNK:
            return self._judged(a, b, near)
        parts = [
            self._judged(
                a[at : at + JUDGE_CHUNK],
                b[at : at + JUDGE_CHUNK],
                None if near is None else near[at : at + JUDGE_CHUNK],
            )
            for at in range(0, len(a), JUDGE_CHUNK)
        ]
        match, dist, sim = zip(*parts)
        return np.concatenate(match), np.concatenate(dist), np.concatenate(sim)

    def _judged(
        self, a: np.ndarray, b: np.ndarray, near: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dist = np.bitwise_count(self.fps[a] ^ self.fps[b]).astype(np.int64)
        near = dist <= self.k if near is None else near
        sim = np.full(len(a), np.nan)
        if self.lsh is not None:
            bits = self.lsh.sketch_bits
            x = self.words[a] ^ self.words[b]
            folded = x.copy()
            for shift in range(1, bits):
                folded |= x >> np.uint64(shift)
            differ = np.bitwise_count(folded & self.lanes).sum(axis=1, dtype=np.int64)
            chance = 2.0**-bits
            est = np.round(np.clip(((BINS - differ) / BINS - chance) / (1.0 - chance), 0.0, 1.0), 4)
            sim = np.where(self.has[a] & self.has[b], est, np.nan)
        return matches(near, sim, self.lsh), dist, sim


def band_candidates(bands: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Every pair (i < j) that shares a band key in the same band: an (m, 2) array,
    for evaluations that count them all (quadratic in a group of near-copies: the
    paths that report pairs take capped candidates, layout.groups).

    ``bands`` is (n, B) uint32, ``has`` marks the rows that have bands (texts with
    a sketch); one sort per band, pairs within each run of equal keys.
    """
    rows = np.flatnonzero(has)
    out: list[np.ndarray] = []
    if len(rows) < 2:  # no pair (a service's lone document): skip B sorts of nothing
        return np.zeros((0, 2), dtype=np.intp)
    for b in range(bands.shape[1]):
        keys = bands[rows, b]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, len(keys)])
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
            members = np.sort(rows[order[start : start + size]])
            i, j = np.triu_indices(size, 1)
            out.append(np.stack([members[i], members[j]], axis=1))
    if not out:
        return np.zeros((0, 2), dtype=np.intp)
    return np.unique(np.concatenate(out), axis=0)


def pair_similarities(sketches: np.ndarray, pairs: np.ndarray, bits: int) -> np.ndarray:
    """Estimated Jaccard of each pair from unpacked sketches ((n, 128) uint8)."""
    if not len(pairs):
        return np.zeros(0)
    agree = (sketches[pairs[:, 0]] == sketches[pairs[:, 1]]).mean(axis=1)
    chance = 2.0**-bits
    return np.round(np.clip((agree - chance) / (1.0 - chance), 0.0, 1.0), 4)
