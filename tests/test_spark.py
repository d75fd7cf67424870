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
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app
from simhash_hbase.errors import StoreUnavailable
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams, similarity
from simhash_hbase.layout import codec
from simhash_hbase.layout.pairs import clusters, near_duplicate_pairs
from simhash_hbase.layout.scheme import SCHEMES, get_scheme
from simhash_hbase.records import DEFAULT_LIMIT, Record
from simhash_hbase.text.readers import SourceOptions, read_sources

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from simhash_hbase.spark import inputs  # noqa: E402
from simhash_hbase.spark.dedup import DedupJob, block_keys, run  # noqa: E402
from simhash_hbase.spark.executor import FAULT_ENV  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from simhash_hbase.spark.session import get_session

    session = get_session(
        "local[2,3]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.python.worker.reuse": "true",
        },
    )
    yield session
    session.stop()


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


# -- exactness on fingerprints, skew included ----------------------------------
def _skewed_fingerprints(seed: int) -> list[int]:
    """Random fps, near copies at distances 0..4, a group of 120 exact copies,
    and a block of 60 distinct fps sharing their first 26 bits (one 5x10 block)."""
    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(600)]
    for _ in range(150):
        fp = fps[rng.randrange(len(fps))]
        for bit in rng.sample(range(64), rng.randrange(0, 5)):
            fp ^= 1 << bit
        fps.append(fp)
    fps += [fps[3]] * 120
    head = fps[9] >> 38 << 38
    crowd = [head | rng.getrandbits(38) for _ in range(60)]
    fps += [*crowd, crowd[0] ^ 0b101, crowd[1] ^ 1 << 40]
    rng.shuffle(fps)
    return fps


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_pairs_and_clusters_equal_the_in_memory_dedup(spark, name: str) -> None:
    scheme = get_scheme(name)
    fps = _skewed_fingerprints(7)
    ids = [f"doc{i}" for i in range(len(fps))]
    rdd = spark.sparkContext.parallelize([(i, ids[i], fp) for i, fp in enumerate(fps)], 3)
    # A tile of 16 cuts both the exact-copy group and the crowded block into many units.
    result = run(spark, rdd, DedupJob(scheme, 3, tile=16, partitions=3), with_clusters=True)
    want = near_duplicate_pairs(np.array(fps, dtype=np.uint64), 3, scheme)
    got = [(r.near_id, r.id, r.distance) for r in result.pairs.collect()]
    assert got == [(ids[i], ids[j], d) for i, j, d in want]
    assert len(got) > 120 * 119 // 2
    assert result.clusters is not None
    got_clusters = [list(r.ids) for r in result.clusters.collect()]
    assert got_clusters == [[ids[i] for i in g] for g in clusters(want, len(fps))]


def test_exact_duplicate_group_does_not_land_in_one_block(spark) -> None:
    """1000 copies of one fingerprint are one row in the block shuffle."""
    scheme = get_scheme("5x10")
    fps = [0x0123456789ABCDEF] * 1000 + [0x0123456789ABCDEE]
    job = DedupJob(scheme, 3, tile=64, partitions=2)
    groups = job.distinct(spark.sparkContext.parallelize(list(enumerate(fps)), 2))
    near = job.near_pairs(groups).collect()
    assert len(near) == 1 and near[0][2] == 1 and near[0][4] == 1000
    assert job.pairs(groups, job.near_pairs(groups)).count() == 1001 * 1000 // 2


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
    lines.insert(17, "not json")
    lines.insert(30, json.dumps({"id": "empty", "text": "。。。"}, ensure_ascii=False))
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = folder / "texts"
    texts.mkdir()
    (texts / "one.txt").write_text(base[5], encoding="utf-8")
    (texts / "two.txt").write_text(base[6] + " 完", encoding="utf-8")
    (texts / "bad.txt").write_bytes(b"bad \xc3\x28 bytes")  # not UTF-8 (\xff\xfe: UTF-16)
    return [str(folder / "a.jsonl"), str(texts)]


def test_spark_dedup_cli_equals_shdb_dedup(spark, tmp_path: Path) -> None:
    paths = _dedup_corpus(tmp_path)
    out = tmp_path / "out"
    local = runner.invoke(app, ["dedup", *paths, "-o", str(tmp_path / "pairs.jsonl")])
    assert local.exit_code == 3, local.output
    got = runner.invoke(
        app, ["spark", "dedup", *paths, "-o", str(out), "--clusters", "--tile", "32"]
    )
    assert got.exit_code == 3, got.output
    want = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    pairs = _read_parts(out / "pairs.jsonl")
    # shdb dedup matches by both nets (docs/nets.md): a pigeonhole pair whose
    # sketches estimate under the floor is not a near-copy. Spark's job is the
    # pigeonhole alone; its pairs, less those, imply shdb dedup's lines.
    under = _under_floor(paths, pairs)
    kept = [p for p in pairs if p not in under]
    assert _nearest_earlier(kept) == {row["id"]: _distances(row) for row in want}
    assert len(pairs) > 100 * 99 // 2
    rejects = _read_parts(out / "rejects.jsonl")
    assert [r["source"] for r in rejects] == [
        f"{paths[0]}:18",
        f"{paths[0]}:31",
        f"{paths[1]}/bad.txt:1",
    ]
    assert all(r["reason"] for r in rejects)
    local_clusters = runner.invoke(app, ["dedup", *paths, "--clusters", "-o", str(tmp_path / "c")])
    want_clusters = [json.loads(line) for line in (tmp_path / "c").read_text().splitlines()]
    assert local_clusters.exit_code == 3
    got_clusters = [r["ids"] for r in _read_parts(out / "clusters.jsonl")]
    assert {frozenset(c) for c in got_clusters} == _components(pairs)
    assert {frozenset(c) for c in want_clusters} == _components(kept)
    table = spark.read.parquet(str(out / "pairs.parquet"))
    assert table.count() == len(pairs)


def _nearest_earlier(pairs: list[dict], limit: int = DEFAULT_LIMIT) -> dict[str, dict]:
    """`shdb dedup`'s line (without similarity) of each input with earlier
    near-copies, implied by Spark's pairs: its ``limit`` nearest earlier inputs by
    (distance, id), and the number of all of them."""
    earlier: dict[str, list[tuple[int, str]]] = {}
    for pair in pairs:
        earlier.setdefault(pair["id"], []).append((pair["distance"], pair["near_id"]))
    return {
        doc_id: {
            "id": doc_id,
            "matches": [{"id": n, "distance": d} for d, n in sorted(near)[:limit]],
            "total": len(near),
        }
        for doc_id, near in earlier.items()
    }


def _components(pairs: list[dict]) -> set[frozenset[str]]:
    """The connected components of the pairs' graph (union-find)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for pair in pairs:
        parent[root(pair["id"])] = root(pair["near_id"])
    groups: dict[str, set[str]] = {}
    for x in parent:
        groups.setdefault(root(x), set()).add(x)
    return {frozenset(g) for g in groups.values()}


def _under_floor(paths: list[str], pairs: list[dict]) -> list[dict]:
    """The pairs whose two texts' sketches estimate less than the LSH net's floor."""
    params = MinHashParams()
    hasher = MinHasher(params)
    sketches = {}
    for record in read_sources(paths, SourceOptions()):
        if isinstance(record, Record):
            signature = hasher.signature(record.text)
            sketches[record.doc_id] = None if signature is None else signature.sketch
    return [
        p
        for p in pairs
        if similarity(sketches[p["id"]], sketches[p["near_id"]], params.sketch_bits) < params.floor
    ]


def _distances(row: dict) -> dict:
    assert row["total_exact"] is True
    matches = [{"id": m["id"], "distance": m["distance"]} for m in row["matches"]]
    return {"id": row["id"], "matches": matches, "total": row["total"]}


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
    assert runner.invoke(app, ["ingest", str(held), "--index", hbase_url]).exit_code == 0
    report, rejects = tmp_path / "report", tmp_path / "rejects"
    result = runner.invoke(
        app,
        [
            "spark", "ingest", str(path), "--index", hbase_url, "--report", str(report),
            "--rejects", str(rejects), "--batch-size", "16",
        ],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
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
        ["spark", "ingest", str(path), "--index", hbase_url, "--batch-size", "8",
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


def test_spark_ingest_refuses_a_local_index(spark, tmp_path: Path) -> None:
    path, _ = _ingest_corpus(tmp_path, 3)
    result = runner.invoke(app, ["spark", "ingest", str(path), "--index", str(tmp_path / "ix")])
    assert result.exit_code == 2
    assert "not an HBase index URL" in result.output


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
    want = _read_parts(from_jsonl / "pairs.jsonl")
    out = tmp_path / "out"
    args = ["spark", "dedup", str(tmp_path / "in.parquet"), "--text-field", "body"]
    got = runner.invoke(app, [*args, "-o", str(out)])
    assert got.exit_code == 3, got.output
    assert _read_parts(out / "pairs.jsonl") == want and len(want) >= 3
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
    assert left == ["pairs.jsonl", "pairs.parquet"]


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
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _read_parts(tmp_path / "out" / "pairs.jsonl")
