"""HBase specifics: the on-disk format read by plain happybase, errors, URLs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from simhash_hbase import InvalidIndexUrl, SimhashIndex, StoreUnavailable
from simhash_hbase.errors import StoreClosed, StoreError
from simhash_hbase.store import open_store
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.settings import Gateway, parse_url
from simhash_hbase.store.hbase.store import HBaseStore

from .conftest import HBASE_APIS, fresh_hbase_url, gateway_address
from .test_cli import shdb

SPEC_5X10 = {  # docs/SPEC.md, written out independently of simhash_hbase.layout.scheme
    1: "AB",
    2: "AC",
    3: "AD",
    4: "AE",
    5: "BC",
    6: "BD",
    7: "BE",
    8: "CD",
    9: "CE",
    10: "DE",
}


def _spec_segments(fp: int) -> dict[str, tuple[int, int]]:
    return {
        "A": (fp >> 51, 13),
        "B": ((fp >> 38) & 0x1FFF, 13),
        "C": ((fp >> 25) & 0x1FFF, 13),
        "D": ((fp >> 12) & 0x1FFF, 13),
        "E": (fp & 0xFFF, 12),
    }


def _spec_cells(key: bytes, data: dict[bytes, bytes], buckets: bool) -> list[tuple[bytes, str]]:
    """(13-byte key, doc id) of a raw index row, by docs/SPEC.md alone: the rows layout
    has 13-byte rows and id qualifiers, the bucket layout 5-byte rows and qualifiers of
    the fingerprint (8 bytes) then the id."""
    cells = []
    for column, value in data.items():
        assert column.startswith(b"d:") and value == b""
        if buckets:
            assert len(key) == 5 and len(column) > 2 + 8
            cells.append((key + column[2:10], column[10:].decode()))
        else:
            assert len(key) == 13
            cells.append((key, column[2:].decode()))
    return cells


@pytest.mark.hbase
def test_tables_decode_by_spec_alone(hbase_api: str, hbase_url: str) -> None:
    """Thrift1 creates the rows layout (format 1), Thrift2 the bucket layout (format 2);
    both read back through a plain HBase client with nothing but docs/SPEC.md."""
    import happybase

    buckets = hbase_api == "thrift2"

    prefix = hbase_url.split("?prefix=")[1]
    fps = {"doc-1": 0x0123456789ABCDEF, "文档-2": 0xFEDCBA9876543210, "dup": 0x0123456789ABCDEF}
    with SimhashIndex.open(hbase_url) as index:
        for doc_id, fp in fps.items():
            index.add_fingerprint(doc_id, fp, meta={"n": 1})
    host, port = gateway_address("thrift1").rsplit(":", 1)
    conn = happybase.Connection(host, int(port), table_prefix=prefix)
    try:
        seen: dict[tuple[str, int], int] = {}
        for raw_key, data in conn.table("index").scan():
            for key, doc_id in _spec_cells(raw_key, data, buckets):
                field, flag = int.from_bytes(key[:4], "big"), key[4]
                fp = int.from_bytes(key[5:], "big")
                segs = _spec_segments(fp)
                (x, wx), (y, wy) = (segs[c] for c in SPEC_5X10[flag])
                assert field == ((x << wy) | y) << (32 - wx - wy)
                assert fps[doc_id] == fp
                seen[(doc_id, flag)] = fp
        assert len(seen) == 3 * 10
        docs = dict(conn.table("docs").scan())
        assert {k.decode(): int.from_bytes(v[b"f:h"], "big") for k, v in docs.items()} == fps
        assert json.loads(docs[b"doc-1"][b"f:meta"]) == {"n": 1}
        manifest = json.loads(conn.table("meta").row(b"manifest")[b"m:json"])
        assert manifest["scheme"] == "5x10"
        assert manifest["format_version"] == (2 if buckets else 1)
        assert manifest.get("hbase_index", "rows") == ("buckets" if buckets else "rows")
        families = conn.table("index").families()
        assert families[b"d"]["max_versions"] == 1
    finally:
        conn.close()


def test_unreachable_hbase_says_what_to_do() -> None:
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open("hbase://127.0.0.1:1?prefix=x&timeout=2000")
    assert "HBase at 127.0.0.1:1 is not reachable" in str(info.value)
    result = shdb("stats", "-i", "hbase://127.0.0.1:1?prefix=x&timeout=2000")
    assert result.exit_code == 2 and "scripts/hbase start" in result.stderr  # the CLI's hint
    assert "`scripts/hbase cluster start`: 9790/9791" in result.stderr  # the cluster's too


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("hbase://", "not of the form"),
        ("hbase://h:9090?prefix=bad name", "not of the form"),
        ("hbase://h:9090?colour=red", "unknown parameter 'colour'"),
        ("hbase://h:99999", "index URL"),
        ("hbase://h:9090?pool=0", "not of the form"),
        ("hbase://h:9090?api=thrift3", "api must be thrift1 or thrift2"),
    ],
)
def test_bad_hbase_urls(url: str, message: str) -> None:
    with pytest.raises(InvalidIndexUrl, match=message):
        SimhashIndex.open(url)


def test_a_url_without_a_port_names_the_thrift2_gateway() -> None:
    assert parse_url("hbase://h?prefix=p")["gateways"] == (Gateway("h", 9091),)  # issue 43


@pytest.mark.hbase
@pytest.mark.parametrize("layout", ["", "&layout=rows"])
def test_a_new_index_in_the_slow_layout_is_warned_about_first(
    hbase_api: str, hbase_url: str, layout: str, tmp_path: Path
) -> None:
    """As a user sees it (a process of its own: the warning is the library's log
    record, which Python prints on stderr when nothing else handles it)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "海量网页去重的局部敏感哈希"}) + "\n", "utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "simhash_hbase", "ingest", "--create", str(corpus),
         "-i", hbase_url + layout],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warned = "WARNING: creating" in result.stderr
    assert warned == (hbase_api == "thrift1" and not layout), result.stderr
    if warned:  # before the index was created, and with what to do
        assert result.stderr.index("WARNING") < result.stderr.index("created a new, empty index")
        assert "hbase://HOST:9091" in result.stderr and "&layout=rows" in result.stderr
    again = shdb("ingest", str(corpus), "-i", hbase_url + layout)
    assert again.exit_code == 0 and "WARNING" not in again.stderr  # said once, at creation


def test_shell_script_in_schema_is_generated_from_the_json() -> None:
    committed = resources.files("simhash_hbase.schema").joinpath("hbase-tables.hbase")
    assert committed.read_text(encoding="utf-8") == hbase_tables.shell_script("shdb"), (
        "regenerate with: shdb schema > schema/hbase-tables.hbase"
    )


def test_split_points_are_even_on_the_first_byte() -> None:
    points = hbase_tables.split_points("index")
    assert points == [bytes([16 * i, 0, 0, 0]) for i in range(1, 16)]
    assert hbase_tables.split_points("docs") == []


@pytest.mark.hbase
def test_the_gateway_protocol_is_detected_or_forced(hbase_api: str, hbase_url: str) -> None:
    with open_store(hbase_url) as store:
        assert isinstance(store, HBaseStore) and store.api == hbase_api
    with open_store(f"{hbase_url}&api={hbase_api}") as store:
        assert isinstance(store, HBaseStore) and store.api == hbase_api


@pytest.mark.hbase
def test_forcing_the_wrong_protocol_is_a_clear_error(hbase_api: str, hbase_url: str) -> None:
    other = "thrift1" if hbase_api == "thrift2" else "thrift2"
    with pytest.raises(StoreError, match=rf"HBase at [\d.:]+ does not serve the {other} protocol"):
        open_store(f"{hbase_url}&api={other}&timeout=5000")


@pytest.mark.hbase
def test_both_protocols_read_and_write_the_same_tables(hbase_url: str) -> None:
    prefix = hbase_url.split("?prefix=")[1]
    urls = {api: f"hbase://{gateway_address(api)}?prefix={prefix}" for api in HBASE_APIS}
    with SimhashIndex.open(urls["thrift1"]) as index:
        index.add_fingerprint("one", 0x0123456789ABCDEF, meta={"via": 1})
    with SimhashIndex.open(urls["thrift2"]) as index:
        index.add_fingerprint("two", 0x0123456789ABCDEE, meta={"via": 2})
        assert [m.doc_id for m in index.query_fingerprint(0x0123456789ABCDEF)] == ["one", "two"]
    with SimhashIndex.open(urls["thrift1"]) as index:
        assert [m.doc_id for m in index.query_fingerprint(0x0123456789ABCDEF)] == ["one", "two"]
        assert index.get("two") is not None and index.get("two").meta == {"via": 2}


@pytest.mark.hbase
def test_a_bucket_layout_index_is_refused_over_thrift1_and_rows_stay_rows(
    hbase_url: str,
) -> None:
    """The layout is the manifest's: a bucket index (new over Thrift2) is refused
    over Thrift1 with what to do; a rows index (new over Thrift1, or any index
    written before buckets existed) keeps its layout over Thrift2, layout= or not."""
    prefix = hbase_url.split("?prefix=")[1]
    urls = {api: f"hbase://{gateway_address(api)}?prefix={prefix}" for api in HBASE_APIS}
    with SimhashIndex.open(urls["thrift2"]) as index:
        index.add_fingerprint("one", 0x0123456789ABCDEF)
    with pytest.raises(StoreError, match=r"bucket layout.*Thrift2 gateway"):
        SimhashIndex.open(urls["thrift1"])
    with pytest.raises(InvalidIndexUrl, match="Thrift2 only"):
        open_store(urls["thrift1"] + "&layout=buckets")
    with fresh_hbase_url("thrift2") as other:
        thrift1 = other.replace(gateway_address("thrift2"), gateway_address("thrift1"))
        with SimhashIndex.open(other + "&layout=rows") as index:
            assert index.manifest["format_version"] == 1 and "hbase_index" not in index.manifest
            index.add_fingerprint("two", 0x0123456789ABCDEE)
        with SimhashIndex.open(other + "&layout=buckets") as index:
            assert [m.doc_id for m in index.query_fingerprint(0x0123456789ABCDEF)] == ["two"]
            assert [len(row) for row, _ in index.index_cells()] == [13] * 10
        with SimhashIndex.open(thrift1) as index:
            assert [m.doc_id for m in index.query_fingerprint(0x0123456789ABCDEF)] == ["two"]
        with open_store(other) as store:
            assert isinstance(store, HBaseStore) and store.layout == "rows"


@pytest.mark.hbase
def test_a_crash_in_the_bucket_layout_hides_documents_never_shows_stale_ones() -> None:
    """A writer killed after the docs row of a replacement, before its cells: the
    document is found by neither version (no cell disagrees with its docs row, so
    queries read no docs row), verify says what is missing, and --repair restores it."""
    from simhash_hbase.jobs.verify import verify
    from simhash_hbase.records import Document

    old, new = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    with fresh_hbase_url("thrift2") as url, SimhashIndex.open(url) as index:
        index.add_fingerprint("a", old)
        index.add_fingerprint("b", old ^ 1)
        with open_store(url) as store:
            assert isinstance(store, HBaseStore) and store.index_follows_docs
            with store.batch() as batch:  # what a writer killed mid-batch leaves
                held = batch.claim_docs({"a": Document("a", new)}, index.cells)
                batch.delete_index(index.cells([held["a"]]))
                batch.put_docs([Document("a", new)])
        assert [m.doc_id for m in index.query_fingerprint(old)] == ["b"]
        assert index.query_fingerprint(new).total == 0
        report = verify(index)
        assert (report.stale_cells, report.incomplete_documents) == (0, 1)
        assert verify(index, repair=True).repaired and verify(index).clean
        assert [m.doc_id for m in index.query_fingerprint(new)] == ["a"]
        assert [m.doc_id for m in index.query_fingerprint(old)] == ["b"]


def _count_row_page_reads(monkeypatch: pytest.MonkeyPatch, store: HBaseStore) -> list[int]:
    """A list that gains an item at each multi-get of bucket rows ``store`` makes."""
    calls: list[int] = []
    read = store.transport.get_row_pages

    def counted(*args: object) -> object:
        calls.append(1)
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(store.transport, "get_row_pages", counted)
    return calls


@pytest.mark.hbase
def test_a_hot_bucket_is_read_in_one_round_trip_once_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket holding a fingerprint past ``row_cap`` costs one more multi-get the
    first time (the page past it); after that the store asks for both pages at
    once. Same cells each time, and again once the bucket is no longer hot."""
    from simhash_hbase.layout import codec

    prefix = codec.encode_prefix(0x3131_3100, 4)
    hot = prefix + codec.fingerprint_to_bytes(0x5000)
    cells = [(hot, f"h{i:03d}") for i in range(100)]
    cells += [(prefix + codec.fingerprint_to_bytes(fp), f"o{fp}") for fp in (1, 0x5001, 0x9000)]
    with fresh_hbase_url("thrift2") as url, open_store(url) as store:
        assert isinstance(store, HBaseStore) and store.layout == "buckets"
        with store.batch() as batch:
            batch.put_index(cells)
        calls = _count_row_page_reads(monkeypatch, store)
        want = sorted(cells[:5] + cells[100:])
        for expected_calls in (2, 1, 1):
            calls.clear()
            (got,) = store.scan_prefixes_many([[prefix]], row_cap=5)
            assert sorted(got) == want and len(calls) == expected_calls
        with store.batch() as batch:  # no longer hot: the remembered plan still answers
            batch.delete_index(cells[3:100])
        (got,) = store.scan_prefixes_many([[prefix]], row_cap=5)
        assert sorted(got) == sorted(cells[:3] + cells[100:])


@pytest.mark.hbase
def test_a_bucket_query_is_one_multi_get_with_the_plain_paths_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one-query path of the bucket layout (:meth:`HBaseStore.scan_documents`)
    answers as the scans and the confirmation do (matches, total, exactness), for
    buckets of 0 to 40 copies of a fingerprint and limits below, at and above
    them; an ordinary query is one multi-get, and a capped bucket costs one more
    the first time only."""
    import random

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from simhash_hbase.records import Document

    with fresh_hbase_url("thrift2") as url, SimhashIndex.open(url) as index:
        store = index._store
        assert isinstance(store, HBaseStore) and store.layout == "buckets"
        calls = _count_row_page_reads(monkeypatch, store)
        examples = iter(range(10**6))

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            seed=st.integers(0, 2**32),
            copies=st.lists(st.integers(1, 40), min_size=0, max_size=4),
            limit=st.sampled_from([None, 1, 5, 10, 40]),
        )
        def check(seed: int, copies: list[int], limit: int | None) -> None:
            rng = random.Random(seed * 1_000_003 + next(examples))  # a fresh query each time
            n = rng.getrandbits(32)
            query = rng.getrandbits(64)
            docs = [
                Document(f"e{n}-{i}-{c}", near)
                for i, count in enumerate(copies)
                for near in [query ^ (1 << rng.randrange(64)) ** (i > 0)]
                for c in range(count)
            ]
            index.add_documents(docs)
            calls.clear()
            fast = index.query_fingerprint(query, limit=limit)
            first = len(calls)
            capped = limit is not None and max(copies, default=0) >= limit
            if sum(copies) < 32:  # no bucket holds more than a page (_CAPPED_PAGE)
                assert first == (2 if capped else 1)
            plain = index._finder.scanned(index._store, [query], 3, limit)[0]
            assert (list(fast), fast.total, fast.total_exact) == (
                list(plain),
                plain.total,
                plain.total_exact,
            )
            calls.clear()
            again = index.query_fingerprint(query, limit=limit)
            assert list(again) == list(fast) and again.total == fast.total
            assert len(calls) == 1 if sum(copies) < 32 else len(calls) <= first
            plain_path = index._finder.one(index._store, query, 3, limit) is None
            assert plain_path == capped

        check()


@pytest.mark.hbase
def test_migrate_copies_a_rows_index_into_the_bucket_layout() -> None:
    """`shdb migrate OLD NEW` between HBase indexes: the same documents (text, meta,
    sketch, bands) and answers, in the layout a new Thrift2 index gets."""
    from simhash_hbase.records import Document

    docs = [
        Document(f"d{i}", 0x0123456789ABCDEF ^ (1 << i), f"text {i}", {"n": i}) for i in range(5)
    ]
    docs += [
        Document("far", 0xFEDCBA9876543210, None, None, b"\x01" * 64, b"\x00\x00\x00\x07" * 25)
    ]
    with fresh_hbase_url("thrift2") as old, fresh_hbase_url("thrift2") as new:
        with SimhashIndex.open(old + "&layout=rows", nets="simhash+lsh") as index:
            index.add_documents(docs)
            before = index.query_fingerprint(0x0123456789ABCDEF, limit=None)
        result = shdb("migrate", old, new)
        assert result.exit_code == 0 and "copied 6 documents" in result.output
        assert shdb("migrate", old, new).exit_code != 0  # NEW holds an index now
        with SimhashIndex.open(new) as index:
            assert index.manifest["format_version"] == 2 and index.lsh is not None
            assert sorted(index.documents(), key=lambda d: d.doc_id) == sorted(
                docs, key=lambda d: d.doc_id
            )
            assert index.query_fingerprint(0x0123456789ABCDEF, limit=None) == before
            assert {len(row) for row, _ in index.index_cells()} == {13}
        with open_store(new) as store:
            assert isinstance(store, HBaseStore) and store.layout == "buckets"


@pytest.mark.hbase
def test_a_closed_store_says_so(hbase_url: str) -> None:
    store = open_store(hbase_url)
    store.close()
    for use in (
        lambda: store.get_meta("manifest"),
        lambda: store.scan_prefixes([b"\x00\x00\x00\x00\x01"]),
        lambda: store.get_docs(["a"]),
    ):
        with pytest.raises(StoreClosed, match="closed"):
            use()


def test_a_large_batch_is_sent_in_bounded_requests(
    hbase_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One call may carry a whole ingest batch; the gateway must never get it in one
    request (a Thrift2 gateway builds each request in its heap), and no cell is lost."""
    import simhash_hbase.store.hbase.store as hbase_store

    monkeypatch.setattr(hbase_store, "_FLUSH_CELLS", 50)
    with SimhashIndex.open(hbase_url):
        pass  # creates the tables
    with open_store(hbase_url) as store:
        assert isinstance(store, HBaseStore)
        sizes: list[int] = []
        mutate = store.transport.mutate

        def counting(table: bytes, puts: dict, deletes: dict, ts: int) -> None:  # type: ignore[type-arg]
            sizes.append(sum(map(len, puts.values())) + sum(map(len, deletes.values())))
            mutate(table, puts, deletes, ts)

        monkeypatch.setattr(store.transport, "mutate", counting)
        cells = [(bytes([i % 256]) * 5 + i.to_bytes(8, "big"), f"d{i}") for i in range(170)]
        with store.batch() as batch:
            batch.put_index(cells)
        assert max(sizes) <= 50 and sum(sizes) == 170
        prefixes = sorted({row[:5] for row, _ in cells})
        assert sorted(store.scan_prefixes(prefixes)) == sorted(cells)


_NO_OBSERVER = (
    "the test HBase does not run the multi-row read observer: restart it with "
    "scripts/hbase, or rebuild its image with docker/build"
)


def _sent_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gains the method name of every Thrift2 call sent from now on."""
    from simhash_hbase.store.hbase import thrift2 as hbase_thrift2

    sent: list[str] = []
    send = hbase_thrift2.Client._send

    def counted(self: hbase_thrift2.Client, api: str, **kwargs: object) -> None:
        sent.append(api)
        send(self, api, **kwargs)

    monkeypatch.setattr(hbase_thrift2.Client, "_send", counted)
    return sent


@pytest.mark.hbase
@pytest.mark.parametrize("server", ["observer", "two servers", "no observer", "regions moved"])
def test_bucket_reads_take_the_observer_path_and_its_fallbacks_answer_alike(
    monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """The test HBase loads the multi-row read observer (scripts/hbase, the Docker
    image): a query's bucket rows are one Thrift2 ``get``, no ``getMultiple``. The
    answers equal those of plain multi-gets for empty, ordinary, paged (past 1,000
    columns) and hot buckets, every row cap; so do those of a server without the
    observer (the store notices once and reads by ``getMultiple`` from then on), of
    one whose regions moved (rows it did not read are read by ``getMultiple``), and
    of rows on two region servers (a get each, sent at once)."""
    import random

    from simhash_hbase.layout import codec
    from simhash_hbase.store.hbase import thrift2 as hbase_thrift2

    rng = random.Random(24)
    prefixes = [codec.encode_prefix(rng.getrandbits(8) << 24 | i, 1 + i % 10) for i in range(12)]
    cells = []
    for i, prefix in enumerate(prefixes[:-2]):  # the last two stay empty
        width = {0: 1500, 1: 3}.get(i, rng.randrange(1, 60))  # a row of two pages
        fps = [rng.getrandbits(64) for _ in range(max(1, width // 4))]
        cells += [
            (prefix + codec.fingerprint_to_bytes(rng.choice(fps)), f"d{i}-{j}")
            for j in range(width)
        ]
    hot = prefixes[1] + codec.fingerprint_to_bytes(0x5000)
    cells += [(hot, f"h{j:03d}") for j in range(100)]
    queries = [prefixes[:10], prefixes[2:], prefixes[1:3], prefixes[-2:]]
    caps = [None, 1, 5, 40, None]

    def answers(url: str, plain: bool, sent: list[str] | None = None) -> list[object]:
        with open_store(url) as store:
            if sent is not None:
                sent.clear()  # the queries' calls only
            assert isinstance(store, HBaseStore) and isinstance(
                store.transport, hbase_thrift2.Thrift2Transport
            )
            if plain:
                store.transport.observer = False
            out: list[object] = []
            for cap in caps:
                for query in queries:
                    (cells_found,) = store.scan_prefixes_many([query], row_cap=cap)
                    documents = store.scan_documents(query, row_cap=cap)
                    out.append((sorted(cells_found), documents and sorted(documents[0])))
            return out

    with fresh_hbase_url("thrift2") as url:
        with open_store(url) as store, store.batch() as batch:
            batch.put_index(cells)
        expected = answers(url, plain=True)
        if server == "two servers":  # as if the lower half of the key space were elsewhere
            monkeypatch.setattr(
                hbase_thrift2._Regions, "server_of", lambda self, key: key < b"\x80"
            )
        elif server == "no observer":  # the request without its attribute: an ordinary get
            make_get = hbase_thrift2._observer_get
            monkeypatch.setattr(
                hbase_thrift2,
                "_observer_get",
                lambda *args: hbase_thrift2._IDL.TGet(row=make_get(*args).row),
            )
        elif server == "regions moved":  # the observer reads the first row of each request only
            observed = hbase_thrift2._observed

            def partly(result: object, starts: object, job: list[int]) -> object:
                answer = observed(result, starts, job)  # type: ignore[arg-type]
                assert answer is not None, _NO_OBSERVER
                assert not answer[1]
                return [p for p in answer[0] if p[0] == starts[job[0]][0]], job[1:]  # type: ignore[index]

            monkeypatch.setattr(hbase_thrift2, "_observed", partly)
        sent = _sent_calls(monkeypatch)
        with open_store(url) as store:
            sent.clear()
            assert store.scan_documents(queries[1]) is not None  # rows of one page each
            first = list(sent)
        assert answers(url, plain=False, sent=sent) == expected
    no_cap, cap_1 = expected[0], expected[len(queries)]  # the first query, uncapped and capped
    assert no_cap != cap_1 and any(a[1] is None for a in expected)  # caps did cut
    first = [call for call in first if call != "getAllRegionLocations"]  # cached after
    if server in ("observer", "two servers"):
        assert first == ["get"] * (1 if server == "observer" else 2), _NO_OBSERVER
        assert "getMultiple" not in sent
    elif server == "no observer":
        assert first == ["get", "getMultiple"]  # learnt once per store, then multi-gets only
        assert sent.count("get") == 1
    else:
        assert first == ["get", "getMultiple"]


@pytest.mark.hbase
def test_the_observer_answers_by_spec_alone() -> None:
    """docs/SPEC.md "Multi-row reads", written out here with struct and a raw Thrift2
    client: entries (repeated keys, a page size, a start qualifier, absent rows) in
    entry order, the marker first; a request of another version is an ordinary get."""
    import struct

    from simhash_hbase.store.hbase import thrift2 as hbase_thrift2

    idl = hbase_thrift2._IDL
    with fresh_hbase_url("thrift2") as url, open_store(url) as store:
        assert isinstance(store, HBaseStore)
        table = store.tables["index"]
        rows = {b"\x10aaaa": [b"q%02d" % i for i in range(6)], b"\xf0zzzz": [b"only"]}
        with store.batch() as batch:
            batch.put_index([(key + q, "x") for key, qs in rows.items() for q in qs])
        written = {
            r.row: [cv.qualifier for cv in r.columnValues]
            for r in store.transport._pool.call(  # type: ignore[attr-defined]
                "read", lambda c: c.getMultiple(table, [idl.TGet(row=k) for k in rows])
            )
        }
        entries = [
            (b"\x10aaaa", b""),
            (b"\x77none", b""),
            (b"\xf0zzzz", b""),
            (b"\x10aaaa", written[b"\x10aaaa"][3]),
        ]
        body = b"".join(
            struct.pack(">B", len(k)) + k + struct.pack(">H", len(s)) + s for k, s in entries
        )

        def get(version: bytes) -> list[tuple[bytes, bytes]]:
            tget = idl.TGet(
                row=b"\x10aaaa", attributes={b"shdb.rows": version + struct.pack(">i", 2) + body}
            )
            result = store.transport._pool.call("read", lambda c: c.get(table, tget))  # type: ignore[attr-defined]
            return [(cv.qualifier, cv.value) for cv in result.columnValues]

        reply = get(b"\x01")
        assert reply[0] == (b"\x00shdb-multiget-v1", b"")  # the marker: every entry read
        q = written[b"\x10aaaa"]
        assert reply[1:] == [
            (struct.pack(">H", 0) + q[0], b""),
            (struct.pack(">H", 0) + q[1], b""),
            (struct.pack(">H", 2) + written[b"\xf0zzzz"][0], b""),
            (struct.pack(">H", 3) + q[3], b""),
            (struct.pack(">H", 3) + q[4], b""),
        ]
        assert get(b"\x02") == [(c, b"") for c in q]  # unknown version: the anchor row itself
