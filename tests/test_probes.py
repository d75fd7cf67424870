"""Multi-probe: margins, the order of flip sets, the bound (the index path is in
tests/test_probe_index.py)."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import Fingerprinter, FingerprintParams
from simhash_hbase.errors import InvalidQuery
from simhash_hbase.fingerprint.probes import (
    MAX_FLIPS,
    MAX_PROBES,
    bound,
    flip_sets,
    probe_fingerprints,
)

TEXT = (
    "结巴分词支持加载IDF词典并且提供了一个默认的词典，"
    "它包含了大量的词组以及基于海量文本统计出来的IDF词频。"
)

margin_arrays = st.lists(
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False), min_size=64, max_size=64
).map(np.array)


def test_margins_are_the_distance_of_each_bit_sum_from_zero() -> None:
    fp = Fingerprinter()
    value, margins = fp.fingerprint_margins(TEXT)
    assert value == fp.fingerprint(TEXT)
    sums = fp.bit_sums(TEXT)
    assert margins.shape == (64,)
    for bit in range(64):
        assert margins[bit] == abs(sums[63 - bit])  # sums are MSB first
        assert bool(value >> bit & 1) == (sums[63 - bit] > 0)


def test_the_weakest_bit_is_the_first_an_edit_flips() -> None:
    """Adding a term of weight w moves every sum by w: exactly the bits whose margin
    is below w can flip, the weakest first. (Version 1's weights: version 2 caps each
    term at a fifth of the total, so one new term also moves the others.)"""
    fp = Fingerprinter(FingerprintParams(version=1))
    value, margins = fp.fingerprint_margins(TEXT)
    weakest = int(np.argmin(margins))
    edited, _ = fp.fingerprint_margins(TEXT + "，小红帽")
    flipped = [b for b in range(64) if (value ^ edited) >> b & 1]
    assert all(margins[b] <= np.sort(margins)[len(flipped) + 8] for b in flipped)
    assert not flipped or weakest in flipped or margins[weakest] == margins[flipped].min()


@given(margin_arrays, st.integers(0, MAX_PROBES))
def test_flip_sets_are_the_cheapest_sets_in_order(margins: np.ndarray, probes: int) -> None:
    sets = flip_sets(margins, probes)
    assert len(sets) == probes and len(set(sets)) == probes
    cost = [(math.fsum(float(margins[b]) for b in s), len(s), s) for s in sets]
    assert cost == sorted(cost)
    if probes:  # no set of up to MAX_FLIPS bits left out is cheaper than the last one
        weakest = sorted(range(64), key=lambda b: (margins[b], b))[: min(probes + 2, 12)]
        last = cost[-1]
        for size in range(1, MAX_FLIPS + 1):
            for combo in combinations(sorted(weakest), size):
                if combo not in sets:
                    assert (math.fsum(float(margins[b]) for b in combo), size, combo) > last


def test_probe_fingerprints_flip_exactly_their_sets() -> None:
    margins = np.arange(64, dtype=np.float64)[::-1]  # bit 63: 0, bit 62: 1, bit 61: 2
    fps = probe_fingerprints(0, margins, 4)
    # {63} costs 0; {62} and {62, 63} cost 1 (fewer bits first); {61} costs 2
    assert fps == [0, 1 << 63, 1 << 62, (1 << 63) | (1 << 62), 1 << 61]
    assert flip_sets(margins, 0) == [] and probe_fingerprints(5, margins, 0) == [5]


def test_bound_and_range() -> None:
    assert bound(3, 0) == 3
    assert bound(3, 1) == bound(3, 64) == 3 + MAX_FLIPS
    with pytest.raises(InvalidQuery, match="probes"):
        flip_sets(np.zeros(64), MAX_PROBES + 1)
    with pytest.raises(InvalidQuery, match="probes"):
        flip_sets(np.zeros(64), -1)
