"""A read-only embedded store maps its file's cached pages in the background once
it has served a few queries (store/lmdb/pages.py): never for a one-shot query or a
writer, stopped by close(), answers unchanged."""

from __future__ import annotations

import mmap
import subprocess
import sys
import time
from itertools import groupby
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb import pages
from simhash_hbase.store.lmdb import store as embedded

linux = pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="pages are mapped ahead on Linux"
)


@given(st.lists(st.integers(0, 1), max_size=200))
def test_runs_are_the_runs_of_ones(flags: list[int]) -> None:
    want, at = [], 0
    for value, group in groupby(flags):
        n = len(list(group))
        if value:
            want.append((at, n))
        at += n
    assert pages.runs(np.array(flags, dtype=np.uint8)) == want


@linux
def test_resident_finds_the_cached_pages_of_a_mapping(tmp_path: Path) -> None:
    data = tmp_path / "f"
    data.write_bytes(b"x" * (16 * mmap.PAGESIZE))
    with open(data, "rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        start = pages.mapped_at(data)
        assert start is not None
        _ = mapped[:]  # every page in the page cache
        assert pages.resident(start, len(mapped)) == [(start, len(mapped))]


def _mapped_kb(folder: Path) -> int:
    """This process's resident kB of the mapping of ``folder``'s data.mdb."""
    start = pages.mapped_at(folder / "data.mdb")
    assert start is not None
    mine = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                mine = int(head.split("-")[0], 16) == start
            elif mine and head == "Rss:":
                return int(line.split()[1])
    raise AssertionError("no mapping")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of a few MB, just written: its pages are in the page cache."""
    fps = np.random.default_rng(7).integers(0, 1 << 63, 40_000, dtype=np.int64)
    path = tmp_path_factory.mktemp("pages") / "ix"
    with SimhashIndex.open(str(path)) as index:
        index.bulk_load(Document(f"d{i}", int(fp)) for i, fp in enumerate(fps.tolist()))
    return path


def _store(index: SimhashIndex) -> embedded.EmbeddedStore:
    store = index._store
    assert isinstance(store, embedded.EmbeddedStore)
    return store


def _queries(n: int) -> list[int]:
    return np.random.default_rng(n).integers(0, 1 << 63, n, dtype=np.int64).tolist()


@linux
def test_a_reader_maps_the_file_after_a_few_queries(folder: Path) -> None:
    size_kb = (folder / "data.mdb").stat().st_size // 1024
    with SimhashIndex.open(str(folder)) as writer:
        answers = [writer.query_fingerprint(q, 3) for q in _queries(40)]
        assert _store(writer)._populator is None  # a writer's file changes under it
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        store = _store(reader)
        got = [reader.query_fingerprint(q, 3) for q in _queries(40)[: embedded.POPULATE_AFTER - 1]]
        assert store._populator is None  # a one-shot query pays nothing
        assert _mapped_kb(folder) < size_kb // 2
        got += [reader.query_fingerprint(q, 3) for q in _queries(40)[len(got) :]]
        assert store._populator is not None
        store._populator._thread.join()
        assert _mapped_kb(folder) >= size_kb * 9 // 10
        assert got == answers
    assert not store._populator.running()


@linux
def test_close_stops_the_mapping_before_the_file_is_unmapped(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def slow(start: int, size: int) -> bool:
        time.sleep(0.001)
        calls.append(start)
        return populate(start, size)

    populate = pages.populate
    monkeypatch.setattr(pages, "populate", slow)
    monkeypatch.setattr(pages, "CHUNK", mmap.PAGESIZE)  # a call a page: still running at close
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        for q in _queries(embedded.POPULATE_AFTER):
            reader.query_fingerprint(q, 3)
        populator = _store(reader)._populator
        assert populator is not None
        while not calls:
            time.sleep(0.001)
    made = len(calls)
    time.sleep(0.05)
    assert not populator.running() and len(calls) == made  # none after close()


@linux
def test_warm_maps_it_all_and_takes_the_place_of_the_background_pass(folder: Path) -> None:
    with SimhashIndex.open(str(folder), readonly=True, warm=True) as reader:
        for q in _queries(embedded.POPULATE_AFTER):
            reader.query_fingerprint(q, 3)
        assert _store(reader)._populator is None
        assert _mapped_kb(folder) >= (folder / "data.mdb").stat().st_size // 1024 * 9 // 10


def test_no_mapping_where_the_os_does_not_say_where_the_file_is(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "mapped_at", lambda data: None)
    with SimhashIndex.open(str(folder), readonly=True) as reader:
        for q in _queries(2 * embedded.POPULATE_AFTER):
            reader.query_fingerprint(q, 3)
        assert _store(reader)._populator is None
        assert reader.warm() == 0


def test_close_while_other_threads_read_is_an_error_there_not_a_crash(tmp_path: Path) -> None:
    """LMDB reads the map with the GIL released: a close() that unmapped it under
    another thread's query crashed the process (SIGSEGV, ~3 runs in 8). close()
    waits for the reads under way; later ones raise StoreClosed."""
    path = tmp_path / "ix"
    fps = np.random.default_rng(3).integers(0, 2**64, 200_000, dtype=np.uint64)
    with SimhashIndex.open(str(path)) as index:
        index.bulk_load(Document(f"d{i}", int(fp)) for i, fp in enumerate(fps.tolist()))
    script = (
        "import sys, threading, time\n"
        "import numpy as np\n"
        "from simhash_hbase import SimhashIndex\n"
        "from simhash_hbase.errors import StoreClosed\n"
        "for round in range(10):\n"
        "    index = SimhashIndex.open(sys.argv[1], readonly=True)\n"
        "    ended = []\n"
        "    def reader(kind):\n"
        "        rng = np.random.default_rng(round)\n"
        "        try:\n"
        "            while True:\n"
        "                fp = int(rng.integers(0, 2**64, dtype=np.uint64))\n"
        "                if kind: index.query_fingerprint(fp, 3)\n"
        "                else: index.get_many([f'd{fp % 1000}'])\n"
        "        except StoreClosed:\n"
        "            ended.append(kind)\n"
        "    threads = [threading.Thread(target=reader, args=(k,)) for k in (0, 1, 1)]\n"
        "    for t in threads: t.start()\n"
        "    time.sleep(0.05)\n"
        "    index.close()\n"
        "    for t in threads: t.join()\n"
        "    assert sorted(ended) == [0, 1, 1], ended\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr)


def test_close_with_an_unfinished_iteration_returns(tmp_path: Path) -> None:
    """A generator left suspended holds no read close() waits for."""
    path = tmp_path / "ix"
    with SimhashIndex.open(str(path)) as index:
        index.add_documents([Document(f"d{i}", i) for i in range(10)])
    script = (
        "import sys\n"
        "from simhash_hbase import SimhashIndex\n"
        "index = SimhashIndex.open(sys.argv[1], readonly=True)\n"
        "docs, cells = index.documents(), index.index_cells()\n"
        "next(docs), next(cells)\n"
        "index.close()\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
