"""The benchmark and evaluation suites run end to end (``--smoke``: tiny sizes, a
generated corpus, no network), and their reports come out whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import bench
from benchmarks import eval as quality

from .conftest import hbase_address


def test_bench_smoke_runs_every_embedded_section(tmp_path: Path) -> None:
    assert bench.main(["--smoke", "--no-hbase", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "bench-smoke.json").read_text())
    assert results["errors"] == {}
    ran = [s for s in bench.all_sections() if not s.needs_hbase and "smoke" in s.modes]
    assert {s.name for s in ran} <= set(results)
    page = (tmp_path / "benchmarks.md").read_text()
    assert not re.search(r"\$[a-z_{]", page)  # every placeholder was filled
    for section in ran:
        if section.render is not None:
            assert f"## {section.title}" in page
    figures = bench.all_figures(results, ran)
    assert any(f.met is not None for f in figures)
    for figure in figures:
        assert figure.figure in page


@pytest.mark.hbase
def test_bench_smoke_runs_the_hbase_sections_on_a_running_hbase(tmp_path: Path) -> None:
    """The HBase sections against the test suite's HBase (--hbase): tables of their own,
    dropped at the end; the storage figures need the bench's own instance and skip."""
    address = hbase_address()
    # spark_bulkload stages HFiles that a containerised HBase cannot read:
    # tests/test_spark_bulkload.py runs that path with a folder both sides see.
    hbase_sections = [
        s.name for s in bench.all_sections() if s.needs_hbase and s.name != "spark_bulkload"
    ]
    args = ["--smoke", "--hbase", address, "--out", str(tmp_path), "--only", *hbase_sections]
    assert bench.main(args) == 0
    results = json.loads((tmp_path / "bench-smoke.json").read_text())
    assert results["errors"] == {}
    assert {"ingest_hbase", "query_hbase", "hbase_transports"} <= set(results)
    for steps in results["query_hbase"]["schemes"].values():
        assert all(step["wrong_answers"] == 0 for step in steps)
    for layout in results["hbase_transports"]["layouts"].values():
        assert [a["wrong"] for a in layout["apis"].values()] == [0, 0]
    assert set(results["skipped"]) == {"storage_hbase", "query_hbase_schema"}
    page = (tmp_path / "benchmarks.md").read_text()
    assert "HBase 5x10 query p50 over Thrift2 / one raw Thrift2 get" in page
    assert "Thrift2 query p50 / one get" in page


def test_eval_smoke_writes_the_report(tmp_path: Path) -> None:
    assert quality.main(["--smoke", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "quality.md").read_text()
    assert page.startswith("# Detection quality")
    assert "python -m benchmarks.eval --smoke" in page
    data = json.loads((tmp_path / "quality-smoke.json").read_text())
    assert data["meta"]["edited_pairs"] > 0 and data["meta"]["distinct_pairs"] > 0
    assert (tmp_path / "quality-long.png").stat().st_size > 0
