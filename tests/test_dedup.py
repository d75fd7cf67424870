"""All-pairs search in memory: exact against brute force, and `shdb dedup`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase.errors import InvalidQuery
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import batch_pairs, nets_graph
from simhash_hbase.layout.pairs import (
    Pair,
    clusters_of,
    near_duplicate_pairs,
    near_graph,
    nearest_earlier,
)
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


def _stars(keys: list[object], pairs: list[tuple[int, int, int, float | None]]) -> list[list[int]]:
    """Star clusters by their definition (docs/nets.md, "Clusters"), input by input:
    an input identical to an earlier one (same ``keys``) takes its cluster; else it
    joins the most similar earlier representative it matches (then the nearest,
    then the earliest), else it represents itself."""
    near: dict[int, list[tuple[float, int, int]]] = {}
    for i, j, d, s in pairs:
        near.setdefault(j, []).append((2.0 if s is None or s != s else -s, d, i))
    leader: list[int] = []
    seen: dict[object, int] = {}
    for j, key in enumerate(keys):
        if key in seen:
            leader.append(leader[seen[key]])
            continue
        seen[key] = j
        heads = [c for c in near.get(j, []) if leader[c[2]] == c[2]]
        leader.append(min(heads)[2] if heads else j)
    groups: dict[int, list[int]] = {}
    for j, r in enumerate(leader):
        groups.setdefault(r, []).append(j)
    return sorted(g for g in groups.values() if len(g) > 1)


def test_clusters_are_stars() -> None:
    """A chain 0-1-2 whose ends do not match is cut: 2 represents itself; and a
    document matching two representatives joins the nearer."""
    chain = np.array([0, 0b111, 0b111111, 0xFFFF << 40], dtype=np.uint64)
    assert clusters_of(near_graph(chain, 3, SCHEMES["5x10"])) == [[0, 1]]
    fork = np.array([0, 0b1111, 0b111], dtype=np.uint64)  # 2: 3 bits from 0, 1 from 1
    assert clusters_of(near_graph(fork, 3, SCHEMES["5x10"])) == [[1, 2]]


@st.composite
def _crawl(draw: st.DrawFn) -> np.ndarray:
    """Fingerprints as a crawl has them: mass copies, chains of small edits (each
    step within k, the ends far apart), near-misses just past k, and noise,
    shuffled together."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fps: list[int] = []
    for kind in draw(st.lists(st.sampled_from("mcnr"), min_size=1, max_size=12)):
        base = int(rng.integers(0, 2**64, dtype=np.uint64))
        if kind == "m":  # mass copies, some with a one-bit edit
            fps += [base] * int(rng.integers(2, 120))
            fps += [base ^ 1 << int(b) for b in rng.integers(0, 64, int(rng.integers(0, 5)))]
        elif kind == "c":  # a chain: each link 1..3 bits from the one before
            for _ in range(int(rng.integers(2, 30))):
                fps.append(base)
                for bit in rng.choice(64, int(rng.integers(1, 4)), replace=False).tolist():
                    base ^= 1 << bit
        elif kind == "n":  # near-misses: 4 or 5 bits off
            fps += [base] + [
                base ^ sum(1 << b for b in rng.choice(64, int(d), replace=False).tolist())
                for d in rng.integers(4, 6, int(rng.integers(1, 4)))
            ]
        else:  # noise sharing 48 high bits with each other
            fps += [base & ~0xFFFF | int(low) for low in rng.integers(0, 1 << 16, 40)]
    out = np.array(fps, dtype=np.uint64)
    rng.shuffle(out)
    return out


@settings(max_examples=60, deadline=None)
@given(_crawl(), st.integers(0, 3), st.sampled_from(sorted(SCHEMES)), st.integers(1, 12))
def test_grouped_graph_equals_brute_force(fps: np.ndarray, k: int, scheme: str, limit: int) -> None:
    """Clusters from the grouped graph are the components of every pair; each input's
    nearest earlier inputs and their count are those of brute force."""
    pairs = _brute_force(fps, k)
    graph = near_graph(fps, k, SCHEMES[scheme])
    assert clusters_of(graph) == _stars(fps.tolist(), [(i, j, d, None) for i, j, d in pairs])
    assert graph.pair_count() == len(pairs)
    ids = [f"id{int(x) % 97:02d}-{i}" for i, x in enumerate(fps)]  # ids not in input order
    earlier: dict[int, list[tuple[int, str, int]]] = {}
    for i, j, d in pairs:
        earlier.setdefault(j, []).append((d, ids[i], i))
    got = {
        n.j: ([(i, d) for i, d, _ in n.near], n.total) for n in nearest_earlier(graph, ids, limit)
    }
    want = {j: ([(i, d) for d, _, i in sorted(e)[:limit]], len(e)) for j, e in earlier.items()}
    assert got == want


def test_cli_dedup_fingerprint_file(tmp_path: Path) -> None:
    path = tmp_path / "fps.tsv"
    path.write_text("a\t0\nb\t7\nnot hex\nc\tffffffffffffffff\n1\n", encoding="utf-8")
    result = shdb("dedup", "--fingerprints", str(path))
    assert result.exit_code == 3  # one line skipped
    rows = [json.loads(x) for x in result.stdout.splitlines()]
    assert [
        (r["id"], [(m["id"], m["distance"]) for m in r["matches"]], r["total"]) for r in rows
    ] == [
        ("b", [("a", 3)], 1),
        (f"{path}:5", [("a", 1), ("b", 2)], 2),
    ]
    assert "4 inputs, 2 of them with earlier near-copies, 3 near-duplicate pairs" in result.stderr
    limited = shdb("dedup", "--fingerprints", str(path), "--limit", "1")
    assert json.loads(limited.stdout.splitlines()[1])["matches"] == [
        {
            "id": "a",
            "distance": 1,
            "similarity": None,
            "fingerprint": "0000000000000000",
        }
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


_TEXTS = [ARTICLE, ARTICLE + "！", ARTICLE[:-8], OTHER, OTHER + "。", "12345"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(range(len(_TEXTS))), min_size=1, max_size=150), st.integers(1, 5))
def test_both_nets_grouped_equal_every_pair(picks: list[int], limit: int) -> None:
    """With sketches, identical documents are one node; clusters and each input's
    nearest earlier ones equal those of batch_pairs over every input."""
    lsh = MinHashParams()
    hasher = MinHasher(lsh)
    fingerprinter = Fingerprinter(FingerprintParams(version=1))  # "12345" is a v1 term
    sigs = [hasher.signature(t) for t in _TEXTS]
    fps = np.array([fingerprinter.fingerprint(_TEXTS[p]) for p in picks], dtype=np.uint64)
    sketches = [None if sigs[p] is None else sigs[p].sketch for p in picks]
    bands = [None if sigs[p] is None else codec.encode_bands(sigs[p].bands) for p in picks]
    scheme = SCHEMES["5x10"]
    every = batch_pairs(fps, 3, scheme, lsh, sketches, bands)
    graph = nets_graph(fps, 3, scheme, lsh, sketches, bands)
    assert len(graph.unique) <= len(set(picks))
    keys = list(zip(fps.tolist(), sketches, bands))
    assert clusters_of(graph) == _stars(keys, every)
    assert graph.pair_count() == len(every)
    ids = [f"id{p}-{i:03d}" for i, p in enumerate(picks)]
    earlier: dict[int, list[tuple[int, str, int]]] = {}
    for i, j, d, _ in every:
        earlier.setdefault(j, []).append((d, ids[i], i))
    got = {
        n.j: ([(i, d) for i, d, _ in n.near], n.total) for n in nearest_earlier(graph, ids, limit)
    }
    want = {j: ([(i, d) for d, _, i in sorted(e)[:limit]], len(e)) for j, e in earlier.items()}
    assert got == want


_LETTERS = "".join(map(chr, range(0x4E00, 0x4E00 + 400)))  # CJK ideographs


@st.composite
def _crawl_texts(draw: st.DrawFn) -> list[tuple[str, int]]:
    """(text, fingerprint) as a crawl has them, shuffled: mass copies, one-character
    edits of one text (fingerprint 0-1 bits off), chains of edits (each link a few
    characters and bits from the one before, the ends far apart), near-misses (a
    third of the text rewritten, 4-5 bits off) and unrelated texts."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out: list[tuple[str, int]] = []

    def text(n: int = 120) -> str:
        return "".join(rng.choice(list(_LETTERS), n).tolist())

    def edit(t: str, chars: int) -> str:
        s = list(t)
        for at in rng.integers(0, len(s), chars).tolist():
            s[at] = str(rng.choice(list(_LETTERS)))
        return "".join(s)

    def flip(fp: int, bits: int) -> int:
        for bit in rng.choice(64, bits, replace=False).tolist():
            fp ^= 1 << bit
        return fp

    for kind in draw(st.lists(st.sampled_from("mecnu"), min_size=1, max_size=6)):
        base, fp = text(), int(rng.integers(0, 2**63))
        if kind == "m":
            out += [(base, fp)] * int(rng.integers(2, 60))
        elif kind == "e":
            out += [(edit(base, 1), flip(fp, int(rng.integers(0, 2)))) for _ in range(60)]
        elif kind == "c":
            for _ in range(int(rng.integers(2, 40))):
                out.append((base, fp))
                base, fp = edit(base, int(rng.integers(3, 12))), flip(fp, 1)
        elif kind == "n":
            out += [(base, fp)] + [
                (edit(base, 40), flip(fp, int(rng.integers(4, 6))))
                for _ in range(int(rng.integers(1, 40)))
            ]
        else:
            out += [(text(), int(rng.integers(0, 2**63))) for _ in range(int(rng.integers(1, 20)))]
    order = rng.permutation(len(out))
    return [out[i] for i in order.tolist()]


def _every_pair(
    fps: np.ndarray, sketches: list, bands: list, lsh: MinHashParams
) -> list[tuple[int, int, int, float | None]]:
    """Brute force: every pair (i < j) the pigeonhole finds (within k) or that shares
    a band key (the LSH net), matched by the one judge, with its similarity."""
    from simhash_hbase.layout.nets import Judge

    judge = Judge(fps, 3, lsh, sketches)
    out = []
    for j in range(len(fps)):
        for i in range(j):
            dist = int(fps[i] ^ fps[j]).bit_count()
            shared = (
                bands[i] is not None
                and bands[j] is not None
                and any(
                    bands[i][at : at + 4] == bands[j][at : at + 4]
                    for at in range(0, len(bands[i]), 4)
                )
            )
            if dist > 3 and not shared:
                continue
            match, _, sim = judge(np.array([i]), np.array([j]))
            if match[0]:
                out.append((i, j, dist, None if np.isnan(sim[0]) else float(sim[0])))
    return out


@pytest.mark.parametrize("windows", ["default", "tiny"])
@settings(max_examples=12, deadline=None)
@given(_crawl_texts(), st.integers(1, 12))
def test_nets_clusters_equal_brute_force(
    windows: str, docs: list[tuple[str, int]], limit: int
) -> None:
    """Both nets on near-identical masses: the clusters are those of every pair by
    brute force; each input's listed matches are true matches, nearest first, and
    its count is exact (then equal to brute force) or a lower bound. "tiny" makes
    every group large, so the bounded neighbours and the settling do all the work."""
    from simhash_hbase.layout import groups

    saved = groups.SMALL, groups.WINDOW, groups.BAND_WINDOW, groups._CHUNK
    if windows == "tiny":
        groups.SMALL, groups.WINDOW, groups.BAND_WINDOW, groups._CHUNK = 1, 1, 1, 7
    try:
        lsh = MinHashParams()
        hasher = MinHasher(lsh)
        sigs = [hasher.signature(t) for t, _ in docs]
        fps = np.array([fp for _, fp in docs], dtype=np.uint64)
        sketches = [None if s is None else s.sketch for s in sigs]
        bands = [None if s is None else codec.encode_bands(s.bands) for s in sigs]
        graph = nets_graph(fps, 3, SCHEMES["5x10"], lsh, sketches, bands)
    finally:
        groups.SMALL, groups.WINDOW, groups.BAND_WINDOW, groups._CHUNK = saved
    pairs = _every_pair(fps, sketches, bands, lsh)
    keys = list(zip(fps.tolist(), sketches, bands))
    assert clusters_of(graph) == _stars(keys, pairs)
    ids = [f"id{int(x) % 89:02d}-{i}" for i, x in enumerate(fps.tolist())]
    earlier: dict[int, list[tuple[int, str, int]]] = {}
    for i, j, d, _ in pairs:
        earlier.setdefault(j, []).append((d, ids[i], i))
    truth = {(i, j) for i, j, _, _ in pairs}
    for n in nearest_earlier(graph, ids, limit):
        want = sorted(earlier[n.j])
        got = [(d, ids[i], i) for i, d, _ in n.near]
        if n.exact:
            assert (got, n.total) == (want[:limit], len(want))
        else:
            assert all((i, n.j) in truth for _, _, i in got) and got == sorted(got)
            assert len(got) <= limit and len(got) <= n.total <= len(want)
    assert graph.exact() or graph.pair_count() <= len(pairs)
    if graph.exact():
        assert graph.pair_count() == len(pairs)
