"""Recall, false-positive rate, intervals and paired differences, from distance histograms."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .common import K
from .configs import DEFAULT, Config
from .edits import EDITS, SINGLE_EDITS
from .texts import SETS, STRATA

K_MAX = 6


TARGET_RECALL = 0.95


TARGET_FPR = 0.001


EXCLUDE_JACCARD = 0.5  # distinct documents this similar are near-copies, not negatives


JACCARD_THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.7, 0.9)


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

    def paired_diff(self, a: str, b: str, set_name: str) -> tuple[float, float]:
        """Recall(a) - recall(b) at k=3 on the same single-edit pairs, and the half-width
        of its 95% interval (normal approximation on the discordant pairs)."""
        codes = strata_codes(SETS[set_name])
        groups = [EDITS.index(e) * len(STRATA) + c for e in SINGLE_EDITS for c in codes]
        rows = np.isin(self.pair_group, groups)
        names = [c.name for c in self.cfgs]
        hit_a = self.pair_dist[rows, names.index(a)] <= K
        hit_b = self.pair_dist[rows, names.index(b)] <= K
        n = int(rows.sum())
        if not n:
            return float("nan"), float("nan")
        d = (hit_a.astype(np.int64) - hit_b.astype(np.int64)).astype(np.float64)
        return float(d.mean()), float(1.96 * d.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0

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
