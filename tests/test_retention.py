"""Retention and expiry (issue 40.3, docs/lifecycle.md): an index created with
``--retain`` never answers with a document older than now minus its retention, and
removes such documents (``shdb expire``, and a little with every write)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidSetting, StoreCorrupt
from simhash_hbase.index import client, lookup, write
from simhash_hbase.index.manifest import check_manifest, new_manifest, retain_of
from simhash_hbase.jobs.verify import verify
from simhash_hbase.layout import window
from simhash_hbase.layout.codec import RETAIN
from simhash_hbase.records import Document, now_ms
from simhash_hbase.store.base import oldest_before
from simhash_hbase.store.lmdb.commit import CompactBatch
from simhash_hbase.store.lmdb.store import EmbeddedStore

from .conftest import HBASE_APIS, fresh_hbase_url, gateway_address, new_tables_url
from .hbase_server import HBaseServer

runner = CliRunner()
DAY_S = 86_400
DAY_MS = DAY_S * 1000
NOW = 1_800_000_000_000  # a fixed "now" (ms): tests move the clock, never wait for it


def shdb(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), catch_exceptions=False)


def fp(n: int) -> int:
    """Fingerprints far apart (an odd multiplier spreads them), none zero."""
    return (n + 1) * 0x9E3779B97F4A7C15 % 2**64


def at(monkeypatch: pytest.MonkeyPatch, ms: int) -> None:
    """The clock the lookups and writes read says ``ms``."""
    for module in (lookup, write, client, window):
        monkeypatch.setattr(module, "now_ms", lambda: ms)


# -- durations and the manifest ---------------------------------------------------
@pytest.mark.parametrize(
    ("value", "seconds"),
    [("90d", 90 * DAY_S), (" 12 H", 12 * 3600), ("2w", 14 * DAY_S), ("45s", 45)],
)
def test_a_retention_reads_as_whole_seconds(value: str, seconds: int) -> None:
    """--retain takes a duration as --within does; HBase gets it as the TTL."""
    result = shdb("schema", "--retain", value)
    assert result.exit_code == 0 and result.stdout.count(f"TTL => {seconds}}}") == 2


@pytest.mark.parametrize("value", ["", "90", "d", "1.5d", "-1d", "0d", "90x", "1d2h", "100000w"])
def test_a_bad_retention_says_what_to_give(value: str) -> None:
    result = runner.invoke(app, ["schema", "--retain", value])
    assert result.exit_code == 2 and "--retain" in result.output


@given(st.integers(1, 2**31 - 1))
def test_the_manifest_round_trips_its_retention(
    tmp_path_factory: pytest.TempPathFactory, retain: int
) -> None:
    """Written by a new index, read back by the next open (JSON in the meta table)."""
    manifest = new_manifest(None, None, retain=retain)
    assert manifest[RETAIN] == retain
    assert json.loads(json.dumps(manifest)) == manifest
    check_manifest(manifest, "x")
    assert retain_of(manifest, "x", None) == retain_of(manifest, "x", retain) == retain
    assert RETAIN not in new_manifest(None, None)  # old indexes and new ones without: none


def test_an_index_reopens_with_its_retention(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "i"), retain=90 * DAY_S) as index:
        assert index.retain == 90 * DAY_S
    with SimhashIndex.open(str(tmp_path / "i"), readonly=True) as index:
        assert index.retain == index.manifest[RETAIN] == index.stats()[RETAIN] == 90 * DAY_S
    with pytest.raises(InvalidSetting, match="set when an index is created"):
        SimhashIndex.open(str(tmp_path / "i"), retain=30 * DAY_S)
    with SimhashIndex.open(str(tmp_path / "j")) as index:
        assert index.retain is None
        with pytest.raises(InvalidSetting, match="without a retention"):
            index.expire()
    with pytest.raises(InvalidSetting, match="no retention"):
        SimhashIndex.open(str(tmp_path / "j"), retain=DAY_S)


@pytest.mark.parametrize("value", [0, -5, "90d", True, 1.5, 2**31, None])
def test_a_damaged_retention_is_refused_naming_it(tmp_path: Path, value: object) -> None:
    manifest = new_manifest(None, None, retain=DAY_S) | {RETAIN: value}
    with pytest.raises(StoreCorrupt, match=RETAIN):
        check_manifest(manifest, str(tmp_path))


# -- queries ------------------------------------------------------------------------
def test_a_query_never_returns_an_expired_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held but expired (not removed yet): not a match, not counted; check-and-add
    calls a text whose only copy expired new."""
    at(monkeypatch, NOW)
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.add_documents(
            [Document("old", fp(1), time=NOW - 1000), Document("new", fp(1) ^ 1, time=NOW)]
        )
        assert {m.doc_id for m in index.query_fingerprint(fp(1))} == {"old", "new"}
        at(monkeypatch, NOW - 1000 + DAY_MS + 1)  # "old" is older than a day now
        found = index.query_fingerprint(fp(1))
        assert [m.doc_id for m in found] == ["new"] and found.total == 1
        assert [m.doc_id for m in index.query_fingerprints([fp(1)] * 6)[5]] == ["new"]
        assert index.get("old") is not None  # still held: nothing was written since
        at(monkeypatch, NOW + DAY_MS + 1)  # both expired
        (verdict,) = index.check_and_add([Document("again", fp(1), time=NOW + DAY_MS + 1)])
        assert not verdict.total  # new: its only copies expired


# -- expiry on the embedded store --------------------------------------------------------
def docs_at(times: list[int]) -> list[Document]:
    return [Document(f"d{n:04}", fp(n), time=t) for n, t in enumerate(times)]


def test_expire_removes_expired_documents_with_all_their_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch, NOW)
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        docs = docs_at([NOW - n * 3_600_000 for n in range(48)])  # one an hour, 2 days
        index.add_documents(docs)  # written at NOW: the older half is already due
        kept = {d.doc_id for d in docs if d.time >= NOW - DAY_MS}  # type: ignore[operator]
        assert {d.doc_id for d in index.documents()} == kept  # the write expired the rest
        assert {i for _, i in index.index_cells()} == kept
        at(monkeypatch, NOW + 12 * 3_600_000)
        assert len(index.due()) == 12  # 13 to 24 hours old; 12 is exactly 12: it stays
        assert index.expire(batch_size=5) == 12
        assert index.due() == [] and index.expire() == 0
        assert len(list(index.documents())) == 13
        assert verify(index).clean


def test_background_expiry_is_bounded_and_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write removes at most max(EXPIRE_MIN, twice its documents), the oldest."""
    at(monkeypatch, NOW)
    total = write.EXPIRE_MIN + 500
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.add_documents(docs_at([NOW - total + n for n in range(total)]))
        at(monkeypatch, NOW + DAY_MS)  # every one of them is due
        index.add_documents([Document("fresh", fp(10**6), time=NOW + DAY_MS)])
        left = sorted(d.doc_id for d in index.documents())
        assert left == [f"d{n:04}" for n in range(write.EXPIRE_MIN, total)] + ["fresh"]
        index.add_documents([Document("fresh2", fp(10**6 + 1), time=NOW + DAY_MS)])
        assert sorted(d.doc_id for d in index.documents()) == ["fresh", "fresh2"]


def test_a_write_pays_nothing_when_nothing_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding the due documents reads the head of the time order, not the docs."""
    at(monkeypatch, NOW)
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.add_documents(docs_at([NOW] * 50))
        monkeypatch.setattr(EmbeddedStore, "iter_docs", lambda *a: pytest.fail("scanned docs"))
        index.add_documents([Document("x", fp(999), time=NOW)])
        assert index.due() == []


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "remove"]),
            st.integers(0, 30),  # which id
            st.integers(-3, 3),  # its time, in days from NOW
            st.booleans(),  # its fingerprint changes
        ),
        min_size=1,
        max_size=40,
    ),
    expire_at=st.integers(-2, 4),
)
@pytest.mark.parametrize("kind", ["embedded", pytest.param("hbase", marks=pytest.mark.hbase)])
def test_nothing_that_should_stay_is_lost(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    ops: list[tuple[str, int, int, bool]],
    expire_at: int,
) -> None:
    """Any mix of adds, re-adds with other times and removals, then expiry at any
    time: exactly the documents inside the retention stay, with all their cells;
    the time order (embedded; HBase: a docs scan) names exactly the documents held,
    oldest first (checked through due()). On HBase the times are in the future, so
    the tables' TTL (counted from the writes) takes nothing: expire does it all."""
    at(monkeypatch, NOW - 10 * DAY_MS)  # nothing is due while writing
    held: dict[str, Document] = {}
    with contextlib.ExitStack() as stack:
        if kind == "embedded":
            url = str(tmp_path_factory.mktemp("p") / "i")
        else:
            url = stack.enter_context(fresh_hbase_url("thrift2"))
        index = stack.enter_context(SimhashIndex.open(url, retain=DAY_S))
        for op, n, day, flip in ops:
            doc_id = f"d{n}"
            if op == "add":
                doc = Document(doc_id, fp(n) ^ flip, time=NOW + day * DAY_MS)
                index.add_documents([doc])
                held[doc_id] = doc
            else:
                index.remove(doc_id)
                held.pop(doc_id, None)
        every = sorted(held.values(), key=lambda d: (d.time, d.doc_id))
        assert sorted(index.due(now=NOW + 100 * DAY_MS)) == sorted(held)
        due_ids = index.due(now=NOW + 100 * DAY_MS)
        assert [held[i].time for i in due_ids] == [d.time for d in every]  # oldest first
        now = NOW + expire_at * DAY_MS
        index.expire(now=now)
        stay = {i for i, d in held.items() if d.time >= now - DAY_MS}  # type: ignore[operator]
        assert {d.doc_id: d for d in index.documents()} == {i: held[i] for i in stay}
        assert sorted(index.index_cells()) == sorted(index.cells([held[i] for i in stay]))
        assert verify(index).clean


def test_a_bulk_load_and_a_migrate_keep_the_time_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch, NOW)
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.bulk_load(docs_at([NOW - DAY_MS - 5, NOW, NOW - DAY_MS - 9]))
        assert index.due() == ["d0002", "d0000"]
    from simhash_hbase.jobs.migrate import migrate

    migrate(str(tmp_path / "i"), str(tmp_path / "copy"))
    with SimhashIndex.open(str(tmp_path / "copy")) as copy:
        assert copy.retain == DAY_S and copy.due() == ["d0002", "d0000"]
        assert copy.expire() == 2 and [d.doc_id for d in copy.documents()] == ["d0001"]


def test_an_index_without_retention_keeps_no_time_order(tmp_path: Path) -> None:
    """Old indexes, and new ones without --retain: no table, no cost, no expiry."""
    with SimhashIndex.open(str(tmp_path / "i")) as index:
        index.add_documents(docs_at([0, 1]))
        assert index._store.due(now_ms(), 10) == []  # type: ignore[attr-defined]
    with EmbeddedStore(tmp_path / "i", readonly=True) as store:
        assert store._compact is not None and store._compact.times is None


def test_a_document_without_a_time_gets_one_in_a_retained_index(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.add_documents([Document("bare", fp(1))])
        held = index.get("bare")
        assert held is not None and held.time is not None


# -- CLI -------------------------------------------------------------------------------
def test_cli_retain_expire_and_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    feed = tmp_path / "feed.jsonl"
    lines = [
        {
            "id": "today",
            "text": "今天股市大幅上涨，银行板块领涨，成交量创下年内新高。",
            "t": "2026-11-29T00:00:00Z",
        },
        {
            "id": "later",
            "text": "A different text about football, weather and the harbour.",
            "t": "2026-11-29T06:00:00Z",
        },
    ]
    feed.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    index = str(tmp_path / "feed")
    t0 = 1_795_910_400_000  # 2026-11-29T00:00:00Z
    at(monkeypatch, t0 + 3_600_000)
    result = shdb("ingest", str(feed), "--time-field", "t", "--retain", "1d", "-i", index)
    assert result.exit_code == 0, result.output
    at(monkeypatch, t0 + DAY_MS + 3_600_000)  # "today" is older than a day now
    dry = shdb("expire", "-i", index, "--dry-run", "--json")
    assert dry.exit_code == 0 and json.loads(dry.stdout) == {"expired": 1, "dry_run": True}
    done = shdb("expire", "-i", index)
    assert done.exit_code == 0 and "1 expired documents removed" in done.output
    assert "expire: 1 removed so far" in done.output
    again = shdb("expire", "-i", index, "--json")
    assert json.loads(again.stdout) == {"expired": 0, "dry_run": False}
    with SimhashIndex.open(index, readonly=True) as ix:
        assert [d.doc_id for d in ix.documents()] == ["later"]


@pytest.mark.parametrize("value", ["90", "x", "0d", "1.5h"])
def test_cli_a_bad_retain_is_a_usage_error(tmp_path: Path, value: str) -> None:
    result = runner.invoke(app, ["ingest", "-", "--retain", value, "-i", str(tmp_path / "i")])
    assert result.exit_code == 2 and "--retain" in result.output and "duration" in result.output
    assert not (tmp_path / "i").exists()


def test_cli_another_retain_for_an_index_is_refused(tmp_path: Path) -> None:
    index = str(tmp_path / "i")
    with SimhashIndex.open(index, retain=DAY_S):
        pass
    result = runner.invoke(app, ["ingest", "-", "--retain", "2d", "-i", index], input="x\n")
    assert result.exit_code != 0 and "set when an index is created" in result.output


def test_cli_expire_of_an_index_without_retention_says_so(tmp_path: Path) -> None:
    index = str(tmp_path / "i")
    with SimhashIndex.open(index):
        pass
    result = runner.invoke(app, ["expire", "-i", index])
    assert result.exit_code != 0 and "without a retention" in result.output


# -- HBase: the tables' TTL, and no answer from a cell whose document expired -----------
TTL_S = 4


def _ttls(url: str) -> dict[str, int | None]:
    """Each table's family TTL, as HBase reports it (None: forever)."""
    import happybase

    host, port = gateway_address("thrift1").rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        ttls = {}
        for table in ("index", "docs", "meta"):
            (family,) = conn.table(f"{_prefix(url)}_{table}").families().values()
            ttl = family["time_to_live"]
            ttls[table] = None if ttl == 2**31 - 1 else ttl
        return ttls
    finally:
        conn.close()


def _prefix(url: str) -> str:
    return parse_qs(urlsplit(url).query)["prefix"][0]


def _major_compact(url: str) -> None:
    import happybase

    host, port = gateway_address("thrift1").rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        for table in ("index", "docs"):
            conn.compact_table(f"{_prefix(url)}_{table}", major=True)
    finally:
        conn.close()


@pytest.mark.hbase
def test_hbase_expires_by_ttl_and_never_answers_from_a_cell_whose_document_expired(
    hbase_server: HBaseServer,
) -> None:
    """On both gateways at once (one flush for both): the index and docs families get
    the retention as their TTL (meta none: it holds the manifest). A document given
    an old time is hidden at once and removed by expire (its cells' TTL counts from
    the write). A document whose cells were written after its docs row keeps cells
    past its row's TTL: no query returns it, before and after a flush (a kill and
    restart: HBase flushes the edits it replays) and a major compaction."""
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(new_tables_url(api)) for api in HBASE_APIS]
        for url in urls:
            with SimhashIndex.open(url, retain=TTL_S) as index:
                assert _ttls(url) == {"index": TTL_S, "docs": TTL_S, "meta": None}
                written = now_ms()
                late = Document("late", fp(1), time=written + 3_600_000)  # its time is later
                old = Document("old", fp(2), time=written - 10 * TTL_S * 1000)  # --time-field
                index.add_documents([late, old])
                assert [m.doc_id for m in index.query_fingerprint(fp(1))] == ["late"]
                assert index.query_fingerprint(fp(2)).total == 0  # hidden at once
                assert index.due() == ["old"] and index.expire() == 1
        time.sleep(TTL_S / 2)
        for url in urls:
            with SimhashIndex.open(url) as index:
                index.write_cells(put=index.cells([Document("late", fp(1))]))  # fresh cells
        time.sleep(TTL_S / 2 + 1)  # the docs row of "late" has expired; its cells have not
        for url in urls:
            with SimhashIndex.open(url) as index:
                assert index.get("late") is None
                assert {doc_id for _, doc_id in index.index_cells()} == {"late"}
                assert index.query_fingerprint(fp(1)).total == 0
                assert index.query_fingerprints([fp(1)] * 6)[0].total == 0
        hbase_server.kill()
        hbase_server.restart()
        for url in urls:
            with SimhashIndex.open(url) as index:  # cells again: their row long expired
                index.write_cells(put=index.cells([Document("late", fp(1))]))
            _major_compact(url)
            with SimhashIndex.open(url) as index:
                assert {doc_id for _, doc_id in index.index_cells()} == {"late"}
                assert index.query_fingerprint(fp(1)).total == 0
                assert index.check_and_add([Document("new", fp(1), time=now_ms())])[0].total == 0


@given(
    st.lists(st.one_of(st.none(), st.integers(-(10**6), 10**6)), max_size=30),
    st.integers(-(10**6), 10**6),
    st.integers(1, 40),
)
def test_a_store_without_a_time_order_finds_the_oldest_by_a_scan(
    times: list[int | None], before: int, limit: int
) -> None:
    """HBase's due(): the documents before the time, oldest first (ties by id)."""
    docs = [Document(f"d{n:02}", fp(n), time=t) for n, t in enumerate(times)]
    aged = sorted((d.time, d.doc_id) for d in docs if d.time is not None and d.time < before)
    assert oldest_before(docs, before, limit) == [doc_id for _, doc_id in aged[:limit]]


def test_a_kill_mid_expiry_loses_nothing_that_should_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL after the third batch of an expiry: every document inside the
    retention is there with its cells, the index verifies clean, and running the
    expiry again finishes it."""
    folder = str(tmp_path / "i")
    at(monkeypatch, NOW - 10 * DAY_MS)  # nothing is due while writing
    times = [NOW - 2 * DAY_MS + n * 1000 for n in range(600)] + [NOW] * 400
    docs = docs_at(times)
    with SimhashIndex.open(folder, retain=DAY_S) as index:
        index.add_documents(docs)
    script = (
        "import os, signal\n"
        "from simhash_hbase import SimhashIndex\n"
        f"with SimhashIndex.open({folder!r}) as index:\n"
        "    def on_batch(n):\n"
        "        if n >= 300:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        f"    index.expire(now={NOW}, batch_size=100, on_batch=on_batch)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=300)
    assert done.returncode == -signal.SIGKILL
    stay = [d for d in docs if d.time == NOW]
    with SimhashIndex.open(folder) as index:
        held = {d.doc_id: d for d in index.documents()}
        assert len(held) == 700 and all(held[d.doc_id] == d for d in stay)  # oldest went
        assert verify(index).clean
        assert index.expire(now=NOW) == 300
        assert {d.doc_id: d for d in index.documents()} == {d.doc_id: d for d in stay}
        assert sorted(index.index_cells()) == sorted(index.cells(stay))
        assert verify(index).clean


def test_the_time_order_holds_through_parts_and_hot_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches whose new documents commit in parts (their docs rows ahead of the
    last commit) and hot rows (mass copies) keep the time order
    exact: due() names every document held, oldest first, and expire keeps the rest."""
    from simhash_hbase.store.lmdb import tuning

    for name, value in (("PART_BYTES", 1 << 12), ("PART_MIN_CELLS", 64)):
        monkeypatch.setattr(tuning, name, value)
    monkeypatch.setattr(tuning, "HOT", 16)
    monkeypatch.setattr(tuning, "CHECK_BYTES", 16 * 6)
    at(monkeypatch, NOW - 10 * DAY_MS)
    ahead: list[int] = []  # docs rows written ahead of a batch's last commit
    write_ahead = CompactBatch._write_fresh_docs

    def counted(batch: CompactBatch, *args: object) -> None:
        write_ahead(batch, *args)  # type: ignore[arg-type]
        ahead.append(len(batch.prewritten))

    monkeypatch.setattr(CompactBatch, "_write_fresh_docs", counted)
    rng = random.Random(40)
    held: dict[str, Document] = {}
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        for _ in range(6):
            batch = [
                Document(
                    f"d{rng.randrange(3000)}",
                    fp(7) if rng.random() < 0.2 else fp(rng.randrange(10**6)),  # some copies
                    time=NOW + rng.randrange(-3 * DAY_MS, 3 * DAY_MS),
                )
                for _ in range(800)
            ]
            index.add_documents(batch)
            held.update((d.doc_id, d) for d in batch)
        order = sorted(held.values(), key=lambda d: (d.time, d.doc_id))
        due = index.due(now=NOW + 100 * DAY_MS)
        assert sorted(due) == sorted(held)
        assert [held[i].time for i in due] == [d.time for d in order]
        index.expire(now=NOW)
        stay = {i: d for i, d in held.items() if d.time >= NOW - DAY_MS}  # type: ignore[operator]
        assert {d.doc_id: d for d in index.documents()} == stay
        assert verify(index).clean
        assert any(ahead)  # some docs rows were written ahead (the parts path)


def test_the_time_order_reads_by_spec_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/SPEC.md, "Retained indexes: times", with plain lmdb and struct: a key per
    document, its time + 2^63 (u64 big-endian) then its number (u32, as in names:
    fingerprint u64, then the id), no value; in time order."""
    import struct

    import lmdb

    at(monkeypatch, -62_135_596_800_000)  # the year 1: nothing written is due
    times = [NOW - 5, -62_135_596_800_000, 0, NOW + 7, 1]
    with SimhashIndex.open(str(tmp_path / "i"), retain=DAY_S) as index:
        index.add_documents(docs_at(times))
    env = lmdb.open(str(tmp_path / "i"), readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        keys = list(txn.cursor(env.open_db(b"times", txn=txn, create=False)))
        names = env.open_db(b"names", txn=txn, create=False)
        found = []
        for key, value in keys:
            assert len(key) == 12 and value == b""
            shifted, num = struct.unpack(">QI", key)
            name = txn.get(struct.pack(">I", num), db=names)
            found.append((shifted - 2**63, name[8:].decode()))
    env.close()
    assert found == sorted((t, f"d{n:04}") for n, t in enumerate(times))
