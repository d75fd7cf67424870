"""Index lifecycle (docs/lifecycle.md): every document knows when it arrived."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidInput
from simhash_hbase.jobs.migrate import migrate
from simhash_hbase.records import (
    MAX_TIME_MS,
    MIN_TIME_MS,
    BadRecord,
    Document,
    Problem,
    Record,
    now_ms,
    parse_time,
    time_to_text,
)
from simhash_hbase.store.lmdb.store import EmbeddedStore
from simhash_hbase.text.readers import SourceOptions, read_sources

from .test_index import ARTICLE, OTHER

runner = CliRunner()
T0 = "2026-01-01T00:00:00Z"
T0_MS = 1_767_225_600_000


def shdb(*args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=stdin, catch_exceptions=False)


@given(st.integers(MIN_TIME_MS, MAX_TIME_MS))
def test_a_time_reads_back_from_its_text_and_its_seconds(ms: int) -> None:
    """RFC 3339 as shdb writes it, and seconds since the epoch, both give the time."""
    text = time_to_text(ms)
    assert text is not None and text.endswith("Z")
    assert parse_time(text) == ms
    if ms % 1000 == 0:
        assert parse_time(ms // 1000) == parse_time(str(ms // 1000)) == ms


@pytest.mark.parametrize(
    "value", ["yesterday", "2026-01-01T00:00:00", "", "nan", "1e300", float("inf"), True, [1]]
)
def test_a_bad_time_says_what_to_give(value: object) -> None:
    with pytest.raises(InvalidInput, match="time"):
        parse_time(value)


def test_library_add_stamps_now_or_the_given_time(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        before = now_ms()
        index.add("now", ARTICLE)
        index.add("then", OTHER, time=T0)
        index.add_fingerprint("stamped", 6)
        index.add_documents([Document("fp", 5, time=T0_MS + 500)])
        got = index.get_many(["now", "then", "fp", "stamped"])
        assert before <= got["now"].time <= now_ms()  # type: ignore[operator]
        assert before <= got["stamped"].time <= now_ms()  # type: ignore[operator]
        assert got["then"].time == T0_MS
        assert got["fp"].time == T0_MS + 500
        assert got["then"].to_json()["time"] == T0
        (hit,) = index.query(OTHER, limit=1)
        assert hit.doc_id == "then" and hit.time == T0_MS
        (hit,) = index.query_fingerprint(5, limit=1)
        assert hit.time == T0_MS + 500
        with pytest.raises(InvalidInput, match="time"):
            index.add("bad", ARTICLE, time="soon")


def test_documents_stored_before_times_have_none(tmp_path: Path) -> None:
    """A docs row without ``f:t`` (an index written before times) reads as no time,
    in ``get`` and in matches; migrate keeps each document's time or its absence."""
    old, new = tmp_path / "old", tmp_path / "new"
    EmbeddedStore(old, format=1).close()
    with SimhashIndex.open(str(old)) as index:
        index.add_documents([Document("untimed", 9), Document("timed", 9 ^ 1, time=T0_MS)])
        index.add("text", ARTICLE, store_text=True, time=T0)
        assert index.get("untimed") == Document("untimed", 9)
        assert [(m.doc_id, m.time) for m in index.query_fingerprint(9)] == [
            ("untimed", None),
            ("timed", T0_MS),
        ]
        held = {d.doc_id: d for d in index.documents()}
    assert migrate(str(old), str(new)) == 3
    with SimhashIndex.open(str(new), readonly=True) as index:
        assert index.stats()["format"] == 4
        assert {d.doc_id: d for d in index.documents()} == held


def _read(path: Path, **opts: object) -> list[Record | BadRecord]:
    return list(read_sources([str(path)], SourceOptions(**opts)))  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_time_field_is_read_and_a_bad_one_names_its_line(tmp_path: Path, fmt: str) -> None:
    rows = [
        {"id": "a", "text": "x", "at": T0, "src": "s"},
        {"id": "b", "text": "y", "at": "soon", "src": "s"},
        {"id": "c", "text": "z", "at": "1767225600", "src": "s"},
        {"id": "d", "text": "w", "src": "s"},
    ]
    path = tmp_path / f"in.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        head = "id,text,at,src\n"
        path.write_text(head + f"a,x,{T0},s\nb,y,soon,s\nc,z,1767225600,s\nd,w,,s\n")
    a, b, c, d = _read(path, format=fmt, time_field="at")
    assert isinstance(a, Record) and a.time == T0_MS and a.meta == {"src": "s"}
    assert isinstance(b, BadRecord) and b.where.endswith(":3" if fmt == "csv" else ":2")
    assert b.problem is Problem.WRONG_TYPE and "'at'" in b.reason and "RFC 3339" in b.reason
    assert isinstance(c, Record) and c.time == T0_MS
    assert isinstance(d, BadRecord)  # no time (JSON: no field; CSV: an empty one)
    plain = _read(path, format=fmt)  # without --time-field the field is meta
    assert isinstance(plain[0], Record) and plain[0].time is None
    assert plain[0].meta == {"at": T0, "src": "s"}


def test_cli_ingest_time_field_get_and_query_show_times(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"id": "a", "text": ARTICLE, "published": T0}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    ingest = shdb("ingest", "--create", str(path), "-i", store_url, "--time-field", "published")
    assert ingest.exit_code == 0, ingest.output
    got = json.loads(shdb("get", "a", "--json", "-i", store_url).stdout)
    assert got["time"] == T0 and got["meta"] is None
    assert shdb("get", "a", "-i", store_url).stdout.splitlines()[1].endswith("\t" + T0)
    found = shdb("query", ARTICLE, "--json", "-i", store_url)
    assert json.loads(found.stdout)["matches"][0]["time"] == T0
    shdb("ingest", str(path), "-i", store_url)  # no --time-field: it arrives now
    got = json.loads(shdb("get", "a", "--json", "-i", store_url).stdout)
    assert got["time"] != T0 and got["meta"] == {"published": T0}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[object]:
    from starlette.testclient import TestClient

    from simhash_hbase.serve.app import create_app
    from simhash_hbase.serve.settings import ServeSettings

    settings = ServeSettings(index=str(tmp_path / "ix"), fingerprint_workers=0)
    with TestClient(create_app(settings)) as c:
        yield c


def test_serve_takes_and_returns_times(client) -> None:  # type: ignore[no-untyped-def]
    item = {"id": "a", "text": ARTICLE, "time": T0}
    assert client.post("/v1/add", json=item).status_code == 200
    client.post("/v1/add", json={"id": "f", "fingerprint": "00000000000000ff", "time": 0})
    assert client.get("/v1/docs/a").json()["time"] == T0
    assert client.get("/v1/docs/f").json()["time"] == "1970-01-01T00:00:00Z"
    match = client.post("/v1/check", json={"text": ARTICLE}).json()["matches"][0]
    assert (match["id"], match["time"]) == ("a", T0)
    bad = client.post("/v1/add", json={"id": "b", "text": ARTICLE, "time": "soon"})
    assert bad.status_code == 400 and "time" in bad.json()["error"]["message"]


def _fingerprints(n: int) -> list[Document]:
    return [
        Document(f"k{i:05d}", (i * 0x9E3779B97F4A7C15) % (1 << 64), time=i * 1000) for i in range(n)
    ]


def test_remove_many_removes_every_cell_and_is_idempotent(store_url: str) -> None:
    """Bulk removal in batches smaller than the list: the ids held are removed with
    all their cells (verify clean), the others are named missing; run again (a run
    cut short), it removes nothing more and stays clean."""
    from simhash_hbase.jobs.verify import verify

    docs = _fingerprints(300)
    with SimhashIndex.open(store_url) as index:
        index.add_documents(docs)
        index.add("text", ARTICLE)
        wanted = [d.doc_id for d in docs[::3]] + ["never-held", "text"]
        removed = index.remove_many(wanted, batch_size=7)
        assert removed == [i for i in wanted if i != "never-held"]
        assert index.remove_many(wanted, batch_size=7) == []
        assert verify(index).clean
        assert index.query_fingerprint(docs[0].fingerprint, 0) == []
        assert [m.doc_id for m in index.query_fingerprint(docs[1].fingerprint, 0)] == ["k00001"]
        assert index.stats()["documents"] in (None, 200)


def test_cli_remove_by_file_stdin_time_and_prefix(tmp_path: Path) -> None:
    url = str(tmp_path / "ix")
    with SimhashIndex.open(url) as index:
        index.add_documents(_fingerprints(100))
        index.add_documents([Document("z-untimed", 5)])
    ids = tmp_path / "ids.txt"
    ids.write_text("k00000\nk00001\n\nnope\n", encoding="utf-8")
    out = shdb("remove", "--ids", str(ids), "-i", url, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == {"asked": 3, "removed": 2}
    out = shdb("remove", "--ids", "-", "-i", url, stdin="k00002\r\nk00003\n")
    assert out.exit_code == 0 and "removed 2 of 2" in out.stderr
    # before 00:00:50 (epoch seconds): k00004..k00049; the untimed document is kept
    out = shdb("remove", "--before", "50", "-i", url, "--json")
    assert json.loads(out.stdout) == {"asked": 46, "removed": 46}
    out = shdb("remove", "--id-prefix", "k0009", "--before", "1970-01-01T00:01:35Z", "-i", url)
    assert "removed 5 of 5" in out.stderr  # k00090..k00094
    with SimhashIndex.open(url, readonly=True) as index:
        left = sorted(d.doc_id for d in index.documents())
    assert left == [f"k{i:05d}" for i in range(50, 90)] + [f"k{i:05d}" for i in range(95, 100)] + [
        "z-untimed"
    ]
    assert shdb("verify", "-i", url).exit_code == 0
    assert shdb("remove", "a", "--ids", str(ids), "-i", url).exit_code == 2


def test_serve_batch_delete(client) -> None:  # type: ignore[no-untyped-def]
    items = [{"id": f"d{i}", "fingerprint": f"{i:016x}"} for i in range(5)]
    client.post("/v1/add", json=items)
    out = client.request("DELETE", "/v1/docs", json=["d1", "d3", "nope"])
    assert out.json() == {"removed": ["d1", "d3"], "missing": ["nope"]}
    assert client.get("/v1/docs/d1").status_code == 404
    assert client.get("/v1/docs/d2").status_code == 200
    assert client.request("DELETE", "/v1/docs", json=[1]).status_code == 400
    assert client.delete("/v1/docs/d2").json() == {"id": "d2", "deleted": True}
