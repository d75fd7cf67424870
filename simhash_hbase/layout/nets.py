"""The two nets of one index and the one meaning of a match (docs/SPEC.md, "Nets").

- ``simhash``: the pigeonhole, flags 1..c (the scheme's segment combinations).
- ``lsh``: MinHash bands of character shingles, flags c+1..c+bands, in the same
  13-byte row keys (4-byte band key, flag, 8-byte fingerprint).

:func:`matches` is the rule every surface applies (the library's queries, the
ingest report, batch ``dedup``, both stores): a pair is a match when the
pigeonhole finds it within k bits (unless both sketches exist and say the texts
share almost nothing), or when their sketches' estimated Jaccard reaches the
threshold; when both sketches carry evidence, when their similarity alone reaches
it (near the threshold, the evidence's lower bound: docs/nets.md, "Evidence").
:func:`confirm` applies it to pairs of stored sketches (:class:`Judge`, Spark),
:class:`Judge` to arrays of pairs of prepared documents.

The candidates it judges are the same on every path: the documents sharing a
row prefix with the query (one of the pigeonhole's combination keys, or a band
key). The index finds them by scanning those prefixes; a batch (ingest's
within-batch pairs, ``shdb dedup``) by grouping equal keys
(:func:`~simhash_hbase.layout.groups.nets_graph`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.minhash import BINS, MinHashParams, evidence_similarity
from simhash_hbase.layout import codec
from simhash_hbase.layout.scheme import Scheme

SIMHASH = "simhash"
SIMHASH_LSH = "simhash+lsh"
NETS = (SIMHASH, SIMHASH_LSH)
#: New indexes get both nets; an index whose manifest names none has the pigeonhole only.
DEFAULT_NETS = SIMHASH_LSH

#: Pairs judged at once (each ~4 x the stored sketch's bytes of scratch).
JUDGE_CHUNK = 1 << 15
#: A sketch estimate this close to the threshold (or below it and within this of the
#: floor) is replaced by the evidence's, where both sides have evidence.
EVIDENCE_MARGIN = 0.2


def check_nets(nets: str) -> str:
    if nets not in NETS:
        raise InvalidSetting("nets", f"unknown nets {nets!r}; one of: {', '.join(NETS)}")
    return nets


def first_band_flag(scheme: Scheme) -> int:
    """Band b (0-based) has flag ``first_band_flag + b``: right after the combinations."""
    return scheme.rows_per_fingerprint + 1


def pigeonhole_rows(scheme: Scheme, fps: np.ndarray) -> np.ndarray:
    """The pigeonhole's row keys of each fingerprint, an (n, c) array of
    :data:`codec.ROWKEY_DTYPE`: [i, j] is combination j + 1 of fp i. With
    :func:`band_rows`, the one definition of a document's cells (the writers',
    `shdb verify`'s and `shdb spark verify`'s)."""
    return codec.rowkeys_array(fps, scheme.fields_many(fps))


def band_rows(scheme: Scheme, fps: np.ndarray, bands: np.ndarray) -> np.ndarray:
    """The LSH band row keys of each fingerprint, (n, b): [i, j] holds band key
    ``bands[i, j]`` under flag ``first_band_flag + j``."""
    return codec.rowkeys_array(fps, bands, first_band_flag(scheme))


def matches(near: ArrayLike, similarity: ArrayLike, lsh: MinHashParams | None) -> np.ndarray:
    """The one rule, over arrays of pairs: ``near`` is the pigeonhole's verdict
    (within k, or a probe within k and the probe bound; False where both sketches
    carry evidence: :func:`confirm`); ``similarity`` the sketches' estimated
    Jaccard, NaN where a side has no sketch (the pigeonhole alone decides). Every
    judge of a pair calls this (docs/nets.md)."""
    near = np.asarray(near, dtype=bool)
    if lsh is None:
        return near
    sim = np.asarray(similarity, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN compares False: then ``near`` decides
        judged = (sim >= lsh.threshold) | (near & (sim >= lsh.floor))
    return np.where(np.isnan(sim), near, judged)


def is_match(near: bool, similarity: float | None, lsh: MinHashParams | None) -> bool:
    """:func:`matches` of one pair (``similarity`` None: a side has no sketch;
    ``near``: as :func:`matches` takes it)."""
    return bool(
        matches(np.bool_(near), np.float64(np.nan if similarity is None else similarity), lsh)
    )


class Judge:
    """:func:`matches` over pairs of prepared documents held in arrays: their
    fingerprints, stored sketches (None: no sketch) and the rule's parameters."""

    def __init__(
        self,
        fps: np.ndarray,
        k: int,
        lsh: MinHashParams | None,
        sketches: Sequence[bytes | None] = (),
    ) -> None:
        self.fps, self.k, self.lsh = np.asarray(fps, dtype=np.uint64), k, lsh
        if lsh is not None:
            rows, self.has = sketch_rows(sketches, lsh)
            self.sketches = sketches_of(rows, lsh)
        if lsh is None or not self.has.any():
            self.lsh, self.has = None, np.zeros(len(self.fps), dtype=bool)

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
        if self.lsh is None:
            return near, dist, np.full(len(a), np.nan)
        match, sim = confirm(near, self.has[a] & self.has[b], self.sketches, a, b, self.lsh)
        return match, dist, sim


class Sketches(NamedTuple):
    """Stored sketches (rows of :func:`sketch_rows`) with what judging a pair reads
    of each, found once a row rather than once a pair: its b-bit part as
    contiguous words and whether it carries evidence. A pair's evidence is read
    from ``rows`` only where it decides (:func:`pair_similarities`)."""

    rows: np.ndarray
    words: np.ndarray
    evidenced: np.ndarray


def sketches_of(rows: np.ndarray, lsh: MinHashParams) -> Sketches:
    """:class:`Sketches` of :func:`sketch_rows`' rows (an all-zero evidence part:
    none; no evidence part: none)."""
    size = lsh.sketch_bytes
    words = np.ascontiguousarray(rows[:, :size]).view("<u8")
    return Sketches(rows, words, np.any(rows[:, size:], axis=1))


def confirm(
    near: np.ndarray,
    both: np.ndarray,
    sketches: Sketches,
    a: np.ndarray,
    b: np.ndarray,
    lsh: MinHashParams,
) -> tuple[np.ndarray, np.ndarray]:
    """(match, similarity: NaN where ``both`` is False) of pairs of stored sketches
    a[i], b[i] (rows of ``sketches``): :func:`matches` of their
    :func:`pair_similarities`, where a pair both of whose sketches carry evidence
    is decided by its similarity alone (the pigeonhole's verdict and the floor are
    for sketches without evidence: docs/nets.md, "Evidence")."""
    sim = np.full(len(a), np.nan)
    near = np.array(near, dtype=bool)
    at = np.flatnonzero(both)
    sim[at], evidenced = pair_similarities(sketches, a[at], b[at], lsh)
    near[at[evidenced]] = False
    return matches(near, sim, lsh), sim


def sketch_rows(
    sketches: Sequence[bytes | None], lsh: MinHashParams
) -> tuple[np.ndarray, np.ndarray]:
    """Stored sketches as (n, ``lsh.stored_bytes``) uint8 rows, zero-padded (a
    sketch without evidence has an all-zero evidence part: never a real one, whose
    text has a shingle in some bin), and which rows have a sketch of this index
    (the b-bit part alone, or with its evidence; any other size: none)."""
    width, size = lsh.stored_bytes, lsh.sketch_bytes
    has = np.array([s is not None and len(s) in (size, width) for s in sketches], dtype=bool)
    blank = bytes(width)
    raw = b"".join(s.ljust(width, b"\0") if ok else blank for s, ok in zip(sketches, has))  # type: ignore[union-attr]
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(has), width), has


def pair_similarities(
    sketches: Sketches, a: np.ndarray, b: np.ndarray, lsh: MinHashParams
) -> tuple[np.ndarray, np.ndarray]:
    """(similarity, evidenced) of pairs of stored sketches (rows a[i] and b[i] of
    ``sketches``): the b-bit sketch's estimate (docs/SPEC.md, "Nets" step 6);
    where both carry evidence (``evidenced``) and that estimate lies within
    EVIDENCE_MARGIN of the threshold or of the floor, the evidence's lower
    confidence bound (step 7) instead. Only those pairs' evidence is read."""
    size, bits = lsh.sketch_bytes, lsh.sketch_bits
    if not len(a):
        return np.zeros(0), np.zeros(0, dtype=bool)
    lanes = np.uint64(sum(1 << i for i in range(0, 64, bits)))
    diff = sketches.words[a] ^ sketches.words[b]
    folded = diff.copy()
    for shift in range(1, bits):
        folded |= diff >> np.uint64(shift)
    differ = np.bitwise_count(folded & lanes).sum(axis=1, dtype=np.int64)
    chance = 2.0**-bits
    est = np.round(np.clip(((BINS - differ) / BINS - chance) / (1.0 - chance), 0.0, 1.0), 4)
    evidenced = sketches.evidenced[a] & sketches.evidenced[b]
    low = lsh.floor - EVIDENCE_MARGIN
    unsure = np.flatnonzero(evidenced & (est >= low) & (est < lsh.threshold + EVIDENCE_MARGIN))
    if len(unsure):
        rows = sketches.rows
        est[unsure] = evidence_similarity(rows[a[unsure], size:], rows[b[unsure], size:])
    return est, evidenced


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
