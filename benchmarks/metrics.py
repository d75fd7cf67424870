"""Recall, false-positive rate, intervals and paired differences, from distance histograms."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .common import K
from .configs import DEFAULT, Config
from .edits import EDITS, SINGLE_EDITS
from .texts import SETS, STRATA

K_MAX = 6  # the per-k tables go this far
TARGET_RECALL = 0.95
TARGET_FPR = 0.001
EXCLUDE_JACCARD = 0.5  # distinct documents this similar are near-copies, not negatives
JACCARD_THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.7, 0.9)
Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The 95% Wilson score interval of the rate hits/n.

    Unlike p ± z·se it stays inside [0, 1] and is not empty at 0 or 1: no false
    pair among 400k says the FPR is below about 1e-5, not that it is 0.
    """
    if n <= 0:
        return math.nan, math.nan
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if hits == 0 else max(0.0, centre - half)
    hi = 1.0 if hits == n else min(1.0, centre + half)
    return lo, hi


def paired_difference(hit_a: np.ndarray, hit_b: np.ndarray, z: float = Z95) -> tuple[float, float]:
    """Rate(a) - rate(b) over the same pairs, and the half-width of its 95% interval.

    Each pair contributes hit_a - hit_b in {-1, 0, 1}; the interval is the normal
    approximation of their mean, so only the discordant pairs widen it. Comparing two
    configurations on the same pairs this way is far tighter than comparing two
    independent rates.
    """
    n = len(hit_a)
    if n != len(hit_b):
        raise ValueError(f"paired samples differ in size: {n} vs {len(hit_b)}")
    if not n:
        return math.nan, math.nan
    d = hit_a.astype(np.float64) - hit_b.astype(np.float64)
    half = float(z * d.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    return float(d.mean()), half


@dataclass
class Pairs:
    """Index pairs into the fingerprint matrix, with a stratum code for each pair."""

    a: np.ndarray
    b: np.ndarray
    group: np.ndarray  # recall: edit * len(STRATA) + stratum; distinct: s1 * len + s2
    jac: np.ndarray

    def keep(self, mask: np.ndarray) -> Pairs:
        return Pairs(self.a[mask], self.b[mask], self.group[mask], self.jac[mask])


def distance_hist(fps: np.ndarray, pairs: Pairs, n_groups: int) -> np.ndarray:
    """Counts of Hamming distance 0..64 per group: (groups, 65)."""
    d = np.bitwise_count(fps[pairs.a] ^ fps[pairs.b]).astype(np.int64)
    flat: np.ndarray = np.bincount(pairs.group * 65 + d, minlength=n_groups * 65)
    return flat.reshape(n_groups, 65)


def jaccard_hist(pairs: Pairs, n_groups: int) -> np.ndarray:
    """Counts of floor(100 * Jaccard) per group: (groups, 101)."""
    bins = np.clip(np.floor(pairs.jac * 100 + 1e-9).astype(np.int64), 0, 100)
    flat: np.ndarray = np.bincount(pairs.group * 101 + bins, minlength=n_groups * 101)
    return flat.reshape(n_groups, 101)


def strata_codes(names: Iterable[str]) -> list[int]:
    return [STRATA.index(s) for s in names]


def recall_counts(hist: np.ndarray, edits: Iterable[str], strata: Iterable[str]) -> np.ndarray:
    """Summed distance histogram of the (edit, stratum) groups selected."""
    codes = strata_codes(strata)
    rows = [EDITS.index(e) * len(STRATA) + s for e in edits for s in codes]
    return np.asarray(hist[rows].sum(axis=0))


def distinct_counts(hist: np.ndarray, strata: Iterable[str]) -> np.ndarray:
    codes = strata_codes(strata)
    rows = [a * len(STRATA) + b for a in codes for b in codes if a <= b]
    return np.asarray(hist[rows].sum(axis=0))


def rate_at(counts: np.ndarray, k: int) -> float:
    total = counts.sum()
    return float(counts[: k + 1].sum() / total) if total else float("nan")


def rate_at_or_above(counts: np.ndarray, threshold: float) -> float:
    total = counts.sum()
    return float(counts[round(threshold * 100) :].sum() / total) if total else float("nan")


@dataclass
class Results:
    """Raw histograms plus what is needed to summarise them; serialised as the JSON."""

    meta: dict[str, Any]
    cfgs: list[Config]
    recall_hist: dict[str, np.ndarray]  # config -> (edits * strata, 65)
    distinct_hist: dict[str, np.ndarray]  # config -> (strata * strata, 65)
    jac_recall: np.ndarray  # (edits * strata, 101)
    jac_distinct: np.ndarray  # (strata * strata, 101)
    excluded_hist: dict[str, np.ndarray] = field(default_factory=dict)
    #: Hamming distance of every (original, edited) pair under every config, and the
    #: pair's group: for paired comparisons (the same pairs, two configs).
    pair_dist: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int8))
    pair_group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def paired_diff(
        self, a: str, b: str, set_name: str, edits: Iterable[str] = SINGLE_EDITS, k: int = K
    ) -> tuple[float, float]:
        """Recall(a) - recall(b) at k on the same edited pairs, and the half-width of
        its 95% interval (``paired_difference``)."""
        codes = strata_codes(SETS[set_name])
        groups = [EDITS.index(e) * len(STRATA) + c for e in edits for c in codes]
        rows = np.isin(self.pair_group, groups)
        names = [c.name for c in self.cfgs]
        hit_a = self.pair_dist[rows, names.index(a)] <= k
        hit_b = self.pair_dist[rows, names.index(b)] <= k
        return paired_difference(hit_a, hit_b)

    def recall_interval(
        self, cfg: str, k: int, set_name: str, edits: Iterable[str] = SINGLE_EDITS
    ) -> tuple[float, float]:
        """95% Wilson interval of ``recall``."""
        counts = recall_counts(self.recall_hist[cfg], edits, SETS[set_name])
        return wilson_interval(int(counts[: k + 1].sum()), int(counts.sum()))

    def fpr_interval(self, cfg: str, k: int, set_name: str) -> tuple[float, float]:
        """95% Wilson interval of ``fpr``."""
        hits, n = self.fp_count(cfg, k, set_name)
        return wilson_interval(hits, n)

    def target_k(self, cfg: str, set_name: str) -> int | None:
        """The smallest k at which both issue targets hold, if any (k <= 32)."""
        for k in range(33):
            if (
                self.recall(cfg, k, set_name) >= TARGET_RECALL
                and self.fpr(cfg, k, set_name) <= TARGET_FPR
            ):
                return k
        return None

    def operating_point(self, cfg: str, set_name: str) -> tuple[int, float, float]:
        """The largest k whose FPR is within the target, with its recall and FPR."""
        counts = distinct_counts(self.distinct_hist[cfg], SETS[set_name])
        k = max((k for k in range(33) if rate_at(counts, k) <= TARGET_FPR), default=0)
        return k, self.recall(cfg, k, set_name), rate_at(counts, k)

    def recall(self, cfg: str, k: int, set_name: str, edits: Iterable[str] = SINGLE_EDITS) -> float:
        return rate_at(recall_counts(self.recall_hist[cfg], edits, SETS[set_name]), k)

    def fpr(self, cfg: str, k: int, set_name: str) -> float:
        return rate_at(distinct_counts(self.distinct_hist[cfg], SETS[set_name]), k)

    def fp_count(self, cfg: str, k: int, set_name: str) -> tuple[int, int]:
        counts = distinct_counts(self.distinct_hist[cfg], SETS[set_name])
        return int(counts[: k + 1].sum()), int(counts.sum())

    def n_recall(self, set_name: str, edits: Iterable[str] = SINGLE_EDITS) -> int:
        return int(recall_counts(self.recall_hist[DEFAULT], edits, SETS[set_name]).sum())

    def to_json(self) -> dict[str, Any]:
        groups_r = [f"{e}|{s}" for e in EDITS for s in STRATA]
        groups_d = [f"{a}|{b}" for a in STRATA for b in STRATA]

        def named(hist: np.ndarray, names: list[str]) -> dict[str, list[int]]:
            return {n: row.tolist() for n, row in zip(names, hist) if row.any()}

        summary = {
            c.name: {
                s: {
                    "recall": [self.recall(c.name, k, s) for k in range(K_MAX + 1)],
                    "recall_combined": [
                        self.recall(c.name, k, s, ["combined"]) for k in range(K_MAX + 1)
                    ],
                    "fpr": [self.fpr(c.name, k, s) for k in range(K_MAX + 1)],
                }
                for s in SETS
            }
            for c in self.cfgs
        }
        return {
            "meta": self.meta,
            "configs": [{**asdict(c), "description": c.describe()} for c in self.cfgs],
            "summary_by_set": summary,
            "hamming_histograms": {
                "note": "counts of pairs at Hamming distance 0..64; recall groups are "
                "'edit|stratum', distinct groups 'stratum|stratum'",
                "recall": {c: named(h, groups_r) for c, h in self.recall_hist.items()},
                "distinct": {c: named(h, groups_d) for c, h in self.distinct_hist.items()},
                "excluded_near_copies": {
                    c: named(h, groups_d) for c, h in self.excluded_hist.items()
                },
            },
            "jaccard_histograms": {
                "note": "counts of pairs with floor(100 * Jaccard) = 0..100",
                "recall": named(self.jac_recall, groups_r),
                "distinct": named(self.jac_distinct, groups_d),
            },
        }
