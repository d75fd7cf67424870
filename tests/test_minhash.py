"""The LSH net: MinHash of character shingles, band keys, b-bit sketches, batch pairs,
and the index's two nets against a reference written out from docs/SPEC.md."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import mmh3
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase.fingerprint.minhash import (
    BINS,
    MinHasher,
    MinHashParams,
    pack_sketch,
    shingle_set,
    similarity,
    unpack_sketch,
)
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_records
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import batch_pairs
from simhash_hbase.layout.nets import band_candidates, is_match

M64 = (1 << 64) - 1
POLY = 0x9E3779B97F4A7C15
HASHER = MinHasher(MinHashParams(fold="none"))
ALPHABET = "海量文本去重抽屉原理近似检测算法分词权重指纹汉明距离索引查询存储"


def fmix64(k: int) -> int:
    k ^= k >> 33
    k = k * 0xFF51AFD7ED558CCD & M64
    k ^= k >> 33
    k = k * 0xC4CEB9FE1A85EC53 & M64
    return k ^ (k >> 33)


def reference_hashes(text: str, p: MinHashParams) -> list[int] | None:
    """docs/SPEC.md "Nets", steps 1-2, in plain Python (no fold)."""
    chars = []
    for ch in text:
        form = unicodedata.normalize("NFKC", ch).lower() if ord(ch) < 0x10000 else ch
        ch = form if len(form) == 1 else ch
        if ch.isalnum():
            chars.append(ord(ch))
    if not chars:
        return None
    s = min(p.shingle, len(chars))
    key = mmh3.hash64("shdb-minhash", p.seed, signed=False)[0]
    out = []
    for j in range(len(chars) - s + 1):
        acc = 0
        for c in chars[j : j + s]:
            acc = (acc * POLY + c) & M64
        out.append(fmix64(acc ^ key))
    return out


def reference_values(text: str, p: MinHashParams) -> list[int] | None:
    """docs/SPEC.md "Nets", steps 1-4, in plain Python (no fold)."""
    hashes = reference_hashes(text, p)
    if hashes is None:
        return None
    bins: list[int | None] = [None] * BINS
    for h in hashes:
        b = h >> 57
        if bins[b] is None or h < bins[b]:  # type: ignore[operator]
            bins[b] = h
    out = []
    for i in range(BINS):
        if bins[i] is not None:
            out.append(bins[i])
            continue
        order = sorted(range(BINS), key=lambda j: mmh3.hash(f"{i}:{j}", p.seed, signed=False))
        out.append(next(bins[j] for j in order if bins[j] is not None))
    return out  # type: ignore[return-value]


def reference_evidence(text: str, p: MinHashParams) -> bytes:
    """docs/SPEC.md "Nets", step 7, in plain Python: per bin of the top log2(bins)
    bits, the low 8 bits of its smallest hash (0 -> 1), 0 for an empty bin."""
    hashes = reference_hashes(text, p)
    assert hashes is not None
    top = p.evidence.bit_length() - 1
    least: dict[int, int] = {}
    for h in hashes:
        least[h >> (64 - top)] = min(h, least.get(h >> (64 - top), h))
    return bytes((least[i] & 0xFF) or 1 if i in least else 0 for i in range(p.evidence))


def reference_bands(values: list[int], p: MinHashParams) -> list[int]:
    key = mmh3.hash64("shdb-minhash", p.seed ^ 0x5BD1E995, signed=False)[0]
    out = []
    for b in range(p.bands):
        acc = 0
        for i, v in enumerate(values[b * p.rows : (b + 1) * p.rows]):
            acc = (acc + v * pow(POLY, p.rows - i, 1 << 64)) & M64
        out.append(fmix64(((acc + b) & M64) ^ key) >> 32)
    return out


texts = st.text(alphabet=ALPHABET + "abc ，。!1２Ａ", max_size=80)


@settings(max_examples=60, deadline=None)
@given(texts)
def test_values_and_bands_equal_the_reference(text: str) -> None:
    p = HASHER.params
    ref = reference_values(text, p)
    got = HASHER.values(text)
    if ref is None:
        assert got is None and HASHER.signature(text) is None
        return
    assert got is not None and got.tolist() == ref
    sig = HASHER.signature(text)
    assert sig is not None and sig.bands.tolist() == reference_bands(ref, p)
    assert sig.sketch[:64] == pack_sketch(np.array(ref, dtype=np.uint64), p.sketch_bits)
    assert sig.sketch[64:] == reference_evidence(text, p)
    assert len(sig.sketch) == p.stored_bytes == 64 + 1024


@given(st.lists(st.integers(0, M64), min_size=BINS, max_size=BINS), st.sampled_from([1, 2, 4, 8]))
def test_sketch_packing_round_trips(values: list[int], bits: int) -> None:
    arr = np.array(values, dtype=np.uint64)
    packed = pack_sketch(arr, bits)
    assert len(packed) == BINS * bits // 8
    assert unpack_sketch(packed, bits).tolist() == [v & ((1 << bits) - 1) for v in values]


@settings(max_examples=30, deadline=None)
@given(texts, st.integers(0, 3))
def test_deterministic_and_whitespace_punctuation_blind(text: str, seed: int) -> None:
    hasher = MinHasher(MinHashParams(fold="none", seed=seed))
    a, b = hasher.signature(text), MinHasher(hasher.params).signature(text)
    noisy = hasher.signature(" ".join(text).replace("。", "．") + "!!")
    assert (a is None) == (b is None) == (noisy is None)
    if a is not None and b is not None and noisy is not None:
        assert a.sketch == b.sketch == noisy.sketch
        assert a.bands.tolist() == noisy.bands.tolist()


def _words(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**9), st.integers(200, 1500), st.floats(0.0, 0.9))
def test_estimator_error_is_within_its_bound(seed: int, size: int, cut: float) -> None:
    """b-bit estimates stay within 5 standard deviations (sd <= 0.05 for 128 x 4 bits)."""
    rng = random.Random(seed)
    a = _words(rng, size)
    b = a[int(size * cut) :] + _words(rng, int(size * cut))
    p = HASHER.params
    sa, sb = HASHER.signature(a), HASHER.signature(b)
    assert sa is not None and sb is not None
    sh_a, sh_b = shingle_set(a, p), shingle_set(b, p)
    exact = len(sh_a & sh_b) / len(sh_a | sh_b)
    assert abs(similarity(sa.sketch, sb.sketch, p.sketch_bits) - exact) <= 0.25


def test_estimator_is_unbiased_on_average() -> None:
    rng = random.Random(7)
    errors = []
    p = HASHER.params
    for _ in range(150):
        a = _words(rng, 600)
        b = a[: rng.randint(100, 600)] + _words(rng, rng.randint(0, 300))
        sa, sb = HASHER.signature(a), HASHER.signature(b)
        assert sa is not None and sb is not None
        sh_a, sh_b = shingle_set(a, p), shingle_set(b, p)
        exact = len(sh_a & sh_b) / len(sh_a | sh_b)
        errors.append(similarity(sa.sketch, sb.sketch, p.sketch_bits) - exact)
    assert abs(float(np.mean(errors))) < 0.02
    assert float(np.std(errors)) < 0.06


def test_short_and_empty_texts() -> None:
    assert HASHER.signature("") is None and HASHER.signature("，。 !?") is None
    one, same = HASHER.signature("猫"), HASHER.signature("猫!")
    assert one is not None and same is not None and one.sketch == same.sketch
    other = HASHER.signature("狗")
    assert other is not None and similarity(one.sketch, other.sketch, 4) < 0.3


def test_traditional_copies_fold_to_their_simplified_original() -> None:
    import opencc

    simplified = (
        "软件开发者在网络上下载了这个程序的源代码，然后在自己的计算机上编译运行，发现信息安全存在问题。"
        * 3
    )
    traditional = opencc.OpenCC("s2twp").convert(simplified)
    assert traditional != simplified
    folding, plain = MinHasher(), MinHasher(MinHashParams(fold="none"))
    a, b = folding.signature(simplified), folding.signature(traditional)
    c, d = plain.signature(simplified), plain.signature(traditional)
    assert a is not None and b is not None and c is not None and d is not None
    assert a.sketch == c.sketch  # Simplified text is never converted
    assert similarity(a.sketch, b.sketch, 4) >= 0.8 > similarity(c.sketch, d.sketch, 4) + 0.3


def test_identical_and_disjoint_sketches() -> None:
    rng = random.Random(3)
    a, b = HASHER.signature(_words(rng, 500)), HASHER.signature("完全不同" * 10 + "xyz" * 40)
    assert a is not None and b is not None
    assert similarity(a.sketch, a.sketch, 4) == 1.0
    assert similarity(a.sketch, b.sketch, 4) < 0.2


def test_band_rows_round_trip_through_the_codec() -> None:
    bands = np.array([0, 1, 0xFFFFFFFF, 0x01234567], dtype=np.uint32)
    raw = codec.encode_bands(bands)
    assert raw.hex() == "0000000000000001ffffffff01234567"
    assert codec.decode_bands(raw).tolist() == bands.tolist()
    rows = codec.rowkeys_array(np.array([0x0123456789ABCDEF], dtype=np.uint64), bands[None], 11)
    keys = rows.reshape(-1).view("V13").tolist()
    assert [codec.decode_rowkey(k) for k in keys] == [
        (int(b), 11 + i, 0x0123456789ABCDEF) for i, b in enumerate(bands.tolist())
    ]
    assert codec.band_prefixes(raw, 11) == [k[:5] for k in keys]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40), st.integers(1, 200))
def test_band_keys_round_trip(keys: list[int], first: int) -> None:
    arr = np.array(keys, dtype=np.uint32)
    assert codec.decode_bands(codec.encode_bands(arr)).tolist() == keys
    first = min(first, 255 - len(keys) + 1)
    prefixes = codec.band_prefixes(codec.encode_bands(arr), first)
    assert [(int.from_bytes(p[:4], "big"), p[4]) for p in prefixes] == [
        (k, first + i) for i, k in enumerate(keys)
    ]


def test_the_predicate() -> None:
    p = MinHashParams()
    assert is_match(True, None, p) and not is_match(False, None, p)
    assert is_match(False, p.threshold, p) and not is_match(False, p.threshold - 0.01, p)
    assert is_match(True, p.floor, p) and not is_match(True, p.floor - 0.01, p)
    assert is_match(True, 0.0, None)


def _corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    base = [_words(rng, rng.randint(30, 300)) for _ in range(n // 2)]
    out = []
    for i in range(n):
        src = base[i % len(base)]
        cut = rng.randint(0, len(src) // 3)
        out.append(src[cut:] + _words(rng, rng.randint(0, 20)) if i >= len(base) else src)
    return out


def test_band_candidates_equal_a_reference_banding() -> None:
    texts = _corpus(120, 5)
    sigs = [HASHER.signature(t) for t in texts]
    bands = np.array([s.bands for s in sigs if s is not None])
    got = {tuple(x) for x in band_candidates(bands, np.ones(len(bands), dtype=bool)).tolist()}
    ref = {
        (i, j)
        for i in range(len(bands))
        for j in range(i + 1, len(bands))
        if any(bands[i, b] == bands[j, b] for b in range(bands.shape[1]))
    }
    assert got == ref and ref


def test_the_index_lsh_candidates_equal_a_reference_banding(store_url: str) -> None:
    """Every band cell a query scans is exactly the documents that share a band."""
    texts = _corpus(80, 11)
    with SimhashIndex.open(store_url) as index:
        for i, t in enumerate(texts):
            index.add(f"d{i}", t)
        first = 1 + index.scheme.rows_per_fingerprint
        sigs = [index.signature(t) for t in texts]
        for sig in sigs:
            assert sig is not None
            prefixes = codec.band_prefixes(codec.encode_bands(sig.bands), first)
            (cells,) = index._store.scan_prefixes_many([prefixes])
            got = {doc_id for _, doc_id in cells}
            ref = {
                f"d{j}"
                for j, other in enumerate(sigs)
                if other is not None and bool((other.bands == sig.bands).any())
            }
            assert got == ref


def test_batch_pairs_equal_the_index_answers(store_url: str) -> None:
    """One predicate: batch pairs (sorting + band grouping) are what the index's
    queries report, with the same distance and similarity, on every store."""
    texts = _corpus(60, 23)
    with SimhashIndex.open(store_url) as index:
        docs = [index.prepare_text(f"d{i}", t, "text")[0] for i, t in enumerate(texts)]
        lsh = index.lsh
        pairs = batch_pairs(
            np.array([d.fingerprint for d in docs], dtype=np.uint64),
            3,
            index.scheme,
            lsh,
            [d.sketch for d in docs],
            [d.bands for d in docs],
        )
        index.add_documents(docs)
        from_queries = set()
        for j, t in enumerate(texts):
            for m in index.query(t, limit=None):
                i = int(m.doc_id[1:])
                if i < j:
                    from_queries.add((i, j, m.distance, m.similarity))
    assert set(pairs) == from_queries and pairs


def test_fingerprint_only_documents_join_the_pigeonhole_only(store_url: str) -> None:
    text = _corpus(2, 1)[0]
    with SimhashIndex.open(store_url) as index:
        fp = index.fingerprint(text)
        index.add_fingerprint("bare", fp)
        index.add("full", text)
        assert sum(1 for _, d in index.index_cells() if d == "bare") == 10
        hits = {m.doc_id: m for m in index.query(text)}
        assert hits["bare"].similarity is None and hits["full"].similarity == 1.0


def test_old_indexes_keep_the_pigeonhole_only(tmp_path: Path) -> None:
    text = _corpus(2, 1)[0]
    with SimhashIndex.open(str(tmp_path / "ix"), nets="simhash") as index:
        index.add("a", text)
        assert index.lsh is None and "lsh" not in index.manifest
        found = [tuple(m)[:4] for m in index.query(text)]
        assert found == [("a", index.fingerprint(text), 0, None)]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:  # opens as it was built
        assert index.manifest["nets"] == "simhash" and index.lsh is None


def _family_texts() -> list[tuple[str, str]]:
    """Pages with copies only one net finds: a Traditional repost (many bits away),
    a truncation, a repost, and distinct pages."""
    import opencc

    rng = random.Random(42)
    base = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(150, 400))) + "。" for _ in range(6)
    ]
    to_tw = opencc.OpenCC("s2twp").convert
    docs = [(f"p{i}", t) for i, t in enumerate(base)]
    docs += [("p0-tw", to_tw(base[0])), ("p1-cut", base[1][: len(base[1]) * 3 // 4])]
    docs += [("p2-re", "转载：" + base[2] + "（完）"), ("p3-fp", base[3])]
    return docs


def test_every_surface_returns_the_same_matches(tmp_path: Path) -> None:
    """Library queries, the ingest report, batch pairs and `shdb dedup` / `shdb
    ingest --report` / `shdb query --json` agree on the pairs, distances and similarities."""
    import json

    from typer.testing import CliRunner

    from simhash_hbase.cli.app import app

    docs = _family_texts()
    path = tmp_path / "docs.jsonl"
    rows = [{"id": i, "text": t} for i, t in docs]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    runner = CliRunner()
    dedup = runner.invoke(app, ["dedup", str(path)], catch_exceptions=False)
    from_dedup = {
        (m["id"], line["id"], m["distance"], m["similarity"])
        for line in map(json.loads, dedup.stdout.splitlines())
        for m in line["matches"]
    }
    index_url = str(tmp_path / "ix")
    report = tmp_path / "report.jsonl"
    ingest = runner.invoke(
        app,
        ["ingest", "--create", str(path), "-i", index_url, "--report", str(report)],
        catch_exceptions=False,
    )
    assert ingest.exit_code == 0, ingest.output
    from_report = {
        (m["id"], line["id"], m["distance"], m["similarity"])
        for line in map(json.loads, report.read_text("utf-8").splitlines())
        for m in line["matches"]
    }
    order = {doc_id: n for n, (doc_id, _) in enumerate(docs)}
    from_queries = set()
    from_cli = set()
    with SimhashIndex.open(index_url, readonly=True) as index:
        for doc_id, text in docs:
            for m in index.query(text, limit=None):
                if order[m.doc_id] < order[doc_id]:
                    from_queries.add((m.doc_id, doc_id, m.distance, m.similarity))
    for doc_id, text in docs:
        out = runner.invoke(
            app, ["query", text, "-i", index_url, "--json", "--probes", "0"], catch_exceptions=False
        )
        for m in json.loads(out.stdout)["matches"] if out.stdout else []:
            if order[m["id"]] < order[doc_id]:
                from_cli.add((m["id"], doc_id, m["distance"], m["similarity"]))
    assert from_dedup == from_report == from_queries == from_cli
    pairs = {(a, b) for a, b, _, _ in from_queries}
    assert {("p0", "p0-tw"), ("p1", "p1-cut"), ("p2", "p2-re"), ("p3", "p3-fp")} <= pairs
    assert max(d for *_, d, _ in from_queries) > 3  # some found by the LSH net alone


class _Counting:
    """A store proxy counting the requests a query sends."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._store, name)
        if name in ("scan_prefixes", "scan_prefixes_many", "get_docs"):

            def counted(*args: object, **kwargs: object) -> object:
                self.calls.append(name)
                return attr(*args, **kwargs)  # type: ignore[operator]

            return counted
        return attr


def test_a_query_sends_one_scan_for_both_nets(store_url: str) -> None:
    """Both nets' prefixes go in the one scan request; the docs rows of the
    candidates (the sketches; on HBase the confirm read) in one multi-get."""
    docs = _family_texts()
    with SimhashIndex.open(store_url) as index:
        index_records(index, docs, IngestOptions(find_k=None))
        counting = _Counting(index._store)
        index._store = counting  # type: ignore[assignment]
        for _, text in docs:
            counting.calls.clear()
            index.query(text)
            assert counting.calls == ["scan_prefixes_many", "get_docs"]
        counting.calls.clear()
        index.query_many([t for _, t in docs])
        assert counting.calls == ["scan_prefixes_many", "get_docs"]
