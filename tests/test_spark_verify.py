"""`shdb spark verify` and `shdb spark stats`: the reports of `shdb verify` and
`shdb stats`, computed by one Spark task per region (local[2] on HBase), for every
kind of damage; `--repair` leaves `shdb verify` clean."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.hbase.clock import CLOCK
from simhash_hbase.store.hbase.store import HBaseStore

from .test_index import ARTICLE, OTHER

pytest.importorskip("pyspark", reason="the spark extra is not installed")

runner = CliRunner()
COUNTS = (
    "documents",
    "cells",
    "stale_cells",
    "incomplete_documents",
    "missing_cells",
    "corrupt_documents",
    "clean",
)


def _damage_docs_row(index: SimhashIndex, doc_id: str) -> None:
    """A docs row whose fingerprint cannot be read (a 3-byte value)."""
    store = index._store
    assert isinstance(store, HBaseStore)
    puts = {doc_id.encode(): [(codec.COL_FINGERPRINT, b"\x01\x02\x03")]}
    store.transport.mutate(store.tables["docs"], puts, {}, CLOCK.pair()[1])


def _plant(index: SimhashIndex, kinds: set[str], seed: int = 0) -> None:
    """300 fingerprints and two texts (band cells too), then damage of ``kinds``:
    random cells deleted, a replaced document's old cells left behind, cells of an
    id without a docs row, damaged docs rows, band cells deleted."""
    rng = random.Random(seed)
    docs = [Document(f"d{i:04d}", rng.getrandbits(64)) for i in range(300)]
    index.add_documents(docs)
    index.add("a", ARTICLE)
    index.add("c", OTHER)
    victims = rng.sample(docs, 12)
    if "deleted" in kinds:
        for doc in victims[:3]:
            index.write_cells(delete=rng.sample(index.cells([doc]), rng.randint(1, 10)))
    if "replaced" in kinds:  # its old cells stay: stale; its new ones went in
        index.add_documents([Document(victims[3].doc_id, rng.getrandbits(64))])
        index.write_cells(put=index.cells([victims[3]]))
    if "ghost" in kinds:
        index.write_cells(put=index.cells([Document("ghost", rng.getrandbits(64))]))
    if "damaged" in kinds:
        for doc in victims[4:6]:
            _damage_docs_row(index, doc.doc_id)
    if "bands" in kinds:
        held = index.get("a")
        assert held is not None and held.bands
        band_cells = index.cells([held])[index.scheme.rows_per_fingerprint :]
        index.write_cells(delete=band_cells[:2])


def _counts(result: object) -> dict[str, object]:
    out = json.loads(result.stdout)  # type: ignore[attr-defined]
    return {k: out[k] for k in COUNTS}


@pytest.mark.hbase
@pytest.mark.parametrize(
    ("kinds", "seed"),
    [
        ({"deleted"}, 1),
        ({"replaced", "ghost"}, 2),
        ({"damaged", "bands", "deleted"}, 3),
        ({"deleted", "replaced", "ghost", "damaged", "bands"}, 4),
    ],
)
def test_spark_verify_reports_what_verify_does_and_repairs(
    spark: object, hbase_url: str, kinds: set[str], seed: int
) -> None:
    with SimhashIndex.open(hbase_url, create=True) as index:
        _plant(index, kinds, seed)
    local = runner.invoke(app, ["verify", "--index", hbase_url, "--json"])
    assert local.exit_code == 1, (kinds, local.output)
    on_spark = runner.invoke(app, ["spark", "verify", "--index", hbase_url, "--json"])
    assert on_spark.exit_code == 1, on_spark.output
    assert _counts(on_spark) == _counts(local), kinds
    processes = runner.invoke(app, ["verify", "--index", hbase_url, "--workers", "3", "--json"])
    assert _counts(processes) == _counts(local)
    examples = json.loads(on_spark.stdout)["examples"]
    assert examples and len(examples) <= 3 * 5
    repaired = runner.invoke(app, ["spark", "verify", "--index", hbase_url, "--repair"])
    assert repaired.exit_code == 0, repaired.output
    after = runner.invoke(app, ["verify", "--index", hbase_url, "--json"])
    assert after.exit_code == 0 and json.loads(after.stdout)["clean"], after.output
    again = runner.invoke(app, ["spark", "verify", "--index", hbase_url, "--json"])
    assert again.exit_code == 0 and _counts(again) == _counts(after)


@pytest.mark.hbase
def test_spark_stats_counts_what_stats_counts(spark: object, hbase_url: str) -> None:
    with SimhashIndex.open(hbase_url, create=True) as index:
        _plant(index, {"ghost", "damaged"})
    by_regions = runner.invoke(app, ["stats", "-i", hbase_url, "--workers", "2", "--json"])
    local = json.loads(by_regions.stdout)
    done = runner.invoke(app, ["spark", "stats", "-i", hbase_url, "--json"])
    assert done.exit_code == 0, done.output
    on_spark = json.loads(done.stdout)
    assert on_spark["documents"] == local["documents"] == 302
    assert on_spark["index_cells"] == local["index_cells"]
    assert set(on_spark) == set(local)


@pytest.mark.parametrize("command", ["verify", "stats"])
def test_spark_verify_and_stats_refuse_a_local_index(tmp_path: Path, command: str) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_fingerprint("a", 1)
    done = runner.invoke(app, ["spark", command, "--index", str(tmp_path / "ix")])
    assert done.exit_code == 2
    assert "not an HBase index URL" in done.output
    assert f"shdb {command} --workers N" in done.output
