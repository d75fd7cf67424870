"""The recall benchmark's fingerprint cache follows the package's recipe, not only
its settings: a changed weighting must never be answered from old values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import recall
from simhash_hbase import FingerprintParams
from simhash_hbase.fingerprint.simhash import Fingerprinter


class _OtherRecipe(Fingerprinter):
    """The same settings, a different weighting (as a code change would give)."""

    def fingerprint_margins(self, text: str) -> tuple[int, np.ndarray]:
        fp, margins = super().fingerprint_margins(text)
        return fp ^ 1, margins * 2


def test_a_changed_recipe_gets_its_own_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(recall, "CACHE", tmp_path)
    params = FingerprintParams(version=2)
    before = recall._cache_path(params)
    assert recall._cache_path(params) == before  # stable for one recipe
    monkeypatch.setattr(recall, "Fingerprinter", _OtherRecipe)
    assert recall._cache_path(params) != before


def test_cached_values_are_what_the_package_computes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(recall, "CACHE", tmp_path)
    texts = ["海量文本去重与指纹", "抽屉原理和汉明距离，近似重复的网页"]
    params = FingerprintParams()
    first = recall.fingerprints(params, texts, workers=1)
    again = recall.fingerprints(params, texts, workers=1)  # from the cache
    want = [Fingerprinter(params).fingerprint(t) for t in texts]
    assert [int(x) for x in first[0]] == want == [int(x) for x in again[0]]
    assert np.array_equal(first[1], again[1])
