"""Recall, FPR, their intervals and paired differences, against direct computation
on random pairs with known Hamming distances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.configs import DEFAULT, Config
from benchmarks.edits import EDITS, SINGLE_EDITS
from benchmarks.metrics import (
    Pairs,
    Results,
    distance_hist,
    distinct_counts,
    jaccard_hist,
    paired_difference,
    rate_at,
    rate_at_or_above,
    recall_counts,
    wilson_interval,
)
from benchmarks.texts import SETS, STRATA

N_S = len(STRATA)


def _flip(fps: np.ndarray, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each fingerprint with ``bits[i]`` distinct random bits flipped."""
    out = fps.copy()
    for i, d in enumerate(bits):
        for bit in rng.choice(64, size=int(d), replace=False):
            out[i] ^= np.uint64(1) << np.uint64(bit)
    return out


def _evaluation(seed: int = 1, n: int = 600) -> tuple[Results, dict[str, np.ndarray]]:
    """Two configurations; originals 0..n-1, their edited copies n..2n-1 at known
    distances; distinct pairs among the originals. Returns the truth alongside."""
    rng = np.random.default_rng(seed)
    originals = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    strata = rng.choice(["500-1000", ">1000", "line", "para"], size=n)
    edits = rng.choice(list(EDITS), size=n)
    truth = {"strata": strata, "edits": edits}
    cfgs = [Config(DEFAULT, "words", top_n=16), Config("other", "words", top_n=64)]
    fps = np.zeros((2 * n + 0, 2), dtype=np.uint64)
    for col in range(2):
        dist = rng.integers(0, 8, size=n)
        truth[f"dist{col}"] = dist
        fps[:n, col] = originals
        fps[n:, col] = _flip(originals, dist, rng)
    s = np.array([STRATA.index(x) for x in strata])
    e = np.array([EDITS.index(x) for x in edits])
    recall_pairs = Pairs(np.arange(n), np.arange(n, 2 * n), e * N_S + s, rng.random(n))
    a, b = np.triu_indices(n, 1)
    lo, hi = np.minimum(s[a], s[b]), np.maximum(s[a], s[b])
    distinct = Pairs(a, b, lo * N_S + hi, rng.random(len(a)))
    truth["distinct_dist"] = np.bitwise_count(originals[a] ^ originals[b])
    truth["distinct_strata"] = np.stack([strata[a], strata[b]], axis=1)
    res = Results(
        meta={},
        cfgs=cfgs,
        recall_hist={
            c.name: distance_hist(fps[:, i], recall_pairs, len(EDITS) * N_S)
            for i, c in enumerate(cfgs)
        },
        distinct_hist={
            c.name: distance_hist(fps[:, i], distinct, N_S * N_S) for i, c in enumerate(cfgs)
        },
        jac_recall=jaccard_hist(recall_pairs, len(EDITS) * N_S),
        jac_distinct=jaccard_hist(distinct, N_S * N_S),
        pair_dist=np.bitwise_count(fps[recall_pairs.a] ^ fps[recall_pairs.b]).astype(np.int8),
        pair_group=recall_pairs.group,
    )
    return res, truth


@pytest.mark.parametrize("set_name", ["long>500", "short", "line"])
@pytest.mark.parametrize("k", [0, 3, 6])
def test_recall_and_fpr_equal_direct_counts(set_name: str, k: int) -> None:
    res, t = _evaluation()
    in_set = np.isin(t["strata"], SETS[set_name])
    single = np.isin(t["edits"], list(SINGLE_EDITS))
    for col, cfg in enumerate((DEFAULT, "other")):
        rows = in_set & single
        assert res.recall(cfg, k, set_name) == pytest.approx((t[f"dist{col}"][rows] <= k).mean())
        combined = in_set & (t["edits"] == "combined")
        got = res.recall(cfg, k, set_name, ["combined"])
        assert got == pytest.approx((t[f"dist{col}"][combined] <= k).mean())
    both = np.isin(t["distinct_strata"], SETS[set_name]).all(axis=1)
    assert res.fpr(DEFAULT, k, set_name) == pytest.approx((t["distinct_dist"][both] <= k).mean())
    assert res.fp_count(DEFAULT, k, set_name) == (
        int((t["distinct_dist"][both] <= k).sum()),
        int(both.sum()),
    )


def test_paired_diff_is_the_mean_difference_on_the_same_pairs() -> None:
    res, t = _evaluation()
    rows = np.isin(t["strata"], SETS["long>500"]) & np.isin(t["edits"], list(SINGLE_EDITS))
    a, b = t["dist0"][rows] <= 3, t["dist1"][rows] <= 3
    d, half = res.paired_diff(DEFAULT, "other", "long>500")
    assert d == pytest.approx(a.mean() - b.mean())
    diffs = a.astype(float) - b.astype(float)
    assert half == pytest.approx(1.96 * diffs.std(ddof=1) / math.sqrt(len(diffs)), rel=1e-3)
    assert res.paired_diff(DEFAULT, DEFAULT, "long>500") == (0.0, 0.0)


def test_paired_difference_edge_cases() -> None:
    ones, zeros = np.ones(50, dtype=bool), np.zeros(50, dtype=bool)
    assert paired_difference(ones, zeros) == (1.0, 0.0)  # no variance: no doubt
    assert paired_difference(zeros, ones) == (-1.0, 0.0)
    d, half = paired_difference(np.array([True]), np.array([False]))
    assert (d, half) == (1.0, 0.0)
    assert all(math.isnan(x) for x in paired_difference(ones[:0], zeros[:0]))
    with pytest.raises(ValueError, match="differ in size"):
        paired_difference(ones, zeros[:3])


def test_paired_interval_shrinks_with_agreement() -> None:
    """Two configurations that agree on most pairs differ with a narrow interval,
    far narrower than the intervals of their two rates on their own."""
    rng = np.random.default_rng(3)
    a = rng.random(2000) < 0.9
    b = a.copy()
    flip = rng.choice(2000, size=40, replace=False)
    b[flip] = ~b[flip]
    _, half = paired_difference(a, b)
    lo, hi = wilson_interval(int(a.sum()), len(a))
    assert half < (hi - lo) / 2


@pytest.mark.parametrize(
    ("hits", "n", "lo", "hi"),
    [
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (1, 400_000, 0.0, 1.4e-5),
    ],
)
def test_wilson_interval_known_values(hits: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(hits, n)
    assert got[0] == pytest.approx(lo, abs=2e-4)
    assert got[1] == pytest.approx(hi, abs=2e-4 if n < 1000 else 1e-6)


@given(st.integers(1, 10_000), st.data())
def test_wilson_interval_contains_the_rate(n: int, data: st.DataObject) -> None:
    hits = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(hits, n)
    assert 0.0 <= lo <= hits / n <= hi <= 1.0
    lo4, hi4 = wilson_interval(hits * 4, n * 4)  # the same rate on more pairs: narrower
    assert hi4 - lo4 < hi - lo


def test_wilson_interval_of_nothing_is_unknown() -> None:
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_rates_from_histograms() -> None:
    counts = np.zeros(65, dtype=np.int64)
    counts[[0, 2, 3, 9]] = [5, 3, 2, 10]
    assert rate_at(counts, 0) == 0.25
    assert rate_at(counts, 3) == 0.5
    assert rate_at(counts, 64) == 1.0
    assert math.isnan(rate_at(np.zeros(65, dtype=np.int64), 3))
    jac = np.zeros(101, dtype=np.int64)
    jac[[10, 50, 90]] = [1, 1, 2]
    assert rate_at_or_above(jac, 0.5) == 0.75
    assert rate_at_or_above(jac, 0.91) == 0.0


def test_distinct_counts_take_each_unordered_stratum_pair_once() -> None:
    hist = np.zeros((N_S * N_S, 65), dtype=np.int64)
    a, b = STRATA.index("500-1000"), STRATA.index(">1000")
    hist[a * N_S + b, 1] = 7  # groups are stored with the smaller code first
    hist[a * N_S + a, 0] = 2
    hist[STRATA.index("line") * N_S + a, 0] = 100  # a pair across sets: never counted
    assert distinct_counts(hist, SETS["long>500"]).sum() == 9
    assert recall_counts(np.ones((len(EDITS) * N_S, 65)), ["mirror"], ["para"]).sum() == 65


def test_target_k_and_operating_point_agree_with_the_rates() -> None:
    res, _ = _evaluation()
    k = res.target_k(DEFAULT, "long>500")
    if k is not None:
        assert res.recall(DEFAULT, k, "long>500") >= 0.95
        assert res.fpr(DEFAULT, k, "long>500") <= 0.001
        assert (
            k == 0
            or res.recall(DEFAULT, k - 1, "long>500") < 0.95
            or res.fpr(DEFAULT, k - 1, "long>500") > 0.001
        )
    k_op, recall, fpr = res.operating_point(DEFAULT, "long>500")
    assert fpr <= 0.001 and recall == res.recall(DEFAULT, k_op, "long>500")
    assert k_op == 32 or res.fpr(DEFAULT, k_op + 1, "long>500") > 0.001
