"""The cyclic collector is held during a batch and given back after (gc_paused)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from simhash_hbase import SimhashIndex
from simhash_hbase.index.write import gc_paused
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints
from simhash_hbase.records import Document


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SimhashIndex]:
    with SimhashIndex.open(str(tmp_path / "idx")) as idx:
        yield idx


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_paused_inside_a_batch_and_back_after(index: SimhashIndex) -> None:
    seen: list[bool] = []
    index.add_documents(
        [Document(f"d{i}", i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(50)],
        find_k=3,
        before_write=lambda found: seen.append(gc.isenabled()),
    )
    assert seen == [False]
    assert gc.isenabled()
    assert len(index.get_many([f"d{i}" for i in range(50)])) == 50


def test_given_back_when_the_batch_raises(index: SimhashIndex) -> None:
    def fail(found: object) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        index.add_documents([Document("a", 1)], find_k=3, before_write=fail)
    assert gc.isenabled()


def test_left_off_where_the_caller_turned_it_off(index: SimhashIndex) -> None:
    gc.disable()
    index.add_documents([Document("a", 1)])
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_cycle_made_in_a_batch_is_collected_soon_after() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    gc.collect()
    with gc_paused():
        node = Node()  # a cycle: reference counting alone never frees it
        gone = weakref.ref(node)
        del node
        junk = [[] for _ in range(5000)]  # past the first generation's threshold
        assert gone() is not None  # no collection while paused
    junk.append([])  # the next allocation collects: the counts ran on
    assert gone() is None


def test_ingest_and_bulk_load_run_paused_and_give_it_back(tmp_path: Path) -> None:
    states: list[bool] = []
    pairs = [(f"d{i}", (i + 1) * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(300)]
    with SimhashIndex.open(str(tmp_path / "a")) as idx:
        index_fingerprints(
            idx, pairs, IngestOptions(find_k=3, batch_size=100), on_progress=lambda s: None
        )
        assert len(idx.get_many([i for i, _ in pairs])) == 300
    assert gc.isenabled()

    def docs() -> Iterator[Document]:
        for i, fp in pairs:
            states.append(gc.isenabled())
            yield Document(i, fp)

    with SimhashIndex.open(str(tmp_path / "b")) as idx:
        assert idx.bulk_load(docs()) == 300
    assert states and not any(states)
    assert gc.isenabled()


def test_a_merge_runs_paused(index: SimhashIndex) -> None:
    index.add_documents([Document(f"d{i}", i + 1) for i in range(20)])
    states: list[bool] = []
    assert index.compact(lambda done, parts, moved: states.append(gc.isenabled())) > 0
    assert states and not any(states)
    assert gc.isenabled()
