"""The probe path of the index, on every store: a probed query returns exactly the
union of the exact searches of its probe fingerprints, filtered by the bound; all
probes of all queries go to the store in one batched scan with deduplicated prefixes."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidInput, InvalidQuery
from simhash_hbase.fingerprint.probes import (
    DEFAULT_QUERY_PROBES,
    bound,
    flip_sets,
    probe_fingerprints,
)
from simhash_hbase.jobs.ingest import IngestOptions, index_records
from simhash_hbase.layout.scheme import SCHEMES

PROBES = (0, 1, 3, 8, 20)


def _flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


def _expected(probes: list[int], k: int, ids: list[str], arr: np.ndarray) -> list[tuple[int, str]]:
    """Brute force: within k of some probe, and within the bound of the fingerprint."""
    q, limit = probes[0], bound(k, len(probes) - 1)
    near = np.zeros(len(arr), dtype=bool)
    for p in probes:
        near |= np.bitwise_count(arr ^ np.uint64(p)) <= k
    true = np.bitwise_count(arr ^ np.uint64(q))
    near &= true <= limit
    return sorted((int(true[i]), ids[i]) for i in np.flatnonzero(near))


class CountingScans:
    """Wraps a store: how many batched scan calls, and the prefix lists they got."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.calls: list[list[list[bytes]]] = []

    def scan_prefixes_many(self, prefix_lists: list[list[bytes]], row_cap: int | None) -> object:
        self.calls.append([list(p) for p in prefix_lists])
        return self._store.scan_prefixes_many(prefix_lists, row_cap)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_probed_query_is_the_filtered_union_of_exact_searches(store_url: str, scheme: str) -> None:
    rng = random.Random(14)
    k_max = SCHEMES[scheme].k
    queries = []
    fps: dict[str, int] = {}
    for qi in range(12):
        q = rng.getrandbits(64)
        margins = np.array([rng.expovariate(1.0) for _ in range(64)])
        queries.append((q, margins))
        # neighbours of the flipped copies: some in the bound, some just outside
        for si, flips in enumerate(flip_sets(margins, max(PROBES))):
            for extra in range(k_max + 2):
                bits = [b for b in rng.sample(range(64), extra + 3) if b not in flips][:extra]
                fps[f"q{qi}-s{si}-e{extra}"] = _flip(_flip(q, list(flips)), bits)
        for dist in range(k_max + 3):
            fps[f"q{qi}-d{dist}"] = _flip(q, rng.sample(range(64), dist))
    for i in range(200):
        fps[f"noise{i}"] = rng.getrandbits(64)
    ids = list(fps)
    arr = np.array([fps[i] for i in ids], dtype=np.uint64)
    with SimhashIndex.open(store_url, scheme=scheme) as index:
        for doc_id, fp in fps.items():
            index.add_fingerprint(doc_id, fp)
        for n in PROBES:
            lists = [probe_fingerprints(q, m, n) for q, m in queries]
            for k in range(k_max + 1):
                batch = index.query_probed(lists, k, limit=None)
                for probes, got in zip(lists, batch):
                    expected = _expected(probes, k, ids, arr)
                    assert [(m.distance, m.doc_id) for m in got] == expected, (n, k)
        # probes=0 is the plain exact search
        q = queries[0][0]
        assert index.query_probed([[q]], k_max) == [index.query_fingerprint(q, k_max)]


def test_all_probes_go_to_the_store_in_one_batched_scan(tmp_path: Path) -> None:
    rng = random.Random(7)
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        for i in range(50):
            index.add_fingerprint(f"d{i}", rng.getrandbits(64))
        counting = CountingScans(index._store)
        index._store = counting  # type: ignore[assignment]
        margins = np.linspace(0.0, 1.0, 64)  # bits 0.. weakest: flips share segments
        lists = [probe_fingerprints(rng.getrandbits(64), margins, 16) for _ in range(5)]
        before = index.cost.scans
        index.query_probed(lists, 3)
        assert len(counting.calls) == 1
        (prefix_lists,) = counting.calls
        scheme = index.scheme
        for probes, prefixes in zip(lists, prefix_lists):
            assert len(prefixes) == len(set(prefixes))  # each distinct prefix once
            distinct = {(flag, f) for p in probes for flag, f in enumerate(scheme.fields(p))}
            assert len(prefixes) == len(distinct) < len(probes) * scheme.rows_per_fingerprint
        assert index.cost.scans - before == sum(map(len, prefix_lists))


TEXT = (
    "图层蒙版是一种非破坏性的编辑方式，黑色隐藏图层内容，白色显示图层内容，"
    "灰色则部分透明。使用蒙版可以随时修改合成效果，而不必删除任何像素。"
    "在图层对话框中右键点击图层，选择添加图层蒙版，即可为当前图层创建蒙版。"
)


def test_text_query_and_ingest_dedup_probe_the_same_way(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        probes = index.fingerprinter.probes(TEXT, 8)
        assert probes[0] == index.fingerprint(TEXT) and len(probes) == 9
        # a held document one flip set plus k bits away: only a probed lookup finds it
        flips = flip_sets(index.fingerprinter.fingerprint_margins(TEXT)[1], 8)
        widest = max(flips, key=len)
        far = _flip(_flip(probes[0], list(widest)), [b for b in range(64) if b not in widest][:3])
        index.add_fingerprint("far", far)
        assert index.query(TEXT, 3) == []
        (hit,) = index.query(TEXT, 3, probes=8)
        assert (hit.doc_id, hit.distance) == ("far", bin(far ^ probes[0]).count("1"))
        assert index.query_many([TEXT], 3, probes=8) == [[hit]]
        found = []
        index_records(
            index,
            [("new", TEXT)],
            IngestOptions(find_k=3, probes=8),
            on_duplicate=found.append,
        )
        assert [(f.doc_id, [m.doc_id for m in f.matches]) for f in found] == [("new", ["far"])]
        with pytest.raises(InvalidQuery, match="probes"):
            index.query(TEXT, 3, probes=65)
        with pytest.raises(InvalidInput, match="probe list"):
            index.add_documents(
                [index.get("far")],
                find_k=3,
                probes=[[1]],  # type: ignore[list-item]
            )


def test_cli_probes_text_and_refuses_a_fingerprint(tmp_path: Path) -> None:
    runner = CliRunner()
    ix = str(tmp_path / "ix")
    doc = tmp_path / "a.txt"
    doc.write_text(TEXT, encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(doc), "-i", ix, "--probes", "4"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["query", TEXT + "转载请注明出处。", "-i", ix, "--probes", "4"])
    assert result.exit_code == 0 and "a.txt" in result.output
    result = runner.invoke(
        app, ["query", "--fingerprint", "0123456789abcdef", "-i", ix, "--probes", "2"]
    )
    assert result.exit_code == 2
    assert "cannot be probed" in result.output
    result = runner.invoke(app, ["ingest", str(doc), "-i", ix, "--probes", "2", "--fingerprints"])
    assert result.exit_code == 2 and "--probes needs documents" in result.output


def test_cli_text_queries_probe_by_default_and_fingerprints_do_not(tmp_path: Path) -> None:
    ix = str(tmp_path / "ix")
    with SimhashIndex.open(ix) as index:
        fp, margins = index.fingerprinter.fingerprint_margins(TEXT)
        flips = flip_sets(margins, DEFAULT_QUERY_PROBES)
        last = flips[-1]  # the default's costliest flip set: found only with all its probes
        far = _flip(_flip(fp, list(last)), [b for b in range(64) if b not in last][:3])
        index.add_fingerprint("far", far)
    distance = bin(far ^ fp).count("1")
    assert distance > 3
    runner = CliRunner()
    result = runner.invoke(app, ["query", TEXT, "-i", ix])
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[1].split("\t")  # distance, similarity, fingerprint, id
    assert (row[0], row[-1]) == (str(distance), "far")
    for exact in (["--probes", "0"], ["--fingerprint", f"{fp:016x}"]):
        args = ["query", *([] if exact[0] == "--fingerprint" else [TEXT]), *exact, "-i", ix]
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output  # no hit within k=3: exact search
