"""Issue 42, operating HBase: namespaces in the URL, regions and split points from
`shdb plan` (``?expect=N&docs_sample=FILE``), `shdb schema` for planned and existing
indexes, and `verify` / `stats` read region by region, at once or sampled."""

from __future__ import annotations

import itertools
import json
import random
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import InvalidIndexUrl, InvalidSetting
from simhash_hbase.jobs import census
from simhash_hbase.jobs.verify import verify
from simhash_hbase.layout.plan import docs_split_keys, index_split_keys, plan
from simhash_hbase.records import Document
from simhash_hbase.store.base import WHOLE, KeyRange
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.settings import parse_url

from .conftest import _drop_tables, gateway_address
from .test_cli import shdb
from .test_index import ARTICLE, OTHER


# -- the URL ---------------------------------------------------------------------------
def test_a_namespace_and_prefix_ride_in_the_url_path() -> None:
    assert parse_url("hbase://h:9091/web:crawl")["prefix"] == "web:crawl"
    assert parse_url("hbase://h/crawl")["prefix"] == "crawl"
    assert parse_url("hbase://h?prefix=web:crawl")["prefix"] == "web:crawl"
    assert parse_url("hbase://h")["prefix"] == "shdb"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("hbase://h/a?prefix=b", "names its prefix twice"),
        ("hbase://h/we-b:crawl", "NS, an HBase namespace"),
        ("hbase://h/a:b:c", "NS, an HBase namespace"),
        ("hbase://h/web:", "NS, an HBase namespace"),
        ("hbase://h?expect=lots", "10B, 500M or 1000000"),
        ("hbase://h?docs_sample=ids.txt", "add expect"),
    ],
)
def test_a_bad_url_says_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(InvalidIndexUrl, match=re.escape(says)):
        parse_url(url)


def test_expect_reads_a_count_as_people_write_it() -> None:
    parts = parse_url("hbase://h/web:crawl?expect=2.5B&docs_sample=ids.txt")
    assert parts["expect"] == 2_500_000_000 and parts["docs_sample"] == "ids.txt"
    assert parse_url("hbase://h")["expect"] is None


# -- regions and split points ------------------------------------------------------------
def test_without_a_plan_the_tables_get_the_schemas_regions() -> None:
    sizing = hbase_tables.Sizing()
    assert sizing.regions() == {"index": 16, "docs": 1, "meta": 1}
    assert sizing.splits("index") == hbase_tables.split_points("index") == index_split_keys(16)
    assert sizing.splits("docs") == sizing.splits("meta") == [] and sizing.manifest() == {}


def test_a_plan_sizes_the_index_and_docs_tables_as_shdb_plan_says() -> None:
    _, best = plan(10**9)
    assert best is not None
    sizing = hbase_tables.Sizing(10**9)
    assert sizing.regions() == {
        "index": best.index_regions,
        "docs": best.docs_regions,
        "meta": 1,
    }
    assert len(sizing.splits("index")) == best.index_regions - 1
    assert [k.hex() for k in sizing.splits("index")] == list(best.split_points)
    assert sizing.splits("docs") == []  # no sample: HBase splits it as it grows
    # a small index keeps the schema's 16 index regions: writes spread from the start
    assert hbase_tables.Sizing(1000).regions()["index"] == 16
    recorded = hbase_tables.Sizing(10**9).manifest()["hbase_plan"]
    assert recorded == {"expected_documents": 10**9, "regions": sizing.regions()}


def test_url_ids_split_where_the_sample_does_not_at_the_first_byte(tmp_path: Path) -> None:
    """The issue's case: every id starts with https://, so even splits on the first
    byte would put them all in one region; the sample's quantiles spread them."""
    ids = [f"https://site{i % 997}.example/{i}" for i in range(20_000)]
    sample = tmp_path / "ids.txt"
    sample.write_text("\n".join(random.Random(1).sample(ids, 2_000)) + "\n", "utf-8")
    sizing = hbase_tables.Sizing.of(10**9, str(sample))
    splits = sizing.splits("docs")
    assert len(splits) == sizing.regions()["docs"] - 1 == 39
    per_region = [0] * (len(splits) + 1)
    for doc_id in ids:
        per_region[sum(doc_id.encode() >= s for s in splits)] += 1
    assert max(per_region) < 2.5 * len(ids) / len(per_region)  # about even


@given(
    st.lists(st.binary(min_size=1, max_size=12), min_size=0, max_size=300),
    st.integers(1, 64),
)
def test_docs_split_keys_are_sorted_distinct_sample_keys_at_most_one_a_region(
    sample: list[bytes], regions: int
) -> None:
    splits = docs_split_keys(sample, regions)
    assert splits == sorted(set(splits)) and set(splits) <= set(sample)
    assert len(splits) <= regions - 1
    assert not splits or min(sample) < splits[0]  # the first region is never empty


def test_a_docs_sample_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidIndexUrl, match=r"docs_sample=.*cannot read it"):
        hbase_tables.Sizing.of(10**9, str(tmp_path / "none.txt"))


# -- shdb schema ---------------------------------------------------------------------------
_CREATE = re.compile(r"^create '(?P<name>[\w:.-]+)', \{.*?\}(?P<splits>, SPLITS.*)?$", re.M)


def _creates(script: str) -> dict[str, int]:
    """Table name -> split keys of each create line of an hbase shell script."""
    return {m["name"]: (m["splits"] or "").count('"') // 2 for m in _CREATE.finditer(script)}


def test_schema_for_a_planned_index_in_a_namespace(tmp_path: Path) -> None:
    sample = tmp_path / "ids.txt"
    sample.write_text("\n".join(f"https://e{i}.example/" for i in range(5000)), "utf-8")
    done = shdb("schema", "--plan", "1B", "--layout", "buckets", "--prefix", "web:crawl",
                "--docs-sample", str(sample))  # fmt: skip
    assert done.exit_code == 0, done.output
    script = done.stdout
    _, best = plan(10**9)
    assert best is not None and best.scheme == "6x20"
    assert "create_namespace 'web'" in script.splitlines()
    assert _creates(script) == {
        "web:crawl_index": best.index_regions - 1,
        "web:crawl_docs": best.docs_regions - 1,
        "web:crawl_meta": 0,
    }
    assert "BLOOMFILTER => 'ROW', BLOCKSIZE => 16384" in script  # the bucket layout's
    assert "row key = 5 bytes" in script and "1..20: scheme 6x20" in script
    assert "no TTL" in script


def test_schema_refuses_a_sample_without_a_plan_and_an_embedded_index(tmp_path: Path) -> None:
    done = shdb("schema", "--docs-sample", str(tmp_path / "x"))
    assert done.exit_code != 0 and "add --plan" in done.stderr
    done = shdb("schema", "--index", str(tmp_path / "ix"))
    assert done.exit_code != 0 and "an embedded index is a folder" in done.stderr


# -- verify and stats, region by region --------------------------------------------------
def _fingerprints(n: int) -> list[Document]:
    rng = random.Random(5)
    return [Document(f"k{i:05d}", rng.getrandbits(64)) for i in range(n)]


def _cut(ranges: int) -> list[KeyRange]:
    """``ranges`` ranges, even over the first key byte (ids k... and index keys)."""
    starts = [b""] + [bytes([i * 256 // ranges]) for i in range(1, ranges)]
    return list(zip(starts, [*starts[1:], b""]))


@pytest.fixture
def regioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimhashIndex]:
    """An embedded index of 400 fingerprints and two texts whose tables are read as
    8 docs ranges (ids k0.., cut at their first byte: 'k' holds them all but a and
    c) and 16 index ranges, as an HBase index's regions would be (the embedded store
    reads whole: the ranges are cut from its pass here, so only in this process:
    ``workers`` > 1, processes that open the index again, is tested on HBase)."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents(_fingerprints(400))
        index.add("a", ARTICLE)
        index.add("c", OTHER)
        cuts = {"docs": _cut(8), "index": _cut(16)}
        docs, cells = index.documents, index.index_cells  # the store's, read whole

        def documents(on_corrupt: object = None, key_range: KeyRange = WHOLE) -> object:
            return (d for d in docs(on_corrupt) if _holds(key_range, d.doc_id.encode()))  # type: ignore[arg-type]

        def index_cells(key_range: KeyRange = WHOLE) -> object:
            return (c for c in cells() if _holds(key_range, c[0]))

        monkeypatch.setattr(index, "key_ranges", lambda table: cuts[table])
        monkeypatch.setattr(index, "documents", documents)
        monkeypatch.setattr(index, "index_cells", index_cells)
        yield index


def _holds(key_range: KeyRange, key: bytes) -> bool:
    start, stop = key_range
    return key >= start and (not stop or key < stop)


def test_verify_by_ranges_finds_and_repairs_damage(regioned: SimhashIndex) -> None:
    clean = verify(regioned)
    assert clean.clean and clean.documents == 402 and clean.cells == 402 * 10 + 2 * 25
    lost = regioned.cells([regioned.get("k00007")])[:3]  # type: ignore[list-item]
    stale = [(lost[0][0], "k00008")]
    regioned.write_cells(delete=lost, put=stale)
    whole = verify(regioned, workers=1)
    assert (whole.missing_cells, whole.stale_cells, whole.incomplete_documents) == (3, 1, 1)
    repaired = verify(regioned, repair=True)
    assert repaired.repaired and verify(regioned).clean


def test_a_sampled_verify_finds_problems_in_the_regions_it_reads(regioned: SimhashIndex) -> None:
    every = verify(regioned, sample=1.0)
    assert every.clean and every.documents == 402 and every.cells == 402 * 10 + 2 * 25
    assert every.estimates["documents"] == 402  # every region read: exact
    doc = regioned.get("k00007")
    assert doc is not None
    regioned.write_cells(delete=regioned.cells([doc])[:2])
    found = verify(regioned, sample=1.0)
    assert (found.missing_cells, found.incomplete_documents) == (2, 1) and not found.clean
    half = verify(regioned, sample=0.5)
    # the index cut into 256 pieces (16 a range), the docs by whole ranges; half read
    assert half.estimates["pieces_read"] == {"docs": "4 of 8", "index": "128 of 256"}
    cells = half.estimates["cells"]
    assert isinstance(cells, dict) and half.cells < 402 * 10 + 2 * 25
    assert abs(cells["estimate"] - (402 * 10 + 50 - 2)) <= cells["bound_95"] + 1
    with pytest.raises(InvalidSetting, match="repairs nothing"):
        verify(regioned, sample=0.5, repair=True)


def test_counts_read_at_once_or_sampled_agree_with_the_store(regioned: SimhashIndex) -> None:
    exact = census.count(regioned)
    assert exact.documents.exact and exact.documents.value == 402
    assert exact.index_cells.value == regioned.stats()["index_cells"]
    seen: list[tuple[str, int, int]] = []
    sampled = census.count(regioned, sample=0.25, progress=lambda *a: seen.append(a))
    assert not sampled.index_cells.exact and sampled.ranges_read["index"] == (64, 256)
    assert abs(sampled.index_cells.value - exact.index_cells.value) <= (
        sampled.index_cells.bound + 1
    )
    assert seen[-1] == ("index", 64, 64) and ("docs", 2, 2) in seen
    for bad in ({"workers": 0}, {"sample": 0.0}, {"sample": 1.5}):
        with pytest.raises(InvalidSetting):
            census.count(regioned, **bad)  # type: ignore[arg-type]


@given(st.binary(max_size=10), st.binary(max_size=10), st.integers(1, 300))
def test_a_cut_range_is_covered_by_its_pieces_in_order(a: bytes, b: bytes, pieces: int) -> None:
    start, stop = sorted((a, b)) if b else (a, b)
    if stop and start == stop:
        return
    parts = census.cut((start, stop), pieces)
    assert parts[0][0] == start and parts[-1][1] == stop and len(parts) <= pieces
    for (_, left_stop), (right_start, right_stop) in itertools.pairwise(parts):
        assert left_stop == right_start and right_start < (right_stop or b"\xff" * 11)


def test_extrapolation_is_exact_when_all_is_read_and_bounded_when_not() -> None:
    assert census.extrapolate([3, 4, 5], 3) == census.Estimate(12.0, 0.0, True)
    even = census.extrapolate([10, 10], 8)
    assert even.value == 80 and even.bound == 0 and not even.exact
    uneven = census.extrapolate([0, 20], 8)
    assert uneven.value == 80 and uneven.bound > 0
    blind = census.extrapolate([0, 0, 0], 256)  # ids crowding pieces left unread
    assert blind.to_json() == {"estimate": 0, "bound_95": None}


def test_stats_and_verify_commands_take_workers_and_sample(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents(_fingerprints(50))
    url = str(tmp_path / "ix")
    stats = json.loads(shdb("stats", "-i", url, "--workers", "3", "--json").stdout)
    assert stats["documents"] == 50 and stats["pieces_read"] == {
        "docs": "1 of 1",
        "index": "1 of 1",
    }
    done = shdb("stats", "-i", url, "--sample", "0.5")
    assert done.exit_code == 0 and "index: 1 of 1 key ranges read" in done.stderr  # one pass
    sampled = json.loads(shdb("stats", "-i", url, "--sample", "0.5", "--json").stdout)
    assert sampled["counted_by"].startswith("a sample of key ranges")
    assert stats["counted_by"].startswith("region by region")
    done = shdb("verify", "-i", url, "--sample", "0.5", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["clean"] and report["sample"] == 0.5 and report["estimates"]["documents"] == 50
    done = shdb("verify", "-i", url, "--workers", "0")
    assert done.exit_code == 2 and "workers" in done.stderr


# -- on HBase ------------------------------------------------------------------------------
def _drop(prefix: str) -> None:
    _drop_tables(gateway_address("thrift1"), prefix)


@pytest.fixture
def planned_url(hbase_api: str, tmp_path: Path) -> Iterator[str]:
    """A new index in namespace ``shdbops`` created for 200 M documents, its docs
    table split by a sample of URL ids."""
    prefix = f"shdbops:p{uuid.uuid4().hex[:10]}"
    sample = tmp_path / "ids.txt"
    sample.write_text("\n".join(f"https://e{i:04d}.example/" for i in range(4000)), "utf-8")
    try:
        # 200 M: 25 index regions (above the 16 of no plan), 8 docs ones; a minute's
        # timeout, as creating split tables takes its time on a shared machine
        yield (
            f"hbase://{gateway_address('thrift2')}/{prefix}?expect=200M&docs_sample={sample}"
            "&timeout=60000"
        )
    finally:
        _drop(prefix)


@pytest.mark.hbase
def test_a_new_index_in_a_namespace_gets_its_planned_regions(planned_url: str) -> None:
    """Over Thrift2 (which can create a namespace and split tables): the regions the
    plan gives, the docs table split at the sample's quantiles, the plan recorded;
    `shdb schema --index` describes the tables as they are."""
    sizing = hbase_tables.Sizing(2 * 10**8)
    assert sizing.regions()["index"] > 16 and sizing.regions()["docs"] > 1
    with SimhashIndex.open(planned_url) as index:
        index.add("https://e0001.example/", ARTICLE)
        index.add("https://e3000.example/", OTHER)
        assert len(index.key_ranges("index")) == sizing.regions()["index"]
        assert len(index.key_ranges("docs")) == sizing.regions()["docs"]
        assert index.manifest["hbase_plan"]["regions"] == sizing.regions()
        assert verify(index, workers=8).clean
        assert verify(index, sample=0.1, workers=4).clean
        assert [m.doc_id for m in index.query(ARTICLE, 3)] == ["https://e0001.example/"]
    done = shdb("schema", "--index", planned_url)
    assert done.exit_code == 0, done.output
    name = planned_url.split("/")[3].split("?")[0]
    assert _creates(done.stdout) == {
        f"{name}_index": sizing.regions()["index"] - 1,
        f"{name}_docs": sizing.regions()["docs"] - 1,
        f"{name}_meta": 0,
    }
    stats = json.loads(shdb("stats", "-i", planned_url, "--workers", "4", "--json").stdout)
    assert stats["documents"] == 2 and stats["index_cells"] == 2 * (10 + 25)  # 5x10


@pytest.mark.hbase
def test_a_namespace_thrift1_cannot_create_is_named_with_what_to_do() -> None:
    """Thrift1 can neither create a namespace nor split a table: the error says what to do."""
    url = f"hbase://{gateway_address('thrift1')}/nons{uuid.uuid4().hex[:8]}:x"
    with pytest.raises(Exception, match="create_namespace"):
        SimhashIndex.open(url)
