"""The scale bench's query pass (benchmarks/scale.py): its answers are checked
against brute force outside the timed loop, and a wrong side is counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import scale
from benchmarks.context import synthetic_fingerprints

faiss = pytest.importorskip("faiss")

N = 3_000


class _Blind:
    """A peer that finds nothing: every checked query is then one wrong answer."""

    def range_search(self, codes: np.ndarray, radius: int) -> tuple[Any, Any, np.ndarray]:
        return None, None, np.zeros(0, dtype=np.int64)


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    fps = synthetic_fingerprints(N, 7)[:N]
    path = tmp_path_factory.mktemp("scale") / "ix"
    scale._ingest(path, [(f"d{i}", fp) for i, fp in enumerate(fps.tolist())], None)
    return path, fps


def _pass(held: tuple[Path, np.ndarray], peer: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from simhash_hbase import SimhashIndex

    monkeypatch.setattr(scale, "QUERIES", 100)
    monkeypatch.setattr(scale, "CHECKED", 40)
    path, fps = held
    with SimhashIndex.open(str(path), readonly=True) as index:
        return scale._pass(index, peer, fps, np.random.default_rng(1))


def test_both_sides_right(held: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    peer = faiss.IndexBinaryMultiHash(64, 4, 16)
    peer.add(held[1].view(np.uint8).reshape(N, 8))
    out = _pass(held, peer, monkeypatch)
    assert (out["wrong"], out["checked"]) == (0, 80)
    assert set(out["p50_us"]) == set(out["p99_us"]) == {"shdb", "faiss"}


def test_a_wrong_side_is_counted(
    held: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # every query is a held fingerprint with at most K bits flipped: never empty
    assert _pass(held, _Blind(), monkeypatch)["wrong"] == 40
