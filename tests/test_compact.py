"""The compact embedded layout (formats 2 and 3): the same answers as format 1 for
any sequence of batches, in one commit or in parts, with cells in either tier and
merges between; bulk loads; migration; format 2 files opening and upgrading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase import _native as native
from simhash_hbase.errors import ShdbError, StoreCorrupt, StoreError
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints
from simhash_hbase.jobs.migrate import migrate
from simhash_hbase.jobs.verify import verify
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb import load as lmdb_load
from simhash_hbase.store.lmdb import probes as lmdb_probes
from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.cells import CELL_BYTES, FRESH, MAX_DOCUMENTS
from simhash_hbase.store.lmdb.commit import _Commit
from simhash_hbase.store.lmdb.filters import (
    FILTER_CHUNK,
    PrefixFilter,
    mark_prefixes,
    marked_chunks,
)
from simhash_hbase.store.lmdb.merge import _merge_part, _MergeFilter, merge_fresh
from simhash_hbase.store.lmdb.probes import _matched, _matched_py
from simhash_hbase.store.lmdb.store import EmbeddedStore
from simhash_hbase.store.lmdb.tables import Tables

IDS = st.sampled_from([f"d{i}" for i in range(12)] + ["é/路径", "l" * 600])
# A few fingerprints close to each other, so that queries find several.
FPS = st.sampled_from([0, 1, 3, 0xFF, 1 << 63, (1 << 64) - 1, 0x1234_5678_9ABC_DEF0])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.tuples(IDS, FPS), min_size=1, max_size=6)),
        st.tuples(st.just("remove"), IDS),
    ),
    max_size=8,
)


def _state(index: SimhashIndex) -> tuple[object, ...]:
    docs = sorted((d.doc_id, d.fingerprint) for d in index.documents())
    cells = sorted(index.index_cells())
    answers = [sorted(m.doc_id for m in index.query_fingerprint(fp, 3)) for fp in (0, 1 << 63)]
    capped = [index.query_fingerprint(fp, 3, limit=2) for fp in (0, 1, 1 << 63)]
    firsts = [([m.doc_id for m in got], got.total, got.total_exact) for got in capped]
    return docs, cells, answers, firsts, index.stats()["documents"], index.stats()["index_cells"]


def _apply(index: SimhashIndex, ops: list[tuple[str, object]]) -> None:
    for op, arg in ops:
        if op == "add":
            index.add_documents([Document(i, fp) for i, fp in arg])  # type: ignore[attr-defined]
        else:
            index.remove(arg)  # type: ignore[arg-type]


@pytest.mark.parametrize("hot", [False, True])
@pytest.mark.parametrize("parts", [False, True])
@pytest.mark.parametrize("merges", [False, True])
@settings(max_examples=40)
@given(ops=OPS)
def test_any_batches_leave_what_format_1_leaves(
    ops: list[tuple[str, object]],
    parts: bool,
    merges: bool,
    hot: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Adds (replacing, re-adding), removals, long and non-ASCII ids: the compact
    layout ends in the same documents, cells, answers and counts as format 1; with
    ``parts``, every batch's new cells take the path of a large index (commits in
    parts); with ``merges``, the fresh tier is merged into the index whenever it
    holds half as many cells, so cells of one bucket sit in both tiers; with
    ``hot``, a lead of two cells is hot: every bucket that grows spills its
    committed cells to keys of their own (docs/SPEC.md, "Hot rows")."""
    base = tmp_path_factory.mktemp("ops")
    EmbeddedStore(base / "one", format=1).close()
    with pytest.MonkeyPatch.context() as mp:
        if parts:
            mp.setattr(tuning, "PART_MIN_CELLS", 1)
            mp.setattr(tuning, "PART_BYTES", 1)
        if merges:
            mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
            mp.setattr(tuning, "FRESH_RATIO", 2)
        if hot:
            mp.setattr(tuning, "HOT", 2)
            mp.setattr(tuning, "CHECK_BYTES", 1)
        with (
            SimhashIndex.open(str(base / "one")) as one,
            SimhashIndex.open(str(base / "two")) as two,
        ):
            assert two.stats()["format"] == 4 and one.stats()["format"] == 1
            _apply(one, ops)
            _apply(two, ops)
            assert _state(two) == _state(one)
            _filters_hold_every_cell(two)


def _fingerprints(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    fps[n // 2 :: 7] = fps[: len(fps[n // 2 :: 7])] ^ np.uint64(5)  # near-copies
    return fps


def test_bulk_load_equals_ingest(tmp_path: Path) -> None:
    fps = _fingerprints(20_000)
    pairs = [(f"d{i}", fp) for i, fp in enumerate(fps.tolist())]
    docs = [Document(i, fp) for i, fp in pairs]
    docs[5] = Document("d5", docs[5].fingerprint, "正文", {"url": "http://x"})
    docs[6] = Document("l" * 1024, docs[6].fingerprint)
    docs[7] = Document("d7", docs[7].fingerprint, "", {})  # empty, but columns all the same
    with SimhashIndex.open(str(tmp_path / "ingested")) as ingested:
        ingested.add_documents(docs)
        with SimhashIndex.open(str(tmp_path / "loaded")) as loaded:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(lmdb_load, "_LOAD_CELLS", 7_000)  # buckets cut across commits
                assert loaded.bulk_load(iter(docs), batch_size=6_000) == len(docs)
            assert _state(loaded) == _state(ingested)
            some = ["d5", "l" * 1024, "d7"]
            assert (
                loaded.get_many(some) == ingested.get_many(some) == {d.doc_id: d for d in docs[5:8]}
            )
            for fp in fps[:50].tolist():
                assert loaded.query_fingerprint(fp, 3) == ingested.query_fingerprint(fp, 3)
            with pytest.raises(StoreError, match="needs an empty index"):
                loaded.bulk_load(iter(docs[:3]))
            loaded.add_documents([Document("new", 1)])  # and it keeps taking ingests
            assert loaded.get("new") == Document("new", 1)


def test_bulk_load_refuses_a_repeated_id(tmp_path: Path) -> None:
    """And the store, reopened without an fsync per commit for the load, is
    reopened as before when the load fails: it goes on answering and writing."""
    twice = [Document("a", 1), Document("b", 2), Document("a", 3)]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        with pytest.raises(StoreError, match="twice"):
            index.bulk_load(twice, batch_size=2)
        index.add_documents([Document("c", 7, time=0)])
        assert [m.doc_id for m in index.query_fingerprint(7, 0)] == ["c"]
    with SimhashIndex.open(str(tmp_path / "ix"), readonly=True) as index:
        assert index.get("c") == Document("c", 7, time=0)


def test_format_1_index_opens_answers_and_migrates(tmp_path: Path) -> None:
    """An index written in format 1 (as before the compact layout) keeps
    opening and answering; migrate copies it into format 2 with the same answers
    and its meta records (manifest, job state), in far fewer bytes."""
    old, new = tmp_path / "old", tmp_path / "new"
    EmbeddedStore(old, format=1).close()
    fps = _fingerprints(30_000)
    with SimhashIndex.open(str(old), scheme="4x4") as index:
        index_fingerprints(index, enumerate_ids(fps), IngestOptions(find_k=None))
        index.put_state("job", {"done": 1})
    with SimhashIndex.open(str(old), readonly=True) as index:
        assert index.stats()["format"] == 1
        before = _state(index)
        answers = [index.query_fingerprint(fp, 3) for fp in fps[:40].tolist()]
    assert migrate(str(old), str(new)) == len(fps)
    with SimhashIndex.open(str(new), readonly=True) as index:
        assert index.stats()["format"] == 4 and index.scheme.name == "4x4"
        assert _state(index) == before
        assert [index.query_fingerprint(fp, 3) for fp in fps[:40].tolist()] == answers
        assert index.get_state("job") == {"done": 1}
    size = {p: (p / "data.mdb").stat().st_size for p in (old, new)}
    assert size[new] < size[old]  # at 30 k buckets hold ~1 cell: the gain grows with N
    with pytest.raises(Exception, match="not empty"):
        migrate(str(old), str(new))


def _texts() -> list[tuple[str, str]]:
    """(id, text): the example articles, and each with a line added and one cut."""
    corpus = Path(__file__).resolve().parents[1] / "examples" / "corpus"
    texts = [(p.name, p.read_text("utf-8")) for p in sorted(corpus.glob("*.txt"))]
    return [
        *texts,
        *((f"{i}+", f"{t}\n转载请注明出处。") for i, t in texts),
        *((f"{i}-", t[: len(t) * 3 // 4]) for i, t in texts),
    ]


@pytest.mark.parametrize("batch_size", [3, 100_000])
def test_bulk_load_and_migrate_keep_the_band_cells(tmp_path: Path, batch_size: int) -> None:
    """Documents with band keys (the LSH net of texts) own band cells beside the
    pigeonhole's: a bulk load, and so a migrate, writes them too, for documents
    with bands and without them mixed in one block: the same cells, answers and
    a clean verify as the streamed index."""

    texts, fps = _texts(), _fingerprints(200)
    old, new = tmp_path / "old", tmp_path / "new"
    with SimhashIndex.open(str(old)) as index:
        for n, (doc_id, text) in enumerate(texts):
            index.add(doc_id, text, {"n": n})
            index.add_fingerprint(f"fp{n}", int(fps[n]))  # no bands, between banded ones
        assert index.minhasher is not None, "new indexes have the LSH net (docs/nets.md)"
        docs = list(index.documents())
        assert sum(d.bands is not None for d in docs) == len(texts)
        before = _state(index)
        answers = [index.query(text) for _, text in texts]
    assert migrate(str(old), str(new)) == len(docs)
    with SimhashIndex.open(str(tmp_path / "loaded")) as loaded:
        assert loaded.bulk_load(iter(docs), batch_size=batch_size) == len(docs)
        assert _state(loaded) == before
    with SimhashIndex.open(str(new), readonly=True) as index:
        assert _state(index) == before
        assert [index.query(text) for _, text in texts] == answers
        assert verify(index).clean


def enumerate_ids(fps: np.ndarray) -> list[tuple[str, int]]:
    return [(f"d{i}", fp) for i, fp in enumerate(fps.tolist())]


@pytest.mark.parametrize("merged", [False, True])
def test_format_4_bytes_decode_by_spec_alone(tmp_path: Path, merged: bool) -> None:
    """docs/SPEC.md's format 4, decoded with plain lmdb and struct, no project code:
    a bucket's cells are those of its key in both tiers (``merged``: all in index),
    and each tier's filter has the bit of each of its cells' prefixes."""
    import lmdb

    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents([Document("a", 0x0123_4567_89AB_CDEF)])
        if merged:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
                index.add_documents([Document("b", 7, "t")])
        else:
            index.add_documents([Document("b", 7, "t")])
        expected = sorted(index.index_cells())
    env = lmdb.open(str(tmp_path / "ix"), max_dbs=8, readonly=True, lock=False)
    tables = (b"index", b"fresh", b"docs", b"names", b"meta", b"filters")
    db = {name: env.open_db(name, create=False) for name in tables}
    with env.begin() as txn:
        state = json.loads(txn.get(b"store/embedded", db=db[b"meta"]))
        assert state["format"] == 4
        assert state["fresh"] == sum(len(v) // 6 for _, v in txn.cursor(db[b"fresh"]))
        assert (state["fresh"] == 0) == merged
        names = {
            int.from_bytes(k, "big"): (int.from_bytes(v[:8], "big"), v[8:].decode())
            for k, v in txn.cursor(db[b"names"])
        }
        cells = []
        for tier in (b"index", b"fresh"):
            head = txn.get(tier, db=db[b"filters"])
            shift, size = head[8], 1 << (64 - head[8] - 3)
            bits = b"".join(
                txn.get(tier + i.to_bytes(4, "big"), db=db[b"filters"])
                for i in range(-(-size // 1984))
            )
            assert len(head) == 9 and len(bits) == size
            for bucket, packed in txn.cursor(db[tier]):
                flag, hi = bucket[0], int.from_bytes(bucket[1:3], "big")
                for at in range(0, len(packed), 6):
                    lo = int.from_bytes(packed[at : at + 2], "big")
                    fp, doc_id = names[int.from_bytes(packed[at + 2 : at + 6], "big")]
                    field = hi << 16 | lo
                    row = field.to_bytes(4, "big") + bytes([flag]) + fp.to_bytes(8, "big")
                    cells.append((row, doc_id))
                    bit = (int.from_bytes(row[:5], "big") * 0x9E3779B97F4A7C15 % 2**64) >> shift
                    assert bits[bit >> 3] >> (bit & 7) & 1  # the prefix's bit, set
        row_a = txn.get(b"a", db=db[b"docs"])
        num_a = int.from_bytes(row_a[:4], "big")
        assert names[num_a] == (0x0123_4567_89AB_CDEF, "a")
        assert int.from_bytes(row_a[4:12], "big") == 0x0123_4567_89AB_CDEF and len(row_a) == 12
        row_b = txn.get(b"b", db=db[b"docs"])
        assert row_b[12:] == b"\x06\x00\x00\x00\x01f:textt"  # u8 name length, u32 value length
    env.close()
    assert sorted(cells) == expected and len(expected) == 20


def test_hot_rows_decode_by_spec_alone(tmp_path: Path) -> None:
    """docs/SPEC.md's hot rows, decoded with plain lmdb: a lead of HOT cells or more
    is marked in its bucket (number ffffffff) and its committed cells are keys of
    ``hot`` (flag, field, fingerprint, id -> number), read in id order to a limit
    and counted exactly; and a file without ``hot`` gets it when opened to write."""
    import lmdb

    hot_fp = 0x0F0F_1234_5678_9ABC
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuning, "HOT", 3)
        mp.setattr(tuning, "CHECK_BYTES", 1)
        with SimhashIndex.open(str(tmp_path / "ix")) as index:
            for batch in range(4):  # a batch's own cells are not committed while it writes
                index.add_documents(
                    [Document(f"c{9 - batch}{i}", hot_fp) for i in range(2)]
                    + [Document(f"o{batch}", batch)]
                )
            expected = sorted(index.index_cells())
            got = index.query_fingerprint(hot_fp, 0, limit=3)
            assert [m.doc_id for m in got] == ["c60", "c61", "c70"]
            assert got.total == 8 and got.total_exact
    env = lmdb.open(str(tmp_path / "ix"), max_dbs=6, readonly=True, lock=False)
    tables = (b"index", b"fresh", b"hot", b"docs", b"names", b"meta")
    db = {name: env.open_db(name, create=False) for name in tables}
    with env.begin() as txn:
        names = {
            int.from_bytes(k, "big"): (int.from_bytes(v[:8], "big"), v[8:].decode())
            for k, v in txn.cursor(db[b"names"])
        }
        cells, marked = [], set()
        for bucket, packed in [*txn.cursor(db[b"index"]), *txn.cursor(db[b"fresh"])]:
            flag, hi = bucket[0], int.from_bytes(bucket[1:3], "big")
            for at in range(0, len(packed), 6):
                lo = int.from_bytes(packed[at : at + 2], "big")
                num = int.from_bytes(packed[at + 2 : at + 6], "big")
                if num == 0xFFFF_FFFF:
                    marked.add(bucket + packed[at : at + 2])
                    continue
                fp, doc_id = names[num]
                row = (hi << 16 | lo).to_bytes(4, "big") + bytes([flag]) + fp.to_bytes(8, "big")
                cells.append((row, doc_id))
        spilled = list(txn.cursor(db[b"hot"]))
        for key, value in spilled:
            assert key[:5] in marked and names[int.from_bytes(value, "big")][1] == key[13:].decode()
            cells.append((key[1:5] + key[0:1] + key[5:13], key[13:].decode()))
    env.close()
    assert sorted(cells) == expected and len(spilled) >= 10 * 4
    old = tmp_path / "before-hot"
    with SimhashIndex.open(str(old)) as index:
        index.add_documents([Document("a", 1)])
    env = lmdb.open(str(old), max_dbs=6)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"hot", txn=txn), delete=True)  # a format 3 file before hot rows
    env.close()
    with SimhashIndex.open(str(old), readonly=True) as index:
        assert [m.doc_id for m in index.query_fingerprint(1, 0)] == ["a"]
    with SimhashIndex.open(str(old)) as index:
        index.add_documents([Document("b", 1)])
        assert [m.doc_id for m in index.query_fingerprint(1, 0)] == ["a", "b"]


def test_cli_migrate(tmp_path: Path) -> None:
    from .test_cli import shdb

    old, new = tmp_path / "old", tmp_path / "new"
    EmbeddedStore(old, format=1).close()
    with SimhashIndex.open(str(old)) as index:
        index.add_documents([Document("a", 1, "text", {"k": 1}), Document("b", 3)])
    result = shdb("migrate", str(old), str(new))
    assert result.exit_code == 0, result.output
    assert "copied 2 documents" in result.output
    with SimhashIndex.open(str(new), readonly=True) as index:
        assert index.stats()["format"] == 4
        assert index.get("a") == Document("a", 1, "text", {"k": 1})
        assert [m.doc_id for m in index.query_fingerprint(0, 3)] == ["a", "b"]
    assert shdb("migrate", str(old), str(new)).exit_code != 0  # NEW must be new
    for bad, says in [
        (old / "inner", "inside"),
        (old, "is the index"),
        (old / ".", "is the index"),
    ]:
        result = shdb("migrate", str(old), str(bad))
        assert result.exit_code == 2 and says in result.stderr, result.output
    assert not (old / "inner").exists()


def test_a_batch_cut_before_its_last_commit_leaves_nothing_visible(tmp_path: Path) -> None:
    """Cells and docs rows written ahead in parts count only once the last commit
    writes their names rows: cut there, the batch is not seen, and a re-run works."""
    from simhash_hbase.jobs.verify import verify

    docs = [Document(f"d{i}", fp) for i, fp in enumerate(_fingerprints(300).tolist())]
    with pytest.MonkeyPatch.context() as mp, SimhashIndex.open(str(tmp_path / "ix")) as index:
        mp.setattr(tuning, "PART_MIN_CELLS", 1)
        mp.setattr(tuning, "PART_BYTES", 1)
        index.add_documents(docs[:100])
        with mp.context() as cut:
            cut.setattr(_Commit, "run", _crash)
            with pytest.raises(OSError, match="cut"):
                index.add_documents(docs[100:])
        assert index.stats()["documents"] == 100
        assert not index.get_many([d.doc_id for d in docs[100:]])
        assert {d.doc_id for d in index.documents()} == {d.doc_id for d in docs[:100]}
        assert not index.query_fingerprint(docs[150].fingerprint, 0)
        assert verify(index).clean
        index.add_documents(docs[100:])
        assert [m.doc_id for m in index.query_fingerprint(docs[150].fingerprint, 0)] == ["d150"]
        assert index.stats()["documents"] == 300 and verify(index).clean


def _crash(*args: object) -> None:
    raise OSError("cut")


ODD_IDS = st.one_of(st.text(max_size=3), st.just("x" * 1025), st.just("\udc80"), st.integers())
ODD_FPS = st.one_of(FPS, st.integers(-2, 2), st.just(1 << 64), st.just(True), st.just(1.0))


@given(
    st.lists(
        st.builds(
            Document,
            ODD_IDS,
            ODD_FPS,
            st.none() | st.just(""),
            st.none() | st.just({}) | st.just({"k": float("nan")}),
        ),
        max_size=5,
    )
)
def test_batch_check_equals_one_by_one(docs: list[Document]) -> None:
    """codec.check_documents (the bulk load's check) refuses exactly what
    check_document refuses, with its error."""
    from simhash_hbase.layout import codec

    def outcome(check: object) -> object:
        try:
            check()  # type: ignore[operator]
        except ShdbError as exc:
            return type(exc), str(exc)
        return None

    one_by_one = outcome(lambda: [codec.check_document(d) for d in docs])
    assert outcome(lambda: codec.check_documents(docs)) == one_by_one


def _as_format_2(folder: Path) -> None:
    """Make ``folder`` a format 2 file, as the code before the fresh tier left one:
    every cell in ``index``, no ``fresh`` table, the record saying format 2."""
    with SimhashIndex.open(str(folder)) as index, pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuning, "FRESH_MIN_CELLS", 0)
        merge_fresh(index._store._compact, force=True)  # type: ignore[attr-defined]
    _as_format(folder, 2, b"fresh")


def _as_format(folder: Path, fmt: int, dropped: bytes) -> None:
    """Drop the table ``dropped`` (new in the format after ``fmt``) and make the
    store record say ``fmt``, as the code of that format left a file."""
    import lmdb

    env = lmdb.open(str(folder), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(dropped, txn=txn), delete=True)
        meta = env.open_db(b"meta", txn=txn)
        state = json.loads(txn.get(b"store/embedded", db=meta))
        state["format"] = fmt
        if fmt < 3:
            del state["fresh"]
        txn.put(b"store/embedded", json.dumps(state).encode(), db=meta)
    env.close()


def test_format_2_file_opens_answers_and_upgrades_in_place(tmp_path: Path) -> None:
    """A format 2 file answers read-only as it is; a writer's open adds the empty
    fresh tier and filters (format 4, nothing moved), and a reader opened before that sees
    the cells written into the fresh tier after it."""
    folder = tmp_path / "ix"
    fps = _fingerprints(3_000)
    with SimhashIndex.open(str(folder)) as index:
        index_fingerprints(index, enumerate_ids(fps[:2_000]), IngestOptions(find_k=None))
        before = _state(index)
    _as_format_2(folder)
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        assert reader.stats()["format"] == 2
        assert _state(reader) == before
        # The writer is another process (LMDB opens a file once per process).
        write = (
            "import sys, numpy as np\n"
            "from simhash_hbase import SimhashIndex\n"
            "from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints\n"
            "fps = np.load(sys.argv[2])\n"
            "with SimhashIndex.open(sys.argv[1]) as w:\n"
            "    assert w.stats()['format'] == 4\n"
            "    pairs = [(f'd{i}', int(fp)) for i, fp in enumerate(fps) if i >= 2000]\n"
            "    index_fingerprints(w, pairs, IngestOptions(find_k=None))\n"
        )
        np.save(tmp_path / "fps.npy", fps)
        subprocess.run(
            [sys.executable, "-c", write, str(folder), str(tmp_path / "fps.npy")], check=True
        )
        assert reader.stats()["format"] == 4 and reader.stats()["documents"] == len(fps)
        for i in (5, 2_500):
            want = {f"d{j}" for j in np.flatnonzero(np.bitwise_count(fps ^ fps[i]) <= 3)}
            assert {m.doc_id for m in reader.query_fingerprint(int(fps[i]), 3)} == want
        cells = list(reader.index_cells())  # each cell once, in whichever tier it is
        assert len(set(cells)) == len(cells) == 10 * len(fps) == reader.stats()["index_cells"]
    with SimhashIndex.open(str(folder)) as writer:
        store = writer._store
        with store._env.begin() as txn:  # type: ignore[attr-defined]
            assert store._compact.state(txn)["fresh"] > 0  # type: ignore[attr-defined]


@settings(max_examples=10, deadline=None)
@given(
    removed=st.lists(st.integers(0, 399), max_size=40),
    probes=st.lists(st.integers(0, 399), min_size=1, max_size=300),
    merge_at=st.sampled_from([None, 100, 300]),
    tiny=st.booleans(),
)
def test_a_wide_scan_equals_the_scan_per_prefix(
    removed: list[int],
    probes: list[int],
    merge_at: int | None,
    tmp_path_factory: pytest.TempPathFactory,
    tiny: bool,
) -> None:
    """scan_wide (a batch's lookups, no Python loop per prefix) finds what scan
    finds: cells in either tier, removed documents' cells unseen, a prefix listed
    twice answered twice, prefixes of nothing, and a cell of no document's number;
    with ``tiny``, by the NumPy matcher, cells matched a few at a time through a
    filter of 8 flags (most cells pass it falsely: the exact match decides)."""
    fps = _fingerprints(400, seed=7)
    docs = [Document(f"d{i}", fp) for i, fp in enumerate(fps.tolist())]
    with SimhashIndex.open(str(tmp_path_factory.mktemp("wide") / "ix")) as index:
        with pytest.MonkeyPatch.context() as mp:
            for at in (0, 100, 200, 300):
                if merge_at == at:
                    mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
                index.add_documents(docs[at : at + 100])
        for i in removed:
            index.remove(f"d{i}")
        tables = index._store._compact  # type: ignore[attr-defined]
        with tables.env.begin(write=True) as txn:  # a cell of no document's number
            db = tables.index if txn.stat(tables.index)["entries"] else tables.fresh
            key = next(iter(txn.cursor(db)))[0]
            cell = b"\x00\x00" + MAX_DOCUMENTS.to_bytes(4, "big")
            txn.put(key, txn.get(key, db=db) + cell, db=db)
        prefixes = [p for i in probes for p in index._finder.prefixes([int(fps[i]) ^ 1 << 40])[0]]
        prefixes += [key[1:3] + b"\x00\x00" + key[0:1], b"\xff\xff\xff\xff\x07"]
        with tables.env.begin() as txn, pytest.MonkeyPatch.context() as mp:
            if tiny:  # the NumPy matcher, not the C extension's
                mp.setattr(native, "module", lambda: None)
                mp.setattr(lmdb_probes, "MATCH_CHUNK", 7)
                mp.setattr(lmdb_probes, "FILTER_BITS", (3, 3))
            (per_prefix,) = tables.scan(txn, [prefixes])
            wide = tables.scan_wide(txn, prefixes)
        assert sorted(wide) == sorted(per_prefix)
        assert len(set(prefixes)) < len(prefixes) or len(wide) == len(set(wide))


_KEYS = st.sampled_from([b"\x00\x00\x00", b"\x00\x00\x01", b"\x03\xff\xff", b"\x09\x12\x34"])
_LEADS = st.integers(0, 11)  # few: many cells match, a bucket has many probes


@settings(max_examples=300, deadline=None)
@given(
    found=st.dictionaries(
        _KEYS, st.lists(st.tuples(_LEADS, st.integers(0, (1 << 32) - 1)), max_size=25)
    ),
    probes=st.lists(st.tuples(_KEYS, _LEADS), max_size=40),
)
def test_the_c_matcher_matches_as_numpy(
    found: dict[bytes, list[tuple[int, int]]], probes: list[tuple[bytes, int]]
) -> None:
    """The C extension's cell matcher (_matched) gives the NumPy one's
    pairs in its order, tier after tier: probes listed twice, buckets with more
    probes than a linear search takes (binary search), cells of no probe, empty
    buckets and tiers."""
    if native.module() is None:
        pytest.skip("the C extension is not built")
    packed = {
        key: b"".join(lead.to_bytes(2, "big") + num.to_bytes(4, "big") for lead, num in cells)
        for key, cells in found.items()
    }
    probe = np.array([int.from_bytes(k, "big") << 16 | lead for k, lead in probes], dtype=np.uint64)
    items = list(packed.items())
    tiers = [items[::2], items[1::2]]  # the index and the fresh tier
    fast = _matched(tiers, probe)
    slow = [_matched_py(pairs, probe) for pairs in tiers if pairs]
    assert fast[0].tolist() == [p for which, _ in slow for p in which.tolist()]
    assert fast[1].tolist() == [n for _, nums in slow for n in nums.tolist()]


def test_compact_moves_the_fresh_tier_and_changes_no_answer(tmp_path: Path) -> None:
    """SimhashIndex.compact merges the fresh tier into the index now: every cell
    then sits in the index, and documents, cells, answers and counts are the same."""
    fps = _fingerprints(2_000)
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index_fingerprints(index, enumerate_ids(fps), IngestOptions(find_k=None))
        index.remove("d7")
        before = _state(index)
        answers = [index.query_fingerprint(fp, 3) for fp in fps[:30].tolist()]
        assert index.compact() == 10 * (len(fps) - 1)
        assert index.compact() == 0
        store = index._store
        with store._env.begin() as txn:  # type: ignore[attr-defined]
            tables = store._compact  # type: ignore[attr-defined]
            assert tables.state(txn)["fresh"] == 0 and not txn.stat(tables.fresh)["entries"]
        assert _state(index) == before
        assert [index.query_fingerprint(fp, 3) for fp in fps[:30].tolist()] == answers
    EmbeddedStore(tmp_path / "one", format=1).close()
    with SimhashIndex.open(str(tmp_path / "one")) as one:
        one.add_fingerprint("a", 1)
        assert one.compact() == 0


def test_cli_compact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`shdb compact` merges the fresh tier (progress a line a commit on stderr) and
    changes no answer; an index with nothing to compact, or no tier, says why."""
    from .test_cli import shdb

    fps = _fingerprints(2_000)
    path = str(tmp_path / "ix")
    with SimhashIndex.open(path) as index:
        index_fingerprints(index, enumerate_ids(fps), IngestOptions(find_k=None))
        before = _state(index)
        assert index.stats()["fresh_cells"] == 10 * len(fps)
    monkeypatch.setattr(tuning, "PART_BYTES", 10_000)  # several commits: several lines
    result = shdb("compact", "--index", path, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"moved": 10 * len(fps), "fresh_cells": 0}
    parts = [line for line in result.stderr.splitlines() if line.startswith("compact: part ")]
    assert len(parts) > 1 and parts[-1].startswith(f"compact: part {len(parts)} of {len(parts)},")
    assert parts[-1].endswith(f", {10 * len(fps):,} cells moved")
    assert f"moved {10 * len(fps):,} index cells into the main tier" in result.stderr
    with SimhashIndex.open(path, readonly=True) as index:
        assert _state(index) == before and index.stats()["fresh_cells"] == 0
    again = shdb("compact", "--index", path)
    assert again.exit_code == 0 and "the fresh tier is empty" in again.stderr
    EmbeddedStore(tmp_path / "one", format=1).close()
    with SimhashIndex.open(str(tmp_path / "one")) as one:
        one.add_fingerprint("a", 1)
    old = shdb("compact", "--index", str(tmp_path / "one"))
    assert old.exit_code == 0 and "format 1, with one tier" in old.stderr
    assert "shdb migrate" in old.stderr
    missing = shdb("compact", "--index", str(tmp_path / "nowhere"))
    assert missing.exit_code != 0 and "nowhere" in missing.stderr
    assert not (tmp_path / "nowhere").exists()  # compact never creates an index


@settings(max_examples=30, deadline=None)
@given(
    copies=st.integers(0, 13),
    flips=st.lists(st.lists(st.integers(0, 63), max_size=5), max_size=12),
    limit=st.sampled_from([None, 1, 2, 10]),
    merged=st.booleans(),
    hot=st.booleans(),
)
def test_the_one_query_path_answers_as_the_scan(
    copies: int,
    flips: list[list[int]],
    limit: int | None,
    merged: bool,
    hot: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """query_fingerprint's path (Tables.scan_documents: documents, not cells)
    gives what the plain scan gives (query_probed without probes): copies of one
    fingerprint past the limit (a row the cap cuts, counted whole), neighbours in
    both tiers, hot rows, removed documents."""
    q = 0x0123_4567_89AB_CDEF
    docs = [Document(f"c{i}", q) for i in range(copies)]
    docs += [Document(f"n{i}", q ^ sum(1 << b for b in set(bits))) for i, bits in enumerate(flips)]
    docs += [Document(f"x{i}", int(fp)) for i, fp in enumerate(_fingerprints(50, seed=11))]
    with pytest.MonkeyPatch.context() as mp:
        if hot:
            mp.setattr(tuning, "HOT", 2)
            mp.setattr(tuning, "CHECK_BYTES", 1)
        with SimhashIndex.open(str(tmp_path_factory.mktemp("one") / "ix")) as index:
            index.add_documents(docs[::2])
            if merged:
                mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
            index.add_documents(docs[1::2])
            index.remove("c1")
            for x in (q, q ^ 1, q ^ 1 << 63 ^ 1 << 20):
                for k in range(4):
                    got = index.query_fingerprint(x, k, limit=limit)
                    (want,) = index.query_probed([[x]], k, limit=limit)
                    assert (got, got.total, got.total_exact) == (
                        want,
                        want.total,
                        want.total_exact,
                    )


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="warm() maps pages on Linux")
def test_warm_maps_the_whole_file_and_changes_no_answer(tmp_path: Path) -> None:
    """SimhashIndex.open(warm=True) maps every page of data.mdb into the process
    (the page faults of a reader's first queries, paid at once), for a reader and
    a writer alike; answers are unchanged."""
    fps = _fingerprints(3_000)
    folder = tmp_path / "ix"
    with SimhashIndex.open(str(folder)) as index:
        index_fingerprints(index, enumerate_ids(fps), IngestOptions(find_k=None))
        answers = [index.query_fingerprint(fp, 3) for fp in fps[:50].tolist()]
        assert 0 < index.warm() <= (folder / "data.mdb").stat().st_size
    with SimhashIndex.open(str(folder), readonly=True, warm=True) as reader:
        assert [reader.query_fingerprint(fp, 3) for fp in fps[:50].tolist()] == answers


def _as_format_3(folder: Path) -> None:
    """Make ``folder`` a format 3 file, as the code before persisted filters left
    one: no ``filters`` table, the record saying format 3."""
    _as_format(folder, 3, b"filters")


def _filters_hold_every_cell(index: SimhashIndex) -> None:
    """Each tier's filter (persisted, or warm()'s for this snapshot) has the bit
    of every cell the tier holds, marks included: no query skips a cell."""
    tables = index._store._compact  # type: ignore[attr-defined]
    with tables.env.begin() as txn:
        held = tables.query_probe(txn)[:2]
        for tier, db in zip(held, (tables.index, tables.fresh)):
            assert tier is not None
            for key, packed in txn.cursor(db):
                for pos in range(0, len(packed), CELL_BYTES):
                    assert tier.holds(key[1:3] + packed[pos : pos + 2] + key[0:1])


@settings(max_examples=15, deadline=None)
@given(
    flips=st.lists(st.lists(st.integers(0, 63), max_size=4), min_size=1, max_size=20),
    merged=st.booleans(),
    persisted=st.booleans(),
)
def test_a_readers_tier_filters_miss_no_cell(
    flips: list[list[int]],
    merged: bool,
    persisted: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each tier has a bitmap of its prefixes: persisted in the file (format 4,
    read right after open) or, in a format 3 file, made by warm(). Every prefix
    of every cell there is set in it, so queries that skip a tier's buckets whose
    bit is clear answer as the plain scan; after another commit a new document
    in the fresh tier is found (the persisted filter is read again, warm()'s is
    not used)."""
    q = 0x0F1E_2D3C_4B5A_6978
    docs = [Document(f"n{i}", q ^ sum(1 << b for b in set(bits))) for i, bits in enumerate(flips)]
    docs += [Document(f"x{i}", int(fp)) for i, fp in enumerate(_fingerprints(300, seed=5))]
    folder = tmp_path_factory.mktemp("filter") / "ix"
    with SimhashIndex.open(str(folder)) as index, pytest.MonkeyPatch.context() as mp:
        index.add_documents(docs[::2])
        if merged:
            mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
        index.add_documents(docs[1::2])
    if not persisted:
        _as_format_3(folder)
    with SimhashIndex.open(str(folder), readonly=not persisted) as index:
        assert index.stats()["format"] == (4 if persisted else 3)
        if not persisted:
            index.warm()
        _filters_hold_every_cell(index)
        for x in (q, q ^ 1 << 7, *(d.fingerprint for d in docs[:40])):
            got = index.query_fingerprint(x, 3, limit=None)
            (want,) = index.query_probed([[x]], 3, limit=None)
            assert (got, got.total) == (want, want.total)
        if persisted:
            index.add_fingerprint("late", q ^ 1 << 3)  # a commit: the fresh filter changes
            assert "late" in {m.doc_id for m in index.query_fingerprint(q, 3, limit=None)}
            _filters_hold_every_cell(index)


def test_format_3_file_opens_read_only_and_upgrades_to_4(tmp_path: Path) -> None:
    """A format 3 file (no filters) answers read-only as it is; opened for writing
    it becomes format 4 in place, with each tier's filter made from its cells."""
    folder = tmp_path / "ix"
    fps = _fingerprints(2_000)
    with SimhashIndex.open(str(folder)) as index, pytest.MonkeyPatch.context() as mp:
        index_fingerprints(index, enumerate_ids(fps[:1_500]), IngestOptions(find_k=None))
        mp.setattr(tuning, "FRESH_MIN_CELLS", 1)
        merge_fresh(index._store._compact, force=True)  # type: ignore[attr-defined]
        mp.undo()
        index_fingerprints(index, enumerate_ids(fps)[1_500:], IngestOptions(find_k=None))
        before = _state(index)
    _as_format_3(folder)
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        assert reader.stats()["format"] == 3 and _state(reader) == before
    with SimhashIndex.open(str(folder)) as writer:
        assert writer.stats()["format"] == 4 and _state(writer) == before
        _filters_hold_every_cell(writer)


def test_a_merge_overtaken_by_another_keeps_the_index_filter_exact(tmp_path: Path) -> None:
    """Two merges at once (another process's starts between this one's commits):
    the first one's copy of the index filter lacks the cells the other moved, so
    it sees the other's token and makes the filter anew from the tier; every
    index cell's bit is then set, and no query misses it."""
    fps = _fingerprints(3_200)
    with SimhashIndex.open(str(tmp_path / "ix")) as index, pytest.MonkeyPatch.context() as mp:
        pairs = enumerate_ids(fps)
        index_fingerprints(index, pairs[:3_000], IngestOptions(find_k=None))
        tables = index._store._compact  # type: ignore[attr-defined]
        merge_fresh(tables, force=True)  # the index's filter: room for 32,768 cells
        index_fingerprints(index, pairs[3_000:], IngestOptions(find_k=None))
        mp.setattr(tuning, "PART_BYTES", 1)  # a merge in MAX_PARTS commits
        with tables.env.begin() as txn:
            last = list(txn.cursor(tables.fresh).iternext(values=False))[-40:]

        def other_merge(done: int, parts: int, moved: int) -> None:
            if done == 1:  # another merge's first commit moves the last buckets
                with tables.env.begin(write=True) as txn:
                    other = _MergeFilter(tables)
                    other.check(txn, first=True)
                    _merge_part(tables, txn, last, other)

        assert merge_fresh(tables, force=True, on_part=other_merge) > 0
        _filters_hold_every_cell(index)
        for fp in fps[-300:].tolist():
            want = {f"d{j}" for j in np.flatnonzero(np.bitwise_count(fps ^ np.uint64(fp)) <= 3)}
            assert {m.doc_id for m in index.query_fingerprint(fp, 3, limit=None)} == want


def test_a_smaller_filter_leaves_no_chunk_of_the_one_before(tmp_path: Path) -> None:
    """A tier's filter written over a bigger one: its chunks replace the first
    ones, those past its end are removed, and it reads back as written."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        tables = index._store._compact  # type: ignore[attr-defined]
        big, small = PrefixFilter.empty(64 - 20), PrefixFilter.empty(64 - 17)
        big.bits[:] = b"\xff" * len(big.bits)
        small.bits[7] = 5
        for held in (big, small):
            with tables.env.begin(write=True) as txn:
                tables.save_filter(txn, FRESH, held)
        with tables.env.begin() as txn:
            chunks = [k for k in txn.cursor(tables.kept).iternext(values=False) if len(k) == 9]
            fresh = [k for k in chunks if k.startswith(FRESH)]
            assert len(fresh) == -(-len(small.bits) // FILTER_CHUNK)
            assert tables.load_filter(txn, FRESH) == small


@settings(max_examples=10, deadline=None)
@given(small=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=12))
def test_a_small_commit_rewrites_only_the_filter_chunks_it_marks(
    small: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A batch's commit writes only the chunks of the fresh filter its cells mark
    (at most 10 a document, not the whole bitmap), and the file's filter, read
    back by a new process, still has the bit of every cell."""
    folder = tmp_path_factory.mktemp("chunks") / "ix"
    written: list[int] = []
    save = Tables.save_filter

    def spy(self: Any, txn: Any, tier: bytes, held: Any, dirty: Any = None) -> bytes:
        written.append(-1 if dirty is None else len(dirty))
        return save(self, txn, tier, held, dirty)

    with SimhashIndex.open(str(folder)) as index, pytest.MonkeyPatch.context() as mp:
        index_fingerprints(index, enumerate_ids(_fingerprints(20_000)), IngestOptions(find_k=None))
        mp.setattr(Tables, "save_filter", spy)
        for i, fp in enumerate(small):
            index.add_fingerprint(f"s{i}", fp)
    assert written and all(0 < n <= 10 for n in written)
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        _filters_hold_every_cell(reader)
        for i, fp in enumerate(small):
            assert f"s{i}" in {m.doc_id for m in reader.query_fingerprint(fp, 0, limit=None)}


@settings(max_examples=30, deadline=None)
@given(
    shift=st.integers(44, 52),
    cells=st.lists(
        st.tuples(st.binary(min_size=3, max_size=3), st.binary(max_size=40)), max_size=20
    ),
)
def test_marked_chunks_are_the_chunks_marking_changes(
    shift: int, cells: list[tuple[bytes, bytes]]
) -> None:
    """marked_chunks names exactly the chunks in which mark_prefixes sets a bit of
    an empty bitmap: a commit that writes only those loses no bit."""
    bits = bytearray(1 << (64 - shift - 3))
    mark_prefixes(bits, shift, cells)
    changed = {i // FILTER_CHUNK for i, b in enumerate(bits) if b}
    assert marked_chunks(shift, cells) == changed


@pytest.mark.parametrize("existed", [False, True])
def test_an_interrupted_migrate_leaves_new_as_it_was(
    tmp_path: Path, existed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut in its bulk load (Ctrl-C, or any error), a migrate leaves OLD as it was
    and NEW as before it (absent, or an empty folder), so that running it again
    works; the CLI says so and exits 130."""
    from .test_cli import shdb

    old, new = tmp_path / "old", tmp_path / "new"
    fps = _fingerprints(3_000)
    with SimhashIndex.open(str(old)) as index:
        index_fingerprints(index, enumerate_ids(fps), IngestOptions(find_k=None))
        before = _state(index)
    if existed:
        new.mkdir()
    real = lmdb_load._append_flag

    def cut(tables: Any, spill: Path, main: Any) -> int:
        if spill.name == "flag-3":  # two flags appended already
            raise KeyboardInterrupt
        return real(tables, spill, main)

    monkeypatch.setattr(lmdb_load, "_append_flag", cut)
    result = shdb("migrate", str(old), str(new))
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.stderr and "run `shdb migrate` again" in result.stderr
    assert new.is_dir() == existed and not (existed and any(new.iterdir()))
    monkeypatch.setattr(lmdb_load, "_append_flag", real)
    assert shdb("migrate", str(old), str(new)).exit_code == 0
    for path in (old, new):
        with SimhashIndex.open(str(path), readonly=True) as index:
            assert _state(index) == before


def test_an_interrupted_compact_says_what_was_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .test_cli import shdb

    url = str(tmp_path / "ix")
    with SimhashIndex.open(url) as index:
        index_fingerprints(index, enumerate_ids(_fingerprints(3_000)), IngestOptions(find_k=None))

    def cut(self: SimhashIndex, on_part: Any = None) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(SimhashIndex, "compact", cut)
    result = shdb("compact", "-i", url)
    assert result.exit_code == 130
    assert "shdb: error: interrupted" in result.stderr
    assert "run `shdb compact` again to finish" in result.stderr


def test_a_file_ending_in_free_pages_is_not_truncated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit can leave data.mdb shorter than its header's last page: pages
    taken from the end and given back before the commit are free and never
    written. Such a healthy index opens (it was refused as truncated, for good);
    a file cut into pages the snapshot uses is still refused."""
    monkeypatch.setattr(tuning, "FRESH_MIN_CELLS", 1 << 15)  # a merge after the first batch
    short = []
    for seed in range(4):
        path = tmp_path / f"ix{seed}"
        fps = np.random.default_rng(seed).integers(0, 2**64, 5000, dtype=np.uint64)
        with SimhashIndex.open(str(path)) as index:
            index.add_documents([Document(f"d{i}", int(f)) for i, f in enumerate(fps.tolist())])
        data = path / "data.mdb"
        with lmdb.open(str(path), readonly=True, lock=False, subdir=True) as env:
            header = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        short.append(data.stat().st_size < header)
        with SimhashIndex.open(str(path), readonly=True) as index:
            assert index.stats()["documents"] == 5000 and verify(index).clean
            assert [m.doc_id for m in index.query_fingerprint(int(fps[7]), 0)] == ["d7"]
        with data.open("r+b") as f:
            f.truncate(data.stat().st_size // 2)
        with pytest.raises(StoreCorrupt, match="is truncated"):
            SimhashIndex.open(str(path), readonly=True)
    assert any(short), "no file ended before its header's last page: the case is not tested"


def test_a_bulk_load_that_fails_leaves_the_index_empty(tmp_path: Path) -> None:
    """An id repeated in a later block: the blocks before it were written; the
    load leaves none of them (they were visible, without all their cells, and a
    later add took their numbers), and a second load goes through."""
    docs = [Document(f"u{i}", int(fp)) for i, fp in enumerate(_fingerprints(3_000).tolist())]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        with pytest.raises(StoreError, match="twice"):
            index.bulk_load([*docs, Document("u5", 1)], batch_size=1_000)
        assert list(index.documents()) == [] and index.get("u1") is None
        assert index.stats()["documents"] == index.stats()["index_cells"] == 0
        assert index.bulk_load(docs, batch_size=1_000) == len(docs)
        index.add_documents([Document("new", 12345)])
        assert index.remove("u0") and index.get("new") == Document("new", 12345)
        assert verify(index).clean and index.stats()["documents"] == len(docs)


def test_a_killed_bulk_load_is_refused_until_loaded_again(tmp_path: Path) -> None:
    """SIGKILL in the middle of a load (two flags' cells appended): readers and
    writers refuse the index with what to do; a load again starts over and gives
    the index a clean load gives; its scratch folder goes."""
    path, fps_file = tmp_path / "ix", tmp_path / "fps.npy"
    fps = _fingerprints(20_000)
    np.save(fps_file, fps)
    script = (
        "import os, signal, sys\n"
        "import numpy as np\n"
        "from simhash_hbase import SimhashIndex\n"
        "from simhash_hbase.records import Document\n"
        "from simhash_hbase.store.lmdb import load as lmdb_load\n"
        "real = lmdb_load._append_flag\n"
        "def cut(tables, spill, main):\n"
        "    if spill.name == 'flag-3':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(tables, spill, main)\n"
        "lmdb_load._append_flag = cut\n"
        "fps = np.load(sys.argv[2])\n"
        "with SimhashIndex.open(sys.argv[1]) as index:\n"
        "    index.bulk_load((Document(f'd{i}', int(f)) for i, f in enumerate(fps.tolist())),\n"
        "                    batch_size=3_000)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path), str(fps_file)], check=False)
    assert proc.returncode == -9
    assert list(path.glob(".load-*")), "the killed load left its scratch folder"
    with pytest.raises(StoreCorrupt, match="cut short"):
        SimhashIndex.open(str(path), readonly=True)
    with SimhashIndex.open(str(path)) as index:
        with pytest.raises(StoreCorrupt, match="run the bulk load again"):
            index.add_documents([Document("x", 1)])
        docs = [Document(f"d{i}", int(f)) for i, f in enumerate(fps.tolist())]
        assert index.bulk_load(iter(docs), batch_size=3_000) == len(docs)
    with SimhashIndex.open(str(tmp_path / "clean")) as clean:
        clean.bulk_load(iter(docs), batch_size=3_000)
        expected = _state(clean)
    with SimhashIndex.open(str(path), readonly=True) as index:
        assert _state(index) == expected and verify(index).clean
    assert not list(path.glob(".load-*"))
