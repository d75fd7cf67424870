"""Text -> MinHash of character shingles: LSH band keys and a compact b-bit sketch.

The second net beside the SimHash pigeonhole (docs/SPEC.md, "Nets"). SimHash
cannot tell "same template, other page" from "same page, other template", nor
reach copies that changed many terms; a MinHash of character 5-grams estimates
their Jaccard similarity directly (Broder 1997; Henzinger, SIGIR 2006, combined
the two signals on the web).

Cost decides the method (docs/quality.md, measured-facts): one-permutation
hashing (Li, Owen & Zhang 2012) with optimal densification of empty bins
(Shrivastava, ICML 2017), all in NumPy, ~20x cheaper than k hash functions:
1. A text holding a CJK character (U+3400-U+9FFF, U+F900-U+FAFF) that OpenCC's
   ``t2s`` changes on its own is Traditional: it is converted by OpenCC's ``fold``
   configuration, ``tw2sp`` by default (Taiwan phrases too: 軟體 -> 软件; the
   crawl evaluation's Traditional copies share 0.91 of their shingles with the
   original, median, against 0.62 with ``t2s``). Simplified text is never converted
   (a phrase-level converter would change it: 文件 -> 文档). Then each code point
   is normalised (NFKC of the character, lower-cased) and only letters and digits
   are kept (no whitespace, punctuation or symbol).
2. Each ``shingle``-character window (the whole text when shorter) is hashed:
   the polynomial ``sum(cp[j + i] * P**(s-1-i))`` mod 2**64 of its code points,
   XOR the seed's key, through MurmurHash3's 64-bit finalizer (fmix64, what mmh3
   mixes with; one mmh3 call per shingle would cost 4x the whole budget).
3. The top 7 bits of a hash choose one of 128 bins; a bin keeps its smallest hash.
4. An empty bin takes the value of the first non-empty bin in its own fixed
   order of all bins (ordered by mmh3 of ``"i:j"``): the same for every text, so
   two texts agree on a densified bin exactly as often as on the bin it copies.
From the 128 values: ``bands`` band keys, each the top 32 bits of fmix64 of the
polynomial of its ``rows`` values and its band number; and the sketch, the low
``sketch_bits`` bits of each value packed MSB first (b-bit MinHash, Li & König
2010): 128 x 4 bits = 64 bytes, from which :func:`similarity` estimates Jaccard.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import cache
from typing import Any, NamedTuple

import mmh3
import numpy as np

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint import opencc_cache
from simhash_hbase.fingerprint.cache import cached
from simhash_hbase.version import dist_version

BINS = 128
_BIN_SHIFT = np.uint64(64 - 7)
_MASK64 = (1 << 64) - 1
_POLY = 0x9E3779B97F4A7C15  # odd: the polynomial is a bijection per position
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
SKETCH_BITS = (1, 2, 4, 8)
#: OpenCC configurations a Traditional text may be folded with ("none": not folded).
FOLDS = ("none", "t2s", "tw2sp", "hk2s")
#: bands x rows tried by the evaluation (docs/quality.md, "Crawl-like pages").
DEFAULT_BANDS = 25
DEFAULT_ROWS = 5
DEFAULT_SHINGLE = 5
DEFAULT_SKETCH_BITS = 4
#: Estimated Jaccard at or above which an LSH candidate is a match (docs/quality.md).
DEFAULT_THRESHOLD = 0.5
DEFAULT_FLOOR = 0.4
#: Evidence bins of a new index's sketches (0: none, as in indexes written before
#: evidence existed); sizes allowed, and the bytes of one bin's value.
DEFAULT_EVIDENCE = 1024
EVIDENCE_BINS = (0, 256, 512, 1024, 2048)
#: How far below a user's similarity the floor stays (the default's gap: about two
#: standard deviations of a 128-bin estimate at Jaccard 0.5; docs/nets.md).
FLOOR_MARGIN = round(DEFAULT_THRESHOLD - DEFAULT_FLOOR, 4)
_BMP = 0x10000


def check_similarity(value: object, where: str = "similarity") -> float:
    """A user's similarity threshold: a number in (0, 1] (estimated Jaccard of the
    texts' shingles), else :class:`InvalidSetting` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, float | int) or not 0.0 < value <= 1.0:
        raise InvalidSetting(
            "similarity",
            f"{where} must be a number in (0, 1] (the share of character shingles two "
            f"texts have in common, e.g. 0.5; default {DEFAULT_THRESHOLD}), not {value!r}",
        )
    return float(value)


@dataclass(frozen=True)
class MinHashParams:
    """What the manifest records under ``lsh``; sketches are comparable iff equal."""

    shingle: int = DEFAULT_SHINGLE
    bands: int = DEFAULT_BANDS
    rows: int = DEFAULT_ROWS
    sketch_bits: int = DEFAULT_SKETCH_BITS
    seed: int = 0
    fold: str = "tw2sp"
    threshold: float = DEFAULT_THRESHOLD
    #: A pigeonhole match whose two sketches estimate less than this is dropped
    #: (distinct pages of one site template and topic; docs/quality.md).
    floor: float = DEFAULT_FLOOR
    #: Bins of the evidence stored after the sketch (docs/nets.md, "Evidence"):
    #: what decides a pair whose sketch estimate is near the threshold. 0: none.
    evidence: int = DEFAULT_EVIDENCE

    def __post_init__(self) -> None:
        for name, low, high in (("shingle", 1, 64), ("bands", 1, BINS), ("rows", 1, BINS)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidSetting(name, f"{name} must be an integer in {low}..{high}")
        if self.bands * self.rows > BINS:
            raise InvalidSetting("bands", f"bands x rows must be at most {BINS}")
        if self.sketch_bits not in SKETCH_BITS:
            raise InvalidSetting("sketch_bits", f"sketch_bits must be one of {SKETCH_BITS}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidSetting("seed", "seed must be an integer")
        if not 0 <= self.seed < 1 << 32:
            raise InvalidSetting("seed", "seed must be in 0..2**32-1")
        if self.fold not in FOLDS:
            raise InvalidSetting("fold", f"fold must be one of {', '.join(FOLDS)}")
        if not isinstance(self.threshold, float | int) or not 0.0 < self.threshold <= 1.0:
            raise InvalidSetting("threshold", "threshold must be in (0, 1]")
        if not isinstance(self.floor, float | int) or not 0.0 <= self.floor <= self.threshold:
            raise InvalidSetting("floor", "floor must be in [0, threshold]")
        if self.evidence not in EVIDENCE_BINS or isinstance(self.evidence, bool):
            raise InvalidSetting("evidence", f"evidence must be one of {EVIDENCE_BINS}")

    def at_similarity(self, similarity: float) -> MinHashParams:
        """These settings judged at a user's ``similarity``: it replaces the
        threshold, and the floor follows it ``FLOOR_MARGIN`` below (docs/nets.md), so
        0.5 is today's rule and a stricter value is strict for pigeonhole pairs too."""
        s = check_similarity(similarity)
        return replace(self, threshold=s, floor=round(max(0.0, s - FLOOR_MARGIN), 4))

    @property
    def sketch_bytes(self) -> int:
        """The b-bit sketch's bytes: the start of every stored sketch."""
        return BINS * self.sketch_bits // 8

    @property
    def stored_bytes(self) -> int:
        """A stored sketch's bytes: the b-bit sketch, then the evidence (if any)."""
        return self.sketch_bytes + self.evidence  # one byte a bin

    def to_manifest(self) -> dict[str, Any]:
        entry = asdict(self)
        entry.update(hash="fmix64(poly(code points))", bins=BINS)
        if self.fold != "none":
            entry["fold_converter"] = f"opencc {_opencc_version()} {self.fold}"
        return entry

    @classmethod
    def from_manifest(cls, entry: dict[str, Any]) -> MinHashParams:
        names = set(cls.__dataclass_fields__)
        known = {k: v for k, v in entry.items() if k in names}
        known.setdefault("evidence", 0)  # written before evidence existed: none
        return cls(**known)


class Signature(NamedTuple):
    """One text's net keys: ``bands`` uint32 band keys and the stored sketch (the
    packed b-bit sketch, then the evidence when the params have it)."""

    bands: np.ndarray
    sketch: bytes


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _S33)
    h = h * _C1
    h = h ^ (h >> _S33)
    h = h * _C2
    return h ^ (h >> _S33)


@cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """:func:`_build_tables`, kept in the per-user cache by Unicode version: building
    them is a Python loop over 65,536 code points, ~40 ms of every one-shot start."""
    mapped, keep = cached(f"minhash-bmp-{unicodedata.unidata_version}.marshal", _build_tables)
    return np.frombuffer(mapped, dtype=np.uint32), np.frombuffer(keep, dtype=bool)


def _build_tables() -> tuple[bytes, bytes]:
    """Per BMP code point: its normalised form (NFKC of the character, lower-cased,
    when that is one BMP character) and whether it is kept (a letter or a digit).
    BMP only (320 KB): tables of every code point (5.5 MB) pushed jieba's data out
    of the CPU cache and slowed the SimHash of the same text 2x."""
    mapped = np.arange(_BMP, dtype=np.uint32)
    for cp in range(_BMP):
        if 0xD800 <= cp < 0xE000:
            continue
        form = unicodedata.normalize("NFKC", chr(cp)).lower()
        if len(form) == 1 and ord(form) < _BMP:
            mapped[cp] = ord(form)
    keep = np.fromiter((chr(cp).isalnum() for cp in range(_BMP)), dtype=bool, count=_BMP)
    return mapped.tobytes(), keep.tobytes()


def _converter(config: str) -> Callable[[str], str]:
    try:
        return opencc_cache.converter(config)
    except ImportError:
        raise InvalidSetting(
            "fold", "the LSH net folds Traditional Chinese with OpenCC: pip install opencc"
        ) from None


def _opencc_version() -> str:
    _converter("t2s")
    return dist_version("opencc")


@cache
def _folded_chars() -> np.ndarray:
    """:func:`_build_folded_chars`, kept in the per-user cache by OpenCC version
    (converting 28,000 characters costs ~15 ms of every one-shot start)."""
    _converter("t2s")  # the error that names the missing converter, if it is missing
    import opencc

    name = f"minhash-t2s-{getattr(opencc, '__version__', 'unknown')}.marshal"
    return np.frombuffer(cached(name, _build_folded_chars), dtype=bool)


def _build_folded_chars() -> bytes:
    """Per code point: whether the converter changes the character on its own. A
    text with none of them is its own conversion, and OpenCC (~50 us a page) is
    skipped."""
    convert = _converter("t2s")
    out = np.zeros(_BMP, dtype=bool)
    chars = [chr(cp) for cp in range(0x3400, 0xA000)] + [chr(cp) for cp in range(0xF900, 0xFB00)]
    converted = convert("\n".join(chars)).split("\n")
    assert len(converted) == len(chars), "the converter joined or split lines"
    for ch, to in zip(chars, converted):
        if ch != to:
            out[ord(ch)] = True
    return out.tobytes()


@cache
def _donors(seed: int) -> np.ndarray:
    """:func:`_build_donors`, kept in the per-user cache (16,384 mmh3 calls)."""
    raw = cached(f"minhash-donors-{BINS}-{seed}.marshal", lambda: _build_donors(seed))
    return np.frombuffer(raw, dtype=np.int64).reshape(BINS, BINS).astype(np.intp)


def _build_donors(seed: int) -> bytes:
    """Row i: every bin, in bin i's fixed densification order (mmh3 of "i:j")."""
    order = np.empty((BINS, BINS), dtype=np.int64)
    for i in range(BINS):
        keys = [mmh3.hash(f"{i}:{j}", seed, signed=False) for j in range(BINS)]
        order[i] = np.argsort(np.array(keys, dtype=np.uint64), kind="stable")
    return order.tobytes()


def _seed_key(seed: int) -> np.uint64:
    return np.uint64(mmh3.hash64("shdb-minhash", seed, signed=False)[0])


class MinHasher:
    """Texts -> :class:`Signature`; tables are built once per process (~0.5 s)."""

    def __init__(self, params: MinHashParams | None = None) -> None:
        self.params = params or MinHashParams()
        self._fold = self.params.fold != "none"
        if self._fold:
            self._folds = _folded_chars()  # the converter itself: for the first Traditional text
        self._mapped, self._keep = _tables()
        self._donors = _donors(self.params.seed)
        self._key = _seed_key(self.params.seed)
        self._band_key = _seed_key(self.params.seed ^ 0x5BD1E995)
        self._powers = np.array(
            [pow(_POLY, self.params.shingle - 1 - i, 1 << 64) for i in range(self.params.shingle)],
            dtype=np.uint64,
        )
        rows = self.params.rows
        self._row_powers = np.array(
            [pow(_POLY, rows - i, 1 << 64) for i in range(rows)], dtype=np.uint64
        )
        self._band_ids = np.arange(self.params.bands, dtype=np.uint64)

    def code_points(self, text: str) -> np.ndarray:
        """The normalised text as code points (step 1)."""
        raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        low = np.minimum(raw, _BMP - 1)  # U+FFFF: a non-character, never folded or kept
        if self._fold and self._folds[low].any():  # else it folds to itself
            text = _converter(self.params.fold)(text)
            raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            low = np.minimum(raw, _BMP - 1)
        cps = self._mapped[low]
        keep = self._keep[cps]
        astral = np.flatnonzero(raw >= _BMP)
        if len(astral):  # rare: kept as they are, if letters or digits
            cps[astral] = raw[astral]
            keep[astral] = [chr(cp).isalnum() for cp in raw[astral].tolist()]
        return cps[keep]

    def hashes(self, text: str) -> np.ndarray | None:
        """The shingle hashes (step 2), sorted; None for a text with no letter or
        digit (it has no sketch and joins only the pigeonhole net)."""
        cps = self.code_points(text).astype(np.uint64)
        if not len(cps):
            return None
        s = min(self.params.shingle, len(cps))
        n = len(cps) - s + 1
        with np.errstate(over="ignore"):
            acc = np.zeros(n, dtype=np.uint64)
            for i in range(s):
                acc = acc * np.uint64(_POLY) + cps[i : i + n]
            return np.sort(_fmix64(acc ^ self._key))

    def values(self, text: str) -> np.ndarray | None:
        """The 128 densified bin minima (uint64), or None for a text with no letter
        or digit (it has no sketch and joins only the pigeonhole net)."""
        hashes = self.hashes(text)
        return None if hashes is None else self._values(hashes)

    def _values(self, hashes: np.ndarray) -> np.ndarray:
        n = len(hashes)
        bins = (hashes >> _BIN_SHIFT).astype(np.intp)
        first = np.searchsorted(bins, np.arange(BINS), side="left")
        full = np.zeros(BINS, dtype=bool)
        full[bins] = True
        values = hashes[np.minimum(first, n - 1)]
        if not full.all():
            donor = self._donors[~full]
            pick = np.argmax(full[donor], axis=1)
            values[~full] = values[donor[np.arange(len(donor)), pick]]
        return values

    def signature(self, text: str) -> Signature | None:
        hashes = self.hashes(text)
        if hashes is None:
            return None
        p = self.params
        values = self._values(hashes)
        rows = values[: p.bands * p.rows].reshape(p.bands, p.rows)
        with np.errstate(over="ignore"):
            acc = (rows * self._row_powers).sum(axis=1, dtype=np.uint64) + self._band_ids
            bands = (_fmix64(acc ^ self._band_key) >> np.uint64(32)).astype(np.uint32)
        sketch = pack_sketch(values, p.sketch_bits)
        return Signature(bands, sketch + evidence_of(hashes, p.evidence) if p.evidence else sketch)


def evidence_of(hashes: np.ndarray, bins: int) -> bytes:
    """The evidence of sorted shingle hashes (docs/SPEC.md, "Nets" step 7): per bin
    of the top log2(``bins``) bits, the low 8 bits of its smallest hash (1 where
    they are 0), 0 for an empty bin. Not densified: an empty bin is told apart, so
    the bins where either of two texts has a shingle are a sample of their union."""
    shift = np.uint64(64 - bins.bit_length() + 1)
    keys = (hashes >> shift).astype(np.intp)
    first = np.searchsorted(keys, np.arange(bins), side="left")
    at = np.minimum(first, len(hashes) - 1)
    low = (hashes[at] & np.uint64(0xFF)).astype(np.uint8)
    low[low == 0] = 1
    low[keys[at] != np.arange(bins)] = 0
    return low.tobytes()


#: The evidence's one-sided confidence: a pair it decides matches when its estimate
#: less EVIDENCE_Z standard errors reaches the threshold (docs/nets.md, "Evidence").
EVIDENCE_Z = 1.28


def evidence_similarity(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A lower confidence bound of the Jaccard of pairs of evidence (uint8 rows of
    equal width B, x[i] with y[i]), rounded to 4 places. Of the U bins where either
    side has a value (each holds the smallest shingle of the union, a sample of the
    union without replacement), S hold the same value on both sides and N2 a value
    on both; an equal 8-bit value by chance has C = 1/256, so the estimate is
    ``J = (S - C N2) / ((1 - C) U)``, its standard error ``sqrt(J (1 - J) / U f)``
    with the finite-population factor ``f = 1 - U / N``, ``N = -B ln(1 - U / B)`` the
    union's size that fills U of B bins (f = 1 when U = B). The bound is
    ``J - EVIDENCE_Z x error``, clipped to 0..1."""
    bins = x.shape[1]
    filled_x, filled_y = x != 0, y != 0
    union = (filled_x | filled_y).sum(axis=1)
    both = (filled_x & filled_y).sum(axis=1)
    same = ((x == y) & filled_x).sum(axis=1)
    chance = 1.0 / 256
    u = np.maximum(union, 1).astype(np.float64)
    est = np.clip((same - chance * both) / ((1.0 - chance) * u), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        size = np.where(union < bins, -bins * np.log1p(-np.minimum(union, bins - 1) / bins), np.inf)
    factor = np.clip(1.0 - u / size, 0.0, 1.0)
    error = np.sqrt(est * (1.0 - est) / u * factor)
    return np.round(np.clip(est - EVIDENCE_Z * error, 0.0, 1.0), 4)


def pack_sketch(values: np.ndarray, bits: int) -> bytes:
    """The low ``bits`` bits of each value, packed MSB first."""
    low = (values & np.uint64((1 << bits) - 1)).astype(np.uint8)
    unpacked = np.unpackbits(low[:, None], axis=1)[:, 8 - bits :]
    return np.packbits(unpacked.reshape(-1)).tobytes()


def unpack_sketch(sketch: bytes, bits: int) -> np.ndarray:
    flat = np.unpackbits(np.frombuffer(sketch, dtype=np.uint8)).reshape(-1, bits)
    return np.packbits(flat, axis=1, bitorder="big").reshape(-1) >> np.uint8(8 - bits)


def similarity(a: bytes, b: bytes, bits: int) -> float:
    """Estimated Jaccard of two sketches' b-bit parts: b-bit values agree with
    probability ``C + (1 - C) J``, ``C = 2**-bits`` (Li & König's estimator for sets
    much smaller than the hash space), so ``J = (agree - C) / (1 - C)``, clipped to
    0..1. (The one judge also weighs the evidence: layout.nets.)"""
    if min(len(a), len(b)) < BINS * bits // 8:
        raise ValueError("sketches shorter than their b-bit part are not comparable")
    return float(similarities(a, [b], bits)[0])


@cache
def _zero_groups(bits: int) -> np.ndarray:
    """Per byte value: how many of its ``bits``-bit groups are zero."""
    groups = [(v >> shift) & ((1 << bits) - 1) for v in range(256) for shift in range(0, 8, bits)]
    return (np.array(groups).reshape(256, -1) == 0).sum(axis=1).astype(np.uint16)


def similarities(query: bytes, sketches: list[bytes], bits: int) -> np.ndarray:
    """:func:`similarity` of one sketch against many, in one NumPy pass: equal
    values are zero groups of the XOR of the packed bytes."""
    if not sketches:
        return np.zeros(0)
    size = BINS * bits // 8  # the b-bit sketch: a stored sketch's evidence follows it
    q = np.frombuffer(query[:size], dtype=np.uint8)
    held = np.frombuffer(b"".join(s[:size] for s in sketches), dtype=np.uint8).reshape(-1, size)
    agree = _zero_groups(bits)[held ^ q].sum(axis=1) / (size * 8 // bits)
    chance = 2.0**-bits
    return np.round(np.clip((agree - chance) / (1.0 - chance), 0.0, 1.0), 4)


def shingle_set(text: str, params: MinHashParams) -> set[str]:
    """The exact shingles of step 1-2 as strings: for the evaluation's true Jaccard."""
    cps = MinHasher.code_points(_exact_hasher(params), text)
    chars = "".join(map(chr, cps.tolist()))
    s = min(params.shingle, len(chars))
    return {chars[i : i + s] for i in range(len(chars) - s + 1)} if chars else set()


@cache
def _exact_hasher(params: MinHashParams) -> MinHasher:
    return MinHasher(params)
