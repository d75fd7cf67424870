"""A writer stalled past its write section's lease (a pause, SIGSTOP, a frozen VM,
a long network stall) still reports as one writer would (issue 42, deliverable 3;
docs/SPEC.md, "Concurrent writers"): it learns that another writer took its
section (:meth:`LeaseLock.kept`), decides again in a new section if it had not
written yet, or adds what the other committed meanwhile if it had; every planted
pair is reported once across the writers, and of identical texts exactly one is new.

The embedded store's section (``flock``) has no lease: here HBase's section runs
over the embedded store's meta table, whose checkAndPut both stores share, and a
stall is a meta table that answers one writer only once thawed. The HBase tests
stop a real ``shdb ingest`` (``SHDB_FAULT=looked-up:1:stop``) inside its section."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.errors import IndexBusy
from simhash_hbase.index import write as write_mod
from simhash_hbase.index.write import Writer
from simhash_hbase.records import Matches
from simhash_hbase.store import Store
from simhash_hbase.store.lock import SECTION_ROW, LeaseSection

from .test_concurrent_ingests import ENV, ROOT, SHDB, _ingest, _reported

K = 3
LEASE_MS = 600  # a short lease: a stall of a second outlasts it


class _Stallable:
    """A store's meta table as one writer reaches it: its calls counted, and each
    held while ``thawed`` is clear (the writer's process or network stalled)."""

    def __init__(self, store: Store) -> None:
        self.store, self.url, self.calls = store, store.url, 0
        self.thawed = threading.Event()
        self.thawed.set()

    def swap_meta(self, items: Any) -> list[bool]:
        self.thawed.wait()
        self.calls += 1
        return self.store.swap_meta(items)

    def get_meta(self, name: str) -> dict[str, Any] | None:
        self.thawed.wait()
        self.calls += 1
        return self.store.get_meta(name)


class _Sectioned:
    """The embedded store with HBase's write section, its lease row reached through
    ``meta`` (the store itself, or a :class:`_Stallable` of it)."""

    def __init__(self, store: Store, meta: Any) -> None:
        self._held = store
        self._section = LeaseSection(meta, LEASE_MS)

    def write_section(self) -> contextlib.AbstractContextManager[Any]:
        return self._section.held()

    def __getattr__(self, name: str) -> object:
        return getattr(self._held, name)


@contextlib.contextmanager
def stalled(meta: _Stallable) -> Iterator[None]:
    meta.thawed.clear()
    try:
        yield
    finally:
        meta.thawed.set()


def test_a_lease_knows_when_another_took_it(tmp_path: Path) -> None:
    """``kept``: no round trip while the lease runs; after a stall past the lease,
    False if another writer took the row meanwhile (and from then on), True if
    none did; the lease a taker judges by is the one the holder recorded."""
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        store = index._store
        meta = _Stallable(store)
        section = LeaseSection(meta, LEASE_MS)  # type: ignore[arg-type]
        with section.held() as held:
            calls = meta.calls
            assert held.kept() and meta.calls == calls  # the normal case: no call
            assert store.get_meta(SECTION_ROW)["lease"] == LEASE_MS  # type: ignore[index]
            with stalled(meta), LeaseSection(store, LEASE_MS).held(wait=60):
                pass  # taken once the stalled holder's lease ran out, and released
            assert not held.kept() and not held.kept()
        assert store.get_meta(SECTION_ROW) == {"free": True}  # a lost hold's release: nothing
        with section.held() as held:
            with stalled(meta):
                time.sleep(3 * LEASE_MS / 1000)  # a stall past the lease that nobody used
            assert held.kept()
        holder, taker = LeaseSection(store), LeaseSection(store, LEASE_MS)  # 60 s, 0.6 s
        with holder.held(), pytest.raises(IndexBusy), taker.held(wait=1):
            pass  # a taker of a short lease still waits for the holder's


def _planted(identical: bool) -> tuple[list[Document], list[Document]]:
    """Originals (the stalled writer's batch) and their copies (the other's): one
    bit away, or identical fingerprints (check-and-add's one new per text)."""
    rng = random.Random(5)
    originals = [Document(f"p{p}a", rng.getrandbits(64)) for p in range(20)]
    flip = (lambda p: 0) if identical else (lambda p: 1 << p)
    return originals, [Document(f"p{p}b", d.fingerprint ^ flip(p)) for p, d in enumerate(originals)]


def _pairs(docs: Sequence[Document], found: Sequence[Matches]) -> Counter[frozenset[str]]:
    return Counter(frozenset((d.doc_id, m.doc_id)) for d, ms in zip(docs, found) for m in ms)


@pytest.mark.parametrize("where", ["after its lookups", "inside its write"])
@pytest.mark.parametrize("check", [False, True], ids=["ingest", "check-and-add"])
def test_a_writer_stalled_past_its_lease_reports_as_one_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, check: bool
) -> None:
    """Writer A stalls (its meta calls held) past its lease after its lookups, or
    inside its write before anything of it is written; writer B takes the section
    and writes the copies meanwhile, seeing none of A's. Then A goes on: every
    planted pair is reported once across both (A's), and of identical texts
    exactly one is new (B's: A decides after B's write)."""
    originals, copies = _planted(identical=check)
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        store, writer = index._store, index._writer
        meta = _Stallable(store)
        a, b = _Sectioned(store, meta), _Sectioned(store, store)

        def run(section: Any, docs: list[Document]) -> list[Matches]:
            if check:
                return writer.check_and_add(section, docs, K, None, True, None)
            found = {f.doc_id: f.matches for f in writer.add_documents(section, docs, find_k=K)}
            return [found.get(d.doc_id, Matches()) for d in docs]

        others: list[list[Matches]] = []

        def other_writes() -> None:
            if not others:  # once: the stall
                others.append([])
                with stalled(meta):
                    others[0] = run(b, copies)

        if where == "after its lookups":
            monkeypatch.setattr(
                write_mod, "fault", lambda point: point == "looked-up" and other_writes()
            )
        else:
            real = Writer.write

            def write(self: Writer, section: Any, latest: Any) -> Any:
                if section is a:
                    other_writes()
                return real(self, section, latest)

            monkeypatch.setattr(Writer, "write", write)
        mine = run(a, originals)
    assert others[0] and not any(others[0])  # B saw none of A's documents
    assert _pairs(originals, mine) == Counter(frozenset((a.doc_id, b.doc_id)) for a, b in
                                              zip(originals, copies))  # fmt: skip
    if check:
        assert [m.total == 0 for m in others[0]] == [True] * len(copies)
        assert [m.total == 0 for m in mine] == [False] * len(originals)


# The same on HBase, with real processes: a shdb ingest (or a check-and-add) stopped
# with SIGSTOP in its section for longer than the lease (lease=2 in its URL).


def _leased(url: str) -> str:
    return f"{url}&lease=2"


def _stopped(proc: subprocess.Popen[Any]) -> None:
    """Wait until ``proc`` has stopped itself (SHDB_FAULT=looked-up:1:stop)."""
    deadline = time.monotonic() + 300
    while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert proc.poll() is None and time.monotonic() < deadline, "never stopped"
        time.sleep(0.05)


def _writes(tmp_path: Path, name: str, docs: Sequence[Document]) -> Path:
    path = tmp_path / f"{name}.tsv"
    path.write_text("".join(f"{d.doc_id}\t{d.fingerprint:016x}\n" for d in docs))
    return path


def _stopped_meanwhile(command: list[str], other: Callable[[], Any]) -> tuple[str, Any]:
    """``command`` run until it stops itself in its section; ``other`` run while it
    stays stopped (past its lease); then it goes on. Its output, and ``other``'s."""
    proc = subprocess.Popen(
        command, env=ENV | {"SHDB_FAULT": "looked-up:1:stop"}, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _stopped(proc)
        done = other()
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        return out, done
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.hbase
def test_a_stopped_ingest_reports_what_one_writer_reports_on_hbase(
    hbase_url: str, tmp_path: Path
) -> None:
    """A `shdb ingest --report` stopped after its batch's lookups for longer than
    its lease while another ingests the planted copies: every planted pair is in
    exactly one report, and `shdb verify` finds the index clean."""
    url = _leased(hbase_url)
    SimhashIndex.open(url).close()
    originals, copies = _planted(identical=False)
    reports = [tmp_path / "stopped.jsonl", tmp_path / "other.jsonl"]
    first = _ingest(_writes(tmp_path, "a", originals), url, reports[0])

    def other() -> None:
        run = _ingest(_writes(tmp_path, "b", copies), url, reports[1])
        done = subprocess.run(run, env=ENV, cwd=ROOT, capture_output=True, timeout=600)
        assert done.returncode == 0, done.stderr.decode()

    _stopped_meanwhile(first, other)
    planted = Counter(frozenset((a.doc_id, b.doc_id)) for a, b in zip(originals, copies))
    assert _reported(reports) == planted
    verify = subprocess.run(
        [*SHDB, "verify", "-i", url, "--json"], env=ENV, cwd=ROOT, capture_output=True, timeout=600
    )
    assert verify.returncode == 0, verify.stderr.decode()


CHECKER = """
import json, sys
from simhash_hbase import Document, SimhashIndex
with SimhashIndex.open(sys.argv[1], create=False) as index:
    docs = [Document(f"p{n}a", int(h, 16)) for n, h in enumerate(sys.argv[2:])]
    print(json.dumps([m.total == 0 for m in index.check_and_add(docs, 3, always=True)]))
"""


@pytest.mark.hbase
def test_a_stopped_check_and_add_one_new_per_text_on_hbase(hbase_url: str, tmp_path: Path) -> None:
    """A check-and-add stopped after its lookups (it found nothing) past its lease,
    while another handle checks and adds the same texts: exactly one new of each,
    the other's, which wrote first; the stopped one names it."""
    url = _leased(hbase_url)
    SimhashIndex.open(url).close()
    originals, copies = _planted(identical=True)
    checker = [sys.executable, "-c", CHECKER, url, *(f"{d.fingerprint:016x}" for d in originals)]

    def other() -> list[bool]:
        with SimhashIndex.open(url, create=False) as index:
            return [m.total == 0 for m in index.check_and_add(copies, K, always=True)]

    out, theirs = _stopped_meanwhile(checker, other)
    assert theirs == [True] * len(copies) and json.loads(out) == [False] * len(originals)


def test_the_lease_is_a_url_option() -> None:
    from simhash_hbase.errors import InvalidIndexUrl
    from simhash_hbase.store.hbase.settings import parse_url

    assert parse_url("hbase://h?prefix=p&lease=2")["lease"] == 2.0
    assert parse_url("hbase://h?prefix=p")["lease"] is None  # the default: 60 s
    for bad in ("0", "-1", "soon", "7200"):
        with pytest.raises(InvalidIndexUrl, match="lease"):
            parse_url(f"hbase://h?prefix=p&lease={bad}")
