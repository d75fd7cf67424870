"""All-pairs search in memory: exact against brute force, and `shdb dedup`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase.errors import InvalidQuery
from simhash_hbase.layout.pairs import Pair, clusters, near_duplicate_pairs
from simhash_hbase.layout.scheme import SCHEMES

from .test_cli import shdb
from .test_index import ARTICLE, OTHER


def _brute_force(fps: np.ndarray, k: int) -> list[Pair]:
    dist = np.bitwise_count(fps[:, None] ^ fps[None, :])
    i, j = np.nonzero(np.triu(dist <= k, 1))
    return sorted(Pair(int(a), int(b), int(dist[a, b])) for a, b in zip(i, j))


def _planted(seed: int, n: int = 1500) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    near = []
    for fp in base[:150].tolist():
        for dist in range(6):
            for bit in rng.choice(64, dist, replace=False).tolist():
                fp ^= 1 << bit
            near.append(fp)
    return np.concatenate([base, np.array(near, dtype=np.uint64), base[:20]])  # + exact copies


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_pairs_equal_brute_force(scheme: str, k: int) -> None:
    fps = _planted(k)
    assert near_duplicate_pairs(fps, k, SCHEMES[scheme]) == _brute_force(fps, k)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=40), st.integers(0, 3))
def test_pairs_on_arbitrary_inputs(values: list[int], k: int) -> None:
    fps = np.array(values + [v ^ 0b101 for v in values[:5]] + values[:3], dtype=np.uint64)
    assert near_duplicate_pairs(fps, k, SCHEMES["5x10"]) == _brute_force(fps, k)


def test_k_above_scheme_is_an_error() -> None:
    with pytest.raises(InvalidQuery):
        near_duplicate_pairs(np.zeros(3, dtype=np.uint64), 4, SCHEMES["5x10"])


def test_clusters_are_connected_components() -> None:
    pairs = [Pair(0, 1, 1), Pair(1, 2, 3), Pair(3, 4, 0)]
    assert clusters(pairs, 6) == [[0, 1, 2], [3, 4]]


def test_cli_dedup_fingerprint_file(tmp_path: Path) -> None:
    path = tmp_path / "fps.tsv"
    path.write_text("a\t0\nb\t7\nnot hex\nc\tffffffffffffffff\n1\n", encoding="utf-8")
    result = shdb("dedup", "--fingerprints", str(path))
    assert result.exit_code == 3  # one line skipped
    rows = [json.loads(x) for x in result.stdout.splitlines()]
    assert rows == [
        {"id": "b", "near_id": "a", "distance": 3, "similarity": None},
        {"id": f"{path}:5", "near_id": "a", "distance": 1, "similarity": None},
        {"id": f"{path}:5", "near_id": "b", "distance": 2, "similarity": None},
    ]
    assert f"skipped {path}:3: 'not hex' is not a 64-bit hex fingerprint" in result.stderr
    clustered = shdb("dedup", "--fingerprints", str(path), "--clusters", "-k", "1")
    assert clustered.stdout.splitlines() == [json.dumps(["a", f"{path}:5"])]


def test_cli_dedup_documents(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    rows = [("x", ARTICLE), ("y", OTHER), ("x2", ARTICLE + "！")]
    path.write_text(
        "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in rows),
        encoding="utf-8",
    )
    result = shdb("dedup", str(path), "--clusters")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [json.dumps(["x", "x2"])]
