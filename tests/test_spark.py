"""Spark jobs in local mode: exactness against `shdb dedup`, HBase backfill, retries.

One SparkSession serves the whole module (``local[2,3]``: 2 cores, a task may
fail 3 times); the CLI commands run in-process and reuse it.
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app
from simhash_hbase.errors import StoreUnavailable
from simhash_hbase.layout import codec
from simhash_hbase.layout.scheme import SCHEMES, get_scheme
from simhash_hbase.records import DEFAULT_LIMIT
from simhash_hbase.text.readers import SourceOptions, read_sources

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from simhash_hbase.spark import inputs  # noqa: E402
from simhash_hbase.spark.dedup import block_keys  # noqa: E402
from simhash_hbase.spark.executor import FAULT_ENV  # noqa: E402

from .test_exit_contract import DOWN, INPUTS  # noqa: E402

runner = CliRunner()


def _read_parts(folder: Path) -> list[dict[str, object]]:
    rows = []
    for part in sorted(glob.glob(str(folder / "part-*"))):
        with open(part, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


# -- the block keys are the index's scan prefixes ------------------------------
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_block_keys_are_the_scan_prefixes(name: str) -> None:
    scheme = get_scheme(name)
    fps = np.array([random.Random(n).getrandbits(64) for n in range(200)], dtype=np.uint64)
    prefixes = codec.encode_prefixes_many(scheme.fields_many(fps))
    want = [[int.from_bytes(p, "big") for p in row] for row in prefixes]
    assert block_keys(fps, scheme).tolist() == want


# -- reading: JSONL ranges give exactly what read_sources gives ----------------
def _corpus(folder: Path) -> Path:
    rng = random.Random(3)
    lines = []
    for n in range(60):
        text = "".join(
            rng.choice("文本重复检测的方法很多我们的目标是找到近似副本") for _ in range(40)
        )
        lines.append(json.dumps({"id": f"j{n}", "text": text, "n": n}, ensure_ascii=False))
    lines[7] = '{"id": "broken", "text": '  # malformed
    lines[20] = json.dumps({"id": "long", "text": "x" * 5000})  # over --max-bytes below
    lines[33] = ""  # blank lines are not records
    path = folder / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("split", [1, 37, 100, 999, 1 << 20])
def test_jsonl_ranges_read_exactly_as_read_sources(tmp_path: Path, split: int) -> None:
    path = _corpus(tmp_path)
    opts = SourceOptions(max_bytes=4000)
    plan = inputs.plan([str(path)], "auto", opts, split)
    assert len(plan.units) == -(-path.stat().st_size // split)
    data = path.read_bytes()
    numbered = []
    for unit in plan.units:  # what number_lines computes in Spark, done here by hand
        first = data.count(b"\n", 0, unit.start) + 1
        numbered.append(inputs.Unit(**{**unit.__dict__, "first_line": first}))
    got = [record for _, record in inputs.read_units(numbered, opts)]
    assert got == list(read_sources([str(path)], opts))


def test_number_lines_matches_a_sequential_count(spark, tmp_path: Path) -> None:
    path = _corpus(tmp_path)
    plan = inputs.plan([str(path)], "auto", SourceOptions(), 500)
    units = inputs.number_lines(spark, plan.units)
    data = path.read_bytes()
    assert len(units) > 10
    for unit in units:
        assert unit.first_line == data.count(b"\n", 0, unit.start) + 1


# -- the CLI: spark dedup == shdb dedup ----------------------------------------
def _dedup_corpus(folder: Path) -> list[str]:
    """JSONL with planted near-copies and 100 exact copies, a text folder, bad records."""
    rng = random.Random(11)
    words = [
        "数据",
        "近似",
        "重复",
        "检测",
        "方法",
        "文本",
        "网页",
        "索引",
        "指纹",
        "分布式",
        "集群",
        "存储",
        "查询",
        "分片",
    ]
    base = [" ".join(rng.choice(words) for _ in range(80)) for _ in range(40)]
    rows = [{"id": f"b{n}", "text": t} for n, t in enumerate(base)]
    rows += [{"id": f"c{n}", "text": base[n] + " 转载"} for n in range(0, 40, 3)]
    rows += [{"id": f"x{n}", "text": base[0]} for n in range(100)]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    return _with_bad_records_and_texts(folder, lines, base[5], base[6] + " 完")


def _with_bad_records_and_texts(folder: Path, lines: list[str], one: str, two: str) -> list[str]:
    """``lines`` as a.jsonl with a line that is not JSON and a record with no terms among
    them, beside a text folder of two texts and one that is not UTF-8
    (``\\xff\\xfe`` would read as UTF-16): the inputs both dedups are given."""
    lines = [*lines]
    lines.insert(17, "not json")
    lines.insert(30, json.dumps({"id": "empty", "text": "。。。"}, ensure_ascii=False))
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = folder / "texts"
    texts.mkdir()
    (texts / "one.txt").write_text(one, encoding="utf-8")
    (texts / "two.txt").write_text(two, encoding="utf-8")
    (texts / "bad.txt").write_bytes(b"bad \xc3\x28 bytes")
    return [str(folder / "a.jsonl"), str(texts)]


def _mixed_corpus(folder: Path, seed: int) -> list[str]:
    """JSONL of every kind `shdb dedup` must get right, shuffled: mass copies, a
    chain of edits (each version near the one before, not the first), near-misses
    (half of one text, half of another), Traditional reposts, small edits in
    several copies, distinct texts; bad records; and a text folder."""
    import opencc

    rng = random.Random(seed)
    words = [
        "数据", "近似", "重复", "检测", "方法", "文本", "网页", "索引", "指纹", "分布式",
        "集群", "存储", "查询", "分片", "海量", "文档", "去重", "相似", "哈希", "鸽巢",
        "原理", "行键", "区域", "服务器", "批量", "写入", "读取", "压缩", "编码", "网络",
        "时间", "问题", "系统", "用户", "发现", "结果", "计算", "模型", "算法", "测试",
    ]  # fmt: skip

    def text(n: int) -> str:
        return "".join(rng.choice(words) + ("。" if rng.random() < 0.1 else "") for _ in range(n))

    base = [text(rng.randint(60, 120)) for _ in range(40)]
    rows = [(f"b{i}", t) for i, t in enumerate(base)]
    rows += [(f"m{i}", base[0]) for i in range(rng.randint(120, 200))]
    chain = base[1]
    for i in range(10):
        cut = rng.randrange(len(chain))
        chain = chain[:cut] + text(2) + chain[cut + 4 :]
        rows.append((f"c{i}", chain))
    for i in range(2, 10):
        half = len(base[i]) // 2
        rows.append((f"h{i}", base[i][:half] + base[i + 20][half:]))
    s2t = opencc.OpenCC("s2t")
    rows += [(f"t{i}", s2t.convert(base[i])) for i in range(10, 16)]
    rows += [(f"e{i}.{r}", base[i] + text(r + 1)) for i in range(16, 20) for r in range(3)]
    rng.shuffle(rows)
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in rows]
    return _with_bad_records_and_texts(folder, lines, base[5], base[6] + "完")


def _lines(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("seed", [1, 2])
def test_spark_dedup_equals_shdb_dedup(spark, tmp_path: Path, seed: int) -> None:
    """The same lines (matches by both nets, similarity and fingerprint included,
    totals) and the same clusters as `shdb dedup`, on every kind of near-copy (in
    groups of at most 33 nodes, which `shdb dedup` judges whole: docs/spark.md)."""
    paths = _mixed_corpus(tmp_path, seed)
    limit = ["--limit", "4"] if seed == 2 else []
    local = runner.invoke(app, ["dedup", *paths, *limit, "-o", str(tmp_path / "want.jsonl")])
    assert local.exit_code == 3, local.output
    grouped = runner.invoke(app, ["dedup", *paths, "--clusters", "-o", str(tmp_path / "c.jsonl")])
    assert grouped.exit_code == 3, grouped.output
    out = tmp_path / "out"
    args = ["spark", "dedup", *paths, *limit, "-o", str(out), "--clusters", "--partitions", "3"]
    got = runner.invoke(app, args)
    assert got.exit_code == 3, got.output
    want = _lines(tmp_path / "want.jsonl")
    assert _read_parts(out / "matches.jsonl") == want
    kinds = {m["id"][0] for row in want for m in row["matches"]}  # type: ignore[index]
    assert {"m", "c", "t", "e"} <= kinds  # the corpus exercises every kind
    assert any(m["similarity"] < 0.9 for r in want for m in r["matches"])  # type: ignore[index]
    assert [r["ids"] for r in _read_parts(out / "clusters.jsonl")] == _lines(tmp_path / "c.jsonl")
    # The summaries agree on the counts too.
    assert local.output.split(", skipped")[0] in got.output
    rejects = _read_parts(out / "rejects.jsonl")
    assert [r["source"] for r in rejects] == [
        f"{paths[0]}:18",
        f"{paths[0]}:31",
        f"{paths[1]}/bad.txt:1",
    ]
    table = spark.read.parquet(str(out / "matches.parquet"))
    assert table.count() == len(want)


def test_spark_dedup_output_is_bounded_on_mass_copies(spark, tmp_path: Path) -> None:
    """3,000 copies of one text and a near-copy of it: one line per later input
    with at most --limit matches and the exact count, never the 4.5 M pairs."""
    text = "海量文档去重的方法很多，我们的目标是找到近似副本并且只报告最近的几个。" * 4
    n = 3000
    rows = [{"id": f"x{i:04d}", "text": text} for i in range(n)]
    rows.append({"id": "near", "text": text + "转载"})
    path = tmp_path / "mass.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    out = tmp_path / "out"
    got = runner.invoke(app, ["spark", "dedup", str(path), "-o", str(out), "--clusters"])
    assert got.exit_code == 0, got.output
    lines = _read_parts(out / "matches.jsonl")
    assert len(lines) == n
    assert all(len(r["matches"]) <= DEFAULT_LIMIT for r in lines)  # type: ignore[arg-type]
    assert [r["total"] for r in lines] == list(range(1, n + 1))
    assert [m["id"] for m in lines[-1]["matches"]] == [f"x{i:04d}" for i in range(DEFAULT_LIMIT)]
    assert f"{n * (n + 1) // 2} near-duplicate pairs" in got.output
    assert [r["size"] for r in _read_parts(out / "clusters.jsonl")] == [n + 1]


# -- HBase backfill --------------------------------------------------------------
def _ingest_corpus(folder: Path, n: int = 120) -> tuple[Path, list[str]]:
    rng = random.Random(5)
    words = [
        "海量",
        "文档",
        "去重",
        "相似",
        "哈希",
        "分段",
        "鸽巢",
        "原理",
        "行键",
        "区域",
        "服务器",
        "批量",
        "写入",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(60)) + f" 编号{i}" for i in range(n)]
    path = folder / "new.jsonl"
    lines = [
        json.dumps({"id": f"n{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(texts)
    ]
    lines.append('{"id": 5}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, texts


@pytest.mark.hbase
def test_spark_ingest_then_query_and_verify(spark, hbase_url: str, tmp_path: Path) -> None:
    path, texts = _ingest_corpus(tmp_path)
    held = tmp_path / "held.jsonl"
    held.write_text(
        json.dumps({"id": "old", "text": texts[10] + " 来源"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    assert (
        runner.invoke(app, ["ingest", "--create", str(held), "--index", hbase_url]).exit_code == 0
    )
    report, rejects = tmp_path / "report", tmp_path / "rejects"
    result = runner.invoke(
        app,
        [
            "spark", "ingest", str(path), "--index", hbase_url, "--report", str(report),
            "--rejects", str(rejects), "--batch-size", "16",
        ],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    # the rule the index's nets apply, as `shdb ingest` words it (not a bare k)
    assert "; a match: similarity >= " in result.output
    assert [r["source"] for r in _read_parts(rejects)] == [f"{path}:{len(texts) + 1}"]
    dups = _read_parts(report / "duplicates.jsonl")
    hit = [d for d in dups if (d["id"], d["near_id"]) == ("n10", "old")]
    assert hit and hit[0]["similarity"] >= 0.5  # judged by the index's two nets
    query = runner.invoke(app, ["query", texts[42], "--index", hbase_url, "--json"])
    assert query.exit_code == 0, query.output
    assert json.loads(query.output)["matches"][0]["id"] == "n42"
    verify = runner.invoke(app, ["verify", "--index", hbase_url, "--json"])
    assert verify.exit_code == 0, verify.output
    assert json.loads(verify.output)["documents"] == len(texts) + 1


@pytest.mark.hbase
def test_killed_write_task_is_retried_and_verify_is_clean(
    spark, hbase_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, texts = _ingest_corpus(tmp_path, 80)
    # Partition 0's first attempt dies after 2 batches, with batch 3's cells written.
    monkeypatch.setenv(FAULT_ENV, "0:2")
    sc = spark.sparkContext
    group = f"faulted-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "ingest with a killed task")
    result = runner.invoke(
        app,
        ["spark", "ingest", "--create", str(path), "--index", hbase_url, "--batch-size", "8",
         "--rejects", str(tmp_path / "rejects")],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert f"added {len(texts)} documents" in result.output
    tracker = sc.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
    assert sum(tracker.getStageInfo(s).numFailedTasks for s in stages) == 1
    verify = runner.invoke(app, ["verify", "--index", hbase_url, "--json"])
    assert verify.exit_code == 0, verify.output
    assert json.loads(verify.output)["documents"] == len(texts)
    for i in (0, 41, 79):
        query = runner.invoke(app, ["query", texts[i], "--index", hbase_url, "-k", "0", "--json"])
        assert [m["id"] for m in json.loads(query.output)["matches"]] == [f"n{i}"]


@pytest.mark.parametrize(
    ("kind", "code", "lines"),
    [("good", 0, []), ("some bad", 3, [2]), ("all bad", 3, [1, 2]),
     ("CSV rows of the wrong width", 3, [3, 4])],
)  # fmt: skip
def test_spark_dedup_exits_by_the_contract(
    spark, tmp_path: Path, kind: str, code: int, lines: list[int]
) -> None:
    """The exit-code contract (tests/test_exit_contract.py) on Spark: each bad
    record, a CSV row among them, is one reject named by its line."""
    name, body = INPUTS[kind]
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    out = tmp_path / "out"
    result = runner.invoke(app, ["spark", "dedup", str(path), "-o", str(out)])
    assert result.exit_code == code, result.output
    rejects = _read_parts(out / "rejects.jsonl") if code else []
    assert sorted(str(r["source"]) for r in rejects) == [f"{path}:{n}" for n in lines]


def test_spark_ingest_into_an_unreachable_store_is_an_error(spark, tmp_path: Path) -> None:
    path, _ = _ingest_corpus(tmp_path, 3)
    result = runner.invoke(app, ["spark", "ingest", str(path), "--index", DOWN])
    assert result.exit_code == 2 and "not reachable" in result.output


@pytest.mark.hbase
def test_spark_ingest_creates_an_index_only_when_told(
    spark, hbase_url: str, tmp_path: Path
) -> None:
    path, _ = _ingest_corpus(tmp_path, 3)
    args = ["spark", "ingest", str(path), "--index", hbase_url, "--rejects", str(tmp_path / "r")]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and f"no index at {hbase_url}" in refused.output
    created = runner.invoke(app, [*args, "--create"])
    assert created.exit_code in (0, 3), created.output
    assert f"created a new, empty index at {hbase_url}" in created.output


def test_spark_ingest_that_fails_midway_says_what_is_kept(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_hbase.spark import jobs
    from simhash_hbase.spark.session import SparkJobFailed

    def failed(*args: object, **kwargs: object) -> None:
        raise SparkJobFailed("the Spark job failed: StoreUnavailable: HBase at h:9091 ...")

    monkeypatch.setattr(jobs, "ingest", failed)
    path, _ = _ingest_corpus(tmp_path, 3)
    result = runner.invoke(app, ["spark", "ingest", str(path), "--index", DOWN])
    assert result.exit_code == 2, result.output
    assert "shdb: error: the Spark job failed" in result.output
    assert "finished tasks wrote are saved; the same command again writes" in result.output


def test_spark_ingest_refuses_a_local_index(spark, tmp_path: Path) -> None:
    path, _ = _ingest_corpus(tmp_path, 3)
    result = runner.invoke(app, ["spark", "ingest", str(path), "--index", str(tmp_path / "ix")])
    assert result.exit_code == 2
    assert "not an HBase index URL" in result.output


def test_spark_ingest_refuses_a_report_with_a_bulk_load(tmp_path: Path) -> None:
    """A bulk load has no batches to look up in: its report could not be exact
    beside other writers (docs/spark.md), so the pair is refused before any work."""
    path, _ = _ingest_corpus(tmp_path, 3)
    result = runner.invoke(
        app,
        ["spark", "ingest", str(path), "--index", DOWN, "--report", str(tmp_path / "r"),
         "--bulk-load", str(tmp_path / "staging"), "--zookeeper", "127.0.0.1:1"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--report with --bulk-load" in result.output
    assert "drop --bulk-load for a report" in result.output


def _unreachable(_: int) -> int:
    raise StoreUnavailable("HBase at 127.0.0.1:1 is not reachable")


def test_a_failed_job_names_the_executors_error(spark) -> None:
    from simhash_hbase.spark.session import SparkJobFailed, job_errors

    expected = r"StoreUnavailable: HBase at 127\.0\.0\.1:1 is not"
    with pytest.raises(SparkJobFailed, match=expected), job_errors():
        spark.sparkContext.parallelize([1], 1).map(_unreachable).collect()


def test_parquet_input_gives_the_pairs_of_the_same_rows_as_jsonl(spark, tmp_path: Path) -> None:
    words = ["网页", "索引", "指纹", "集群", "存储", "查询", "分片", "近似"]
    rng = random.Random(2)
    texts = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(6)]
    rows = [(f"p{i}", t, i) for i, t in enumerate(texts + texts[:3])] + [("gap", None, 99)]
    df = spark.createDataFrame(rows, "id string, body string, n long").coalesce(1)
    df.write.parquet(str(tmp_path / "in.parquet"))
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"id": i, "body": t, "n": n}, ensure_ascii=False) + "\n"
            for i, t, n in rows[:-1]
        ),
        encoding="utf-8",
    )
    from_jsonl = tmp_path / "from-jsonl"
    args = ["spark", "dedup", str(jsonl), "--text-field", "body", "-o", str(from_jsonl)]
    local = runner.invoke(app, args)
    assert local.exit_code == 0, local.output
    want = _read_parts(from_jsonl / "matches.jsonl")
    out = tmp_path / "out"
    args = ["spark", "dedup", str(tmp_path / "in.parquet"), "--text-field", "body"]
    got = runner.invoke(app, [*args, "-o", str(out)])
    assert got.exit_code == 3, got.output
    assert _read_parts(out / "matches.jsonl") == want and len(want) >= 3
    (reject,) = _read_parts(out / "rejects.jsonl")
    assert reject["source"].endswith(":10") and "'body' is null" in reject["reason"]


def test_a_reused_output_folder_keeps_no_stale_outputs(spark, tmp_path: Path) -> None:
    """Clusters and rejects of an earlier run go when this run writes none."""
    paths = _dedup_corpus(tmp_path)
    out = tmp_path / "out"
    first = runner.invoke(app, ["spark", "dedup", *paths, "-o", str(out), "--clusters"])
    assert first.exit_code == 3, first.output
    assert (out / "clusters.jsonl").exists() and (out / "rejects.jsonl").exists()
    clean = tmp_path / "clean.jsonl"
    rows = [{"id": f"d{i}", "text": f"海量文本 去重 第{i % 3}篇"} for i in range(12)]
    clean.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    again = runner.invoke(app, ["spark", "dedup", str(clean), "-o", str(out)])
    assert again.exit_code == 0, again.output
    left = sorted(p.name for p in out.iterdir() if not p.name.startswith((".", "_")))
    assert left == ["matches.jsonl", "matches.parquet"]


def test_executors_run_the_drivers_python_not_the_first_on_path(tmp_path: Path) -> None:
    """From a virtualenv that is not activated, `python3` on PATH may lack the
    dependencies: a PATH whose python3 always fails must not matter."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'No module named mmh3' >&2\nexit 1\n")
    (fake / "python3").chmod(0o755)
    corpus = tmp_path / "in.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": f"海量文本 去重 第{i % 3}篇"}, ensure_ascii=False)
            + "\n"
            for i in range(12)
        ),
        "utf-8",
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PATH"] = f"{fake}:{env['PATH']}"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run(
        [sys.executable, "-m", "simhash_hbase", "spark", "dedup", str(corpus), "-o",
         str(tmp_path / "out"), "--master", "local[1]"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _read_parts(tmp_path / "out" / "matches.jsonl")


def test_the_jvm_launch_leaves_the_environment_as_it_was(spark: Any) -> None:
    """The launch arguments reach this process's JVM (its heap) and no child
    process: one that inherited them would take them for the user's and launch its
    own JVM without its own jars (the bulk load's HBase classes)."""
    from simhash_hbase.spark.session import local_driver_memory_mb

    assert "PYSPARK_SUBMIT_ARGS" not in os.environ
    heap = spark.sparkContext.getConf().get("spark.driver.memory")
    assert heap == f"{local_driver_memory_mb()}m"


@pytest.mark.parametrize(
    ("master", "conf", "env", "expected"),
    [
        (None, {}, {}, "--driver-memory {local}m pyspark-shell"),
        ("local[2]", {}, {}, "--driver-memory {local}m pyspark-shell"),
        ("local[2]", {"spark.driver.memory": "3g"}, {}, "--driver-memory 3g pyspark-shell"),
        ("spark://h:7077", {"spark.driver.memory": "2g"}, {}, "--driver-memory 2g pyspark-shell"),
        ("spark://h:7077", {}, {}, None),
        (None, {}, {"PYSPARK_SUBMIT_ARGS": "--driver-memory 5g pyspark-shell"}, "set by the user"),
        (None, {"spark.driver.memory": "3g"}, {"PYSPARK_GATEWAY_PORT": "1"}, None),
    ],
)
def test_the_driver_heap_reaches_the_jvm_launch(
    master: str | None,
    conf: dict[str, str],
    env: dict[str, str],
    expected: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spark.driver.memory set on the builder after the JVM started is ignored: it
    goes to the launch (local mode's 1 GB default heap ran out at 1 M documents)."""
    from simhash_hbase.spark import session

    for name in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    got = session._launch_args(master, conf)
    want = expected.format(local=session.local_driver_memory_mb()) if expected else None
    if expected == "set by the user":
        want = None  # the user's own launch arguments are left as they are
    assert got == want
    assert 1024 <= session.local_driver_memory_mb() <= 8192
