"""A Spark ingest among other writers of one HBase index (issue 42, deliverable 3):
its executors' batches look up and write in the write section, so a Spark ingest
beside a `shdb ingest` of another input reports every planted pair once across the
two reports, as one writer would; and a retried task reports what it would have
(docs/spark.md, "Concurrent writers").
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from simhash_hbase.spark.executor import FAULT_ENV  # noqa: E402

pytestmark = pytest.mark.hbase

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
runner = CliRunner()
WORDS = [
    "海量", "文档", "去重", "相似", "哈希", "分段", "鸽巢", "原理",
    "行键", "区域", "服务器", "批量", "写入", "读取", "压缩", "编码",
]  # fmt: skip


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(60)) + f" 编号{n}"


def _write_jsonl(path: Path, rows: list[tuple[str, str]]) -> Path:
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _spark_rows(folder: Path) -> list[tuple[str, str]]:
    rows = []
    for part in sorted(glob.glob(str(folder / "duplicates.jsonl" / "part-*"))):
        with open(part, encoding="utf-8") as f:
            rows += [(r["id"], r["near_id"]) for r in map(json.loads, f) if r]
    return rows


def _ingest_rows(report: Path) -> list[tuple[str, str]]:
    return [
        (found["id"], match["id"])
        for found in map(json.loads, report.read_text(encoding="utf-8").splitlines())
        for match in found["matches"]
    ]


def _index(url: str, tmp_path: Path) -> None:
    """The index both writers write, made by an ingest of one unrelated text."""
    seed = _write_jsonl(tmp_path / "seed.jsonl", [("seed", "完全无关的一段文字" * 9)])
    made = runner.invoke(app, ["ingest", "--create", str(seed), "--index", url])
    assert made.exit_code == 0, made.output


def test_spark_ingest_beside_shdb_ingest_reports_every_planted_pair_once(
    spark, hbase_url: str, tmp_path: Path
) -> None:
    """A Spark ingest (2 partitions, small batches, --report) and a `shdb ingest
    --report` of another input at once: each planted pair's original in one input
    and its near-copy in the other; every pair in exactly one report, nothing else
    in either (main's Spark report looked up before writing and missed the
    other's documents committed meanwhile, which missed the Spark documents)."""
    rng = random.Random(42)
    pairs, spark_in, other_in = 60, [], []
    for p in range(pairs):
        text = _text(rng, p)
        a, b = (spark_in, other_in) if p % 2 else (other_in, spark_in)
        a.append((f"p{p}a", text))
        b.append((f"p{p}b", text + " 转载"))
        other_in += [(f"u{p}.{r}", _text(rng, 1000 + 10 * p + r)) for r in range(4)]
        spark_in.append((f"s{p}", _text(rng, 5000 + p)))
    _index(hbase_url, tmp_path)
    other = _write_jsonl(tmp_path / "other.jsonl", other_in)
    report = tmp_path / "other-report.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "simhash_hbase", "ingest", str(other), "-i", hbase_url,
         "--report", str(report), "--batch-size", "3"],
        env=ENV, cwd=ROOT, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        got = runner.invoke(
            app,
            ["spark", "ingest", str(_write_jsonl(tmp_path / "spark.jsonl", spark_in)),
             "--index", hbase_url, "--report", str(tmp_path / "out"), "--batch-size", "4",
             "--partitions", "2", "--rejects", str(tmp_path / "rejects")],
        )  # fmt: skip
        assert proc.wait(timeout=600) == 0, proc.communicate()[1].decode()
    finally:
        proc.kill()
        proc.wait()
    assert got.exit_code in (0, 3), got.output
    reported = Counter(
        frozenset(pair) for pair in [*_spark_rows(tmp_path / "out"), *_ingest_rows(report)]
    )
    assert reported == Counter(frozenset((f"p{p}a", f"p{p}b")) for p in range(pairs))


def test_a_retried_write_task_reports_each_pair_once(
    spark, hbase_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0's first attempt dies after 2 batches (their lines saved, the next
    batch's first writes landed): the retried task writes those batches again and
    reports their saved lines, so the report is exactly that of a run without the
    fault: every planted pair (in one input, across partitions) once."""
    rng = random.Random(7)
    pairs, rows = 24, []
    for p in range(pairs):
        text = _text(rng, p)
        rows += [(f"p{p}a", text), (f"u{p}", _text(rng, 900 + p)), (f"p{p}b", text + " 转载")]
    _index(hbase_url, tmp_path)
    monkeypatch.setenv(FAULT_ENV, "0:2")
    got = runner.invoke(
        app,
        ["spark", "ingest", str(_write_jsonl(tmp_path / "in.jsonl", rows)), "--index",
         hbase_url, "--report", str(tmp_path / "out"), "--batch-size", "4",
         "--partitions", "2", "--rejects", str(tmp_path / "rejects")],
    )  # fmt: skip
    assert got.exit_code in (0, 3), got.output
    reported = Counter(frozenset(pair) for pair in _spark_rows(tmp_path / "out"))
    assert reported == Counter(frozenset((f"p{p}a", f"p{p}b")) for p in range(pairs))
    again = runner.invoke(
        app,
        ["spark", "ingest", str(tmp_path / "in.jsonl"), "--index", hbase_url, "--report",
         str(tmp_path / "again"), "--batch-size", "4", "--partitions", "2", "--rejects",
         str(tmp_path / "rejects")],
    )  # fmt: skip
    assert again.exit_code in (0, 3), again.output
    assert _spark_rows(tmp_path / "again") == []  # every document held already, unchanged
