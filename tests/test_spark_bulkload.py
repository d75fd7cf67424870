"""`shdb spark ingest --bulk-load`: HFiles and BulkLoad give the Thrift path's cells.

Each job runs as its own `shdb` process: the bulk load's jars go on the JVM's
class path at launch, and a test process's JVM may have started without them
(tests/test_spark.py shares one session).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import current_hbase, fresh_hbase_url, gateway_address, hbase_address

pytest.importorskip("pyspark", reason="the spark extra is not installed")

pytestmark = pytest.mark.hbase

#: The test HBase's ZooKeeper: the port scripts/hbase and the image take from
#: SHDB_HBASE_ZK_PORT (2181 unless set), as scripts/test starts them.
ZOOKEEPER = os.environ.get(
    "SHDB_TEST_HBASE_ZK", f"127.0.0.1:{os.environ.get('SHDB_HBASE_ZK_PORT', '2181')}"
)
_TIME = b"f:t"  # when a document arrived: each run's own (compared as present)
_OWNER = b"f:o"  # a writer's claim token (SPEC, "Writers"): random by design, not content


def _shdb(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "simhash_hbase", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if check is not None:
        assert done.returncode == check, done.stdout + done.stderr[-3000:]
    return done


def _corpus(folder: Path, seed: int) -> tuple[Path, list[str]]:
    """Random texts with planted copies and one-word edits (near-duplicates),
    one record with meta, one bad record."""
    rng = random.Random(seed)
    words = list("海量文档去重相似哈希分段鸽巢原理行键区域服务器批量写入今天天气")
    texts = ["".join(rng.choice(words) for _ in range(50)) + f"编号{i}" for i in range(90)]
    texts += [texts[i] for i in range(0, 90, 9)]  # exact copies
    texts += [texts[i][:-6] + "修改了一点" for i in range(3, 90, 7)]  # near copies
    lines = [
        json.dumps({"id": f"b{i}", "text": t, "site": f"s{i % 3}"}, ensure_ascii=False)
        for i, t in enumerate(texts)
    ]
    lines.append('{"id": 7}')
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, texts


def _cells(url: str) -> dict[str, dict[bytes, dict[bytes, bytes]]]:
    """Every cell of the index and docs tables (not the claim tokens; a time as there)."""
    import happybase

    prefix = url.rsplit("prefix=", 1)[1]
    host, port = hbase_address().rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        out = {}
        for table in ("index", "docs"):
            rows = conn.table(f"{prefix}_{table}").scan()
            out[table] = {
                key: {c: b"<time>" if c == _TIME else v for c, v in cols.items() if c != _OWNER}
                for key, cols in rows
            }
        return out
    finally:
        conn.close()


def _regions(url: str, table: str) -> int:
    import happybase

    prefix = url.rsplit("prefix=", 1)[1]
    host, port = hbase_address().rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        return len(conn.table(f"{prefix}_{table}").regions())
    finally:
        conn.close()


def _ingest(url: str, corpus: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _shdb(
        "spark", "ingest", str(corpus), "--index", url, "--master", "local[2]",
        "--rejects", str(tmp / "rejects"), "--batch-size", "32", "--store-text", *extra,
        check=3,
    )  # fmt: skip


@pytest.mark.parametrize("layout", ["buckets", "rows"])
def test_bulk_load_writes_the_cells_of_the_thrift_path(tmp_path: Path, layout: str) -> None:
    """Same corpus both ways, into indexes that already hold some ids (one
    replaced by a different text, one the same) and a near-copy: identical
    cells, identical answers to queries; in either layout (a bulk load takes no
    --report: docs/spark.md, "Concurrent writers")."""
    corpus, texts = _corpus(tmp_path, seed=3)
    held = tmp_path / "held.jsonl"
    held.write_text(
        "\n".join(
            json.dumps({"id": i, "text": t}, ensure_ascii=False)
            for i, t in [
                ("b5", "完全不同的旧文本" * 9),
                ("b6", texts[6]),
                ("old", texts[20] + "尾"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    api = "thrift2"  # creates the index table pre-split: one HFile per region
    staging = current_hbase().shared_dir(tmp_path) / "staging"  # HBase reads it too
    with fresh_hbase_url(api) as thrift_url, fresh_hbase_url(api) as bulk_url:
        thrift, bulk = (u + f"&layout={layout}" for u in (thrift_url, bulk_url))
        for url in (thrift, bulk):
            _shdb("ingest", str(held), "--index", url, "--create")
        (tmp_path / "t").mkdir()
        (tmp_path / "b").mkdir()
        _ingest(thrift, corpus, tmp_path / "t")
        done = _ingest(
            bulk, corpus, tmp_path / "b",
            "--bulk-load", str(staging), "--zookeeper", ZOOKEEPER,
        )  # fmt: skip
        assert f"added {len(texts)} documents" in done.stderr + done.stdout
        want, got = _cells(thrift_url), _cells(bulk_url)
        assert len(want["docs"]) == len(texts) + 1
        assert sum(len(cols) for cols in want["index"].values()) > 10 * len(texts)
        assert _regions(bulk_url, "index") > 1  # the cells were cut at region boundaries
        assert got == want
        assert not any(staging.iterdir())  # the HFiles moved into HBase
        for i in (0, 5, 9, 45):
            answers = [
                json.loads(_shdb("query", texts[i], "--index", url, "--json").stdout)
                for url in (thrift, bulk)
            ]
            for answer in answers:  # arrival times: each run's own
                for match in answer["matches"]:
                    assert match.pop("time")
            assert answers[0] == answers[1] and answers[0]["matches"], answers
        verify = json.loads(_shdb("verify", "--index", bulk, "--json").stdout)
        assert verify["documents"] == len(texts) + 1
        url = bulk_url.replace(gateway_address("thrift2"), hbase_address())  # and over Thrift1
        if layout == "rows":
            assert json.loads(_shdb("query", texts[9], "--index", url, "--json").stdout)["matches"]
        else:  # the bucket layout is Thrift2's only
            refused = _shdb("query", texts[9], "--index", url, "--json", check=None)
            assert refused.returncode != 0 and "Thrift2" in refused.stderr


def test_bulk_load_errors_name_the_fix(tmp_path: Path) -> None:
    corpus, _ = _corpus(tmp_path, seed=4)
    with fresh_hbase_url("thrift1") as url:
        done = _shdb("spark", "ingest", str(corpus), "--index", url,
                     "--bulk-load", str(tmp_path / "s"), check=None)  # fmt: skip
        assert done.returncode not in (0, 3) and "--zookeeper HOST:PORT" in done.stderr
        done = _shdb(
            "spark", "ingest", "--create", str(corpus), "--index", url, "--master", "local[1]",
            "--bulk-load", str(tmp_path / "s"), "--zookeeper", "127.0.0.1:1",
            "--rejects", str(tmp_path / "rejects"), check=None,
        )  # fmt: skip
        assert done.returncode not in (0, 3)
        assert "ZooKeeper 127.0.0.1:1 did not answer" in done.stderr, done.stderr[-2000:]
        assert "check --zookeeper" in done.stderr
