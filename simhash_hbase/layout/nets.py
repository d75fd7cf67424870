"""The two nets of one index and the one meaning of a match (docs/SPEC.md, "Nets").

- ``simhash``: the pigeonhole, flags 1..c (the scheme's segment combinations).
- ``lsh``: MinHash bands of character shingles, flags c+1..c+bands, in the same
  13-byte row keys (4-byte band key, flag, 8-byte fingerprint).

:func:`is_match` is the predicate every surface applies (the library's queries,
the ingest report, batch ``dedup``, both stores): a pair is a match when the
pigeonhole finds it within k bits (unless both sketches exist and say the texts
share almost nothing), or when their sketches' estimated Jaccard reaches the
threshold. Batch pairs are found the same two ways: sorting for the pigeonhole
(:func:`~simhash_hbase.layout.pairs.near_duplicate_pairs`), grouping equal band
keys for LSH (:func:`band_candidates`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.minhash import BINS, MinHasher, MinHashParams, unpack_sketch
from simhash_hbase.layout import codec
from simhash_hbase.layout.pairs import near_duplicate_pairs
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import Document

SIMHASH = "simhash"
SIMHASH_LSH = "simhash+lsh"
NETS = (SIMHASH, SIMHASH_LSH)
#: New indexes get both nets; an index whose manifest names none has the pigeonhole only.
DEFAULT_NETS = SIMHASH_LSH

#: A pair (i, j) of a batch, i < j, with its Hamming distance and estimated Jaccard.
NetPair = tuple[int, int, int, float | None]


def check_nets(nets: str) -> str:
    if nets not in NETS:
        raise InvalidSetting("nets", f"unknown nets {nets!r}; one of: {', '.join(NETS)}")
    return nets


def first_band_flag(scheme: Scheme) -> int:
    """Band b (0-based) has flag ``first_band_flag + b``: right after the combinations."""
    return scheme.rows_per_fingerprint + 1


def is_match(near: bool, similarity: float | None, lsh: MinHashParams | None) -> bool:
    """The one predicate: ``near`` is the pigeonhole's verdict (within k, or a probe
    within k and the probe bound); ``similarity`` the sketches' estimated Jaccard
    (None when a side has no sketch: the pigeonhole alone decides)."""
    if similarity is None or lsh is None:
        return near
    return similarity >= lsh.threshold or (near and similarity >= lsh.floor)


def sketch_document(hasher: MinHasher, doc: Document, text: str) -> Document:
    """``doc`` with the sketch and band keys of ``text`` (as is if the text has no
    letter or digit: it then joins the pigeonhole net only)."""
    sig = hasher.signature(text)
    if sig is None:
        return doc
    return dataclasses.replace(doc, sketch=sig.sketch, bands=codec.encode_bands(sig.bands))


def band_candidates(bands: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Pairs (i < j) that share a band key in the same band: an (m, 2) array.

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


def unpack_all(sketches: Sequence[bytes | None], bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 128) b-bit values (zeros where absent) and the mask of present sketches."""
    has = np.array([s is not None for s in sketches], dtype=bool)
    out = np.zeros((len(sketches), BINS), dtype=np.uint8)
    present = [s for s in sketches if s is not None]
    if present:
        out[has] = unpack_sketch(b"".join(present), bits).reshape(len(present), BINS)
    return out, has


def batch_pairs(
    fps: np.ndarray,
    k: int,
    scheme: Scheme,
    lsh: MinHashParams | None = None,
    sketches: Sequence[bytes | None] = (),
    bands: Sequence[bytes | None] = (),
    also_near: Iterable[tuple[int, int]] = (),
) -> list[NetPair]:
    """Every matching pair of a batch by :func:`is_match`: the pigeonhole by sorting,
    LSH by grouping band keys; (i, j, distance, similarity), i < j, sorted.
    ``also_near``: more pairs (i < j) the pigeonhole's rule accepts (probe hits)."""
    near = {(i, j): d for i, j, d in near_duplicate_pairs(fps, k, scheme)}
    for i, j in also_near:
        near[(i, j)] = int(fps[i] ^ fps[j]).bit_count()
    if lsh is None or not any(s is not None for s in sketches):
        return [(i, j, d, None) for (i, j), d in sorted(near.items())]
    values, has = unpack_all(sketches, lsh.sketch_bits)
    keys = np.zeros((len(fps), lsh.bands), dtype=np.uint32)
    with_bands = np.array([b is not None for b in bands], dtype=bool)
    for i in np.flatnonzero(with_bands).tolist():
        keys[i] = np.frombuffer(bands[i], dtype=">u4")  # type: ignore[arg-type]
    cands = {tuple(p) for p in band_candidates(keys, with_bands & has).tolist()}
    every = np.array(sorted(cands | set(near)), dtype=np.intp).reshape(-1, 2)
    sims = pair_similarities(values, every, lsh.sketch_bits)
    out: list[NetPair] = []
    for (i, j), sim in zip(every.tolist(), sims.tolist()):
        both = bool(has[i] and has[j])
        similarity = sim if both else None
        dist = near.get((i, j))
        if dist is None:
            dist = int(fps[i] ^ fps[j]).bit_count()
        if is_match((i, j) in near, similarity, lsh):
            out.append((i, j, dist, similarity))
    return out
