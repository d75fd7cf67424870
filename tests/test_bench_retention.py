"""benchmarks/retention.py runs small and proves what its figures rest on: expiry
keeps exactly the window (the stream's documents equal the window's), the two
indexes answer alike, and the stream's file stops growing once expiry frees pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.retention import CADENCES, measure


@pytest.mark.parametrize("cadence", CADENCES)
def test_a_small_stream_keeps_its_window_and_reuses_freed_pages(
    tmp_path: Path, cadence: str
) -> None:
    r = measure(tmp_path / "work", w=400, days=7, retain=2, cadence=cadence, queries=40)
    assert r["window"] == 800 and r["ingested"] == 2800
    sizes = r["disk_by_day"]
    assert sizes[-1] <= 1.05 * sizes[2]  # flat once expiry runs: freed pages are reused
    assert r["disk"] > 0 and r["disk_window"] > 0 and r["p50_ms"] > 0
    assert not (tmp_path / "work").exists()
