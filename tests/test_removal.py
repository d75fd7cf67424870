"""Bulk removal (issue 40.4, docs/lifecycle.md): its bucket edits in C and their
reference, every cell of the removed documents gone and nothing else, and a run
killed (SIGKILL) anywhere that loses nothing it should keep, re-run to the end.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase import _native as native
from simhash_hbase.jobs.remove import chosen, remove_ids
from simhash_hbase.jobs.verify import verify
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb import tuning
from simhash_hbase.store.lmdb.buckets import _edited, _edited_py

from .test_index import ARTICLE, OTHER

ROOT = Path(__file__).resolve().parents[1]
_KEYS = [b"\x00\x00\x00", b"\x00\x00\x01", b"\x03\xff\xff", b"\x09\x12\x34", b"\x0a\x00\x07"]
_CELL = st.tuples(st.integers(0, 5), st.integers(0, 12) | st.just(0xFFFFFFFF))


def _packed(cells: list[tuple[int, int]]) -> bytes:
    return b"".join(lead.to_bytes(2, "big") + num.to_bytes(4, "big") for lead, num in cells)


@settings(max_examples=300, deadline=None)
@given(
    held=st.dictionaries(st.sampled_from(_KEYS), st.lists(_CELL, max_size=30)),
    asked=st.dictionaries(
        st.sampled_from(_KEYS), st.lists(_CELL.filter(lambda c: c[1] != 0xFFFFFFFF), max_size=20)
    ),
)
def test_the_c_bucket_edits_match_python(
    held: dict[bytes, list[tuple[int, int]]], asked: dict[bytes, list[tuple[int, int]]]
) -> None:
    """remove_cells (C) makes _edited_py's edits: every copy of a cell asked goes,
    a bucket left empty is named, one that loses nothing is untouched, and a bucket
    holding a spilled lead's mark is handed back, whatever it lost; more cells asked
    of a bucket than a linear search takes (binary search), buckets not held."""
    keys = sorted(asked)
    packed = [_packed(asked[key]) for key in keys]
    found = [(key, _packed(held[key])) for key in keys if key in held]
    slow = _edited_py(found, keys, packed)
    for key, old in found:  # the reference itself: the cells kept are the others
        gone = set(asked[key])
        kept = _packed([c for c in held[key] if c not in gone])
        assert (key, kept) in slow[0] or (not kept and key in slow[1]) or kept == old
    if native.module() is None:
        pytest.skip("the C extension is not built")
    assert _edited(found, keys, packed) == slow


def _docs(n: int, seed: int, copies: int = 1) -> list[Document]:
    """Documents with times; ``copies`` of each fingerprint (hot rows when many)."""
    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(-(-n // copies))]
    return [Document(f"d{i:05d}", fps[i // copies], time=1000 * i) for i in range(n)]


def _cells_of_only(tmp: Path, docs: list[Document]) -> list[tuple[bytes, str]]:
    """The index cells an index holding only ``docs`` has."""
    with SimhashIndex.open(str(tmp)) as index:
        index.add_documents(docs)
        return sorted(index.index_cells())


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 1000),
    copies=st.sampled_from([1, 40]),
    batch=st.integers(1, 90),
    c_path=st.booleans(),
)
def test_removal_takes_every_cell_of_the_removed_and_nothing_else(
    tmp_path_factory: pytest.TempPathFactory, seed: int, copies: int, batch: int, c_path: bool
) -> None:
    """Whatever is removed, in batches of any size, on either path (C or Python)
    and with hot rows spilled (many copies of a fingerprint): the index then holds
    exactly the cells an index of the documents kept holds, and verify is clean."""
    tmp = tmp_path_factory.mktemp("ix")
    docs = _docs(300, seed, copies)
    gone = [*random.Random(seed).sample([d.doc_id for d in docs], 170), "never-held"]
    env = os.environ.get(native.ENV)
    old_hot, old_check = tuning.HOT, tuning.CHECK_BYTES
    tuning.HOT, tuning.CHECK_BYTES = 16, 48  # a lead of 16 copies is spilled
    os.environ[native.ENV] = "1" if c_path else "0"
    try:
        with SimhashIndex.open(str(tmp / "ix")) as index:
            index.add_documents(docs)
            index.add("text", ARTICLE)
            summary = remove_ids(index, [*gone, "text"], batch_size=batch)
            assert (summary.asked, summary.removed) == (172, 171)
            kept = [d for d in docs if d.doc_id not in set(gone)]
            assert sorted(index.index_cells()) == _cells_of_only(tmp / "only", kept)
            assert sorted(d.doc_id for d in index.documents()) == [d.doc_id for d in kept]
            assert verify(index).clean
            assert index.stats()["documents"] == len(kept)
    finally:
        tuning.HOT, tuning.CHECK_BYTES = old_hot, old_check
        if env is None:
            os.environ.pop(native.ENV, None)
        else:
            os.environ[native.ENV] = env


def test_documents_read_back_alike_bare_or_not(tmp_path: Path) -> None:
    """A removal reads its batch's docs rows in one pass where they hold only a
    fingerprint (and a time): the documents are those written, as are documents
    with other columns, and a batch mixing them."""
    bare = _docs(50, 3)
    untimed = [Document(f"u{i}", 7 * i + 1) for i in range(5)]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents(bare + untimed)
        index.add("text", ARTICLE, meta={"k": 1}, time=5)
        store = index._store
        assert store.get_docs([d.doc_id for d in bare]) == {d.doc_id: d for d in bare}
        assert store.get_docs([d.doc_id for d in untimed]) == {d.doc_id: d for d in untimed}
        both = store.get_docs(["text", bare[0].doc_id, untimed[0].doc_id])
        assert both["text"].meta == {"k": 1} and both["text"].time == 5000  # seconds given
        assert both["text"].sketch and both["text"].bands
        assert both[bare[0].doc_id] == bare[0] and both[untimed[0].doc_id] == untimed[0]


def test_before_chooses_oldest_first(tmp_path: Path) -> None:
    """--before removes in time order (ties by id): a run cut short has removed the
    oldest, and documents without a time are never chosen."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents(
            [
                Document("b", 1, time=5_000),
                Document("a", 2, time=9_000),
                Document("c", 3, time=5_000),
            ]
        )
        index.add_documents([Document("x", 4)])
        assert chosen(index, before=10_000) == ["b", "c", "a"]
        assert chosen(index, before=10_000, id_prefix="a") == ["a"]


# -- killed mid-removal (SIGKILL), then run again ------------------------------------


def _shdb(args: list[str], fault: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SHDB_FAULT", None)
    if fault is not None:
        env["SHDB_FAULT"] = fault
    cmd = [sys.executable, "-m", "simhash_hbase", *args]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _filled(url: str, docs: list[Document]) -> None:
    with SimhashIndex.open(url) as index:
        index.add_documents(docs)
        index.add("kept-text", OTHER)


def _check_cut(url: str, docs: list[Document], asked: set[str], *, atomic: bool) -> set[str]:
    """After a kill: every document not asked is held with all its cells (a query
    finds it), every hit names a held document; on an atomic store verify is clean.
    The ids asked still held."""
    with SimhashIndex.open(url, create=False) as index:
        held = set(index.get_many([d.doc_id for d in docs] + ["kept-text"]))
        assert {d.doc_id for d in docs if d.doc_id not in asked} | {"kept-text"} <= held
        for doc in docs[:: max(1, len(docs) // 25)]:
            hits = {m.doc_id for m in index.query_fingerprint(doc.fingerprint, 0)}
            assert hits <= held  # no cell is counted without its document
            assert doc.doc_id in asked or doc.doc_id in hits
        if atomic:
            report = verify(index)
            assert report.clean, report.examples
        return held & asked


def _finish(url: str, args: list[str], docs: list[Document], asked: set[str]) -> None:
    """Run the removal again: it ends (exit 0), nothing asked is left, verify is clean."""
    run = _shdb(args)
    assert run.wait(timeout=300) == 0, run.stderr.read() if run.stderr else ""
    with SimhashIndex.open(url, create=False) as index:
        assert not set(index.get_many(sorted(asked)))
        held = set(index.get_many([d.doc_id for d in docs] + ["kept-text"]))
        assert held == {d.doc_id for d in docs if d.doc_id not in asked} | {"kept-text"}
        report = verify(index)
        assert report.clean, report.examples


def _kills(url: str, args: list[str], docs: list[Document], asked: set[str], atomic: bool) -> None:
    """Killed after batch 1, 3 and 6 (the fault point after a batch is written),
    then at random moments of a run (inside a batch: a commit, a flush), each time
    checked, then run again to the end."""
    for nth in (1, 3, 6):
        run = _shdb(args, f"removed:{nth}")
        assert run.wait(timeout=300) == -signal.SIGKILL
        _check_cut(url, docs, asked, atomic=atomic)
    rng = random.Random(5)
    for _ in range(3):
        before = _held(url, asked)
        run = _shdb(args)
        while _held(url, asked) == before and run.poll() is None:  # until a batch is in
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.3))  # then somewhere in the batches after it
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        if not _check_cut(url, docs, asked, atomic=atomic):
            break
    _finish(url, args, docs, asked)


def _held(url: str, ids: set[str]) -> int:
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        return len(index.get_many(sorted(ids)))


def test_kill_9_mid_removal_by_ids_loses_nothing_and_a_rerun_finishes(tmp_path: Path) -> None:
    """`shdb remove --ids` on the embedded store, SIGKILLed between batches and at
    random moments: each batch is one transaction, so at every cut the documents
    not asked are all held and found, and verify is clean; a re-run finishes."""
    url = str(tmp_path / "ix")
    docs = _docs(3000, 11, copies=3)
    _filled(url, docs)
    asked = {d.doc_id for d in docs[::2]} | {"never-held"}
    ids = tmp_path / "gone.txt"
    ids.write_text("\n".join(sorted(asked)) + "\n", encoding="utf-8")
    _kills(url, ["remove", "--ids", str(ids), "-i", url, "--batch-size", "10"], docs, asked, True)


def test_kill_9_mid_removal_before_a_time_and_a_rerun_finishes(tmp_path: Path) -> None:
    """`shdb remove --before` killed after a batch: the oldest went first, the
    documents at or after the time and those without one are all kept, and the
    re-run (choosing again) removes the rest."""
    url = str(tmp_path / "ix")
    docs = _docs(2000, 12)
    _filled(url, docs)
    cut = docs[1200].time
    asked = {d.doc_id for d in docs if d.time is not None and d.time < cut}  # type: ignore[operator]
    args = ["remove", "--before", str(cut / 1000), "-i", url, "--batch-size", "100"]  # type: ignore[operator]
    run = _shdb(args, "removed:4")
    assert run.wait(timeout=300) == -signal.SIGKILL
    left = _check_cut(url, docs, asked, atomic=True)
    assert left == {d.doc_id for d in docs[400:1200]}  # the 400 oldest went first
    _finish(url, args, docs, asked)


@pytest.mark.hbase
def test_kill_9_mid_removal_on_hbase_and_a_rerun_finishes(hbase_url: str, tmp_path: Path) -> None:
    """The same on HBase, atomic per row only: at a cut the documents not asked are
    all held and found (a batch deletes only the cells of the rows it claimed, cells
    before docs rows, so no cell is counted without its document); what a cut leaves
    half removed is removed by the re-run, and verify is then clean."""
    docs = _docs(1500, 13)
    _filled(hbase_url, docs)
    asked = {d.doc_id for d in docs[::3]}
    ids = tmp_path / "gone.txt"
    ids.write_text("\n".join(sorted(asked)) + "\n", encoding="utf-8")
    args = ["remove", "--ids", str(ids), "-i", hbase_url, "--batch-size", "30"]
    _kills(hbase_url, args, docs, asked, False)


@pytest.mark.hbase
def test_removing_ids_not_held_leaves_no_row_on_hbase(hbase_url: str) -> None:
    """A batch claims only the rows that hold a document: an id never held (or
    removed before) gets no row of its owner token, and one held goes whole."""
    with SimhashIndex.open(hbase_url) as index:
        index.add_documents(_docs(3, 14))
        assert index.remove_many(["ghost", "d00001", "d00001", "ghost2"]) == ["d00001"]
        assert index.remove_many(["d00001"]) == []
        rows = index._store.read_rows("docs", [b"ghost", b"ghost2", b"d00000"])  # type: ignore[attr-defined]
        assert set(rows) == {b"d00000"}


def test_cli_remove_interrupted_says_what_is_done_and_how_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the second batch of `shdb remove --ids`: exit 130, the first batch
    is removed and said so, and running the same command again removes the rest."""
    from typer.testing import CliRunner

    from simhash_hbase.cli.app import app

    url = str(tmp_path / "ix")
    docs = _docs(10, 15)
    with SimhashIndex.open(url) as index:
        index.add_documents(docs)
    ids = tmp_path / "gone.txt"
    ids.write_text("\n".join(d.doc_id for d in docs[:6]) + "\n", encoding="utf-8")
    args = ["remove", "--ids", str(ids), "-i", url, "--batch-size", "3"]
    calls = [0]
    real = SimhashIndex.remove_many

    def stopped(self: SimhashIndex, *a: object, **k: object) -> list[str]:
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(SimhashIndex, "remove_many", stopped)
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 130
    assert "removed 3 of the first 3 ids; run the same command again" in out.stderr
    monkeypatch.setattr(SimhashIndex, "remove_many", real)
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0 and '"removed": 3' in out.stdout
    with SimhashIndex.open(url, create=False) as index:
        assert sorted(index.get_many([d.doc_id for d in docs])) == [d.doc_id for d in docs[6:]]
