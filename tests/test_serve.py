"""`shdb serve`, in process: every endpoint on every store, the error shape, the
bounds, the token, the queue's 429 and the worker's group commit."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.layout.prepare import Preparer
from simhash_hbase.records import Document, fingerprint_to_hex
from simhash_hbase.serve.app import create_app
from simhash_hbase.serve.settings import ServeSettings
from simhash_hbase.serve.worker import QueueFull, StoreWorker, Terms, Write
from simhash_hbase.text.extract import to_text

with warnings.catch_warnings():  # starlette asks for httpx2 on newer releases
    warnings.simplefilter("ignore")
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

TEXT = (
    "今天北京天气晴朗，气温适宜，许多市民走出家门，到公园散步游玩。"
    "公园里的花开得正好，孩子们在草地上奔跑，老人们在树下下棋聊天。"
) * 6
OTHER = "上海证券交易所今日发布公告，多家上市公司披露年度报告，营业收入同比增长。" * 6
TOKEN = "s3cret-token-of-16+chars"


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(ServeSettings(index=store_url))) as c:
        yield c


def _error(response: object, status: int, code: str) -> str:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"} and body["error"]["status"] == status
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text  # type: ignore[attr-defined]
    return str(body["error"]["message"])


def test_check_and_add_says_new_once(client: TestClient) -> None:
    first = client.post("/v1/check-and-add", json={"id": "a", "text": TEXT}).json()
    assert first["new"] is True and first["matches"] == [] and first["total"] == 0
    second = client.post("/v1/check-and-add", json={"id": "b", "text": TEXT}).json()
    assert second["new"] is False
    assert [(m["id"], m["distance"]) for m in second["matches"]] == [("a", 0)]
    assert set(second["matches"][0]) == {"id", "distance", "similarity", "fingerprint", "time"}
    assert second["total"] == 1 and second["total_exact"] is True
    assert client.get("/v1/docs/b").status_code == 404  # a copy is not written


def test_add_writes_and_check_finds(client: TestClient) -> None:
    a = client.post("/v1/add", json={"id": "a", "text": TEXT, "meta": {"u": 1}, "time": 1}).json()
    b = client.post("/v1/add", json={"id": "b", "text": TEXT, "store_text": True}).json()
    assert (a["new"], b["new"]) == (True, False)  # added either way; new says if near
    found = client.post("/v1/check", json={"text": TEXT}).json()
    assert "new" not in found and "id" not in found
    assert sorted(m["id"] for m in found["matches"]) == ["a", "b"]
    assert client.post("/v1/check", json={"text": OTHER}).json()["matches"] == []
    doc = client.get("/v1/docs/a").json()
    assert doc == {
        "id": "a",
        "fingerprint": a["fingerprint"],
        "text": None,
        "meta": {"u": 1},
        "time": "1970-01-01T00:00:01Z",
    }
    assert client.get("/v1/docs/b").json()["text"] == TEXT


def test_fingerprints_and_limit(client: TestClient) -> None:
    fp = 0x0123456789ABCDEF
    items = [{"id": f"d{i}", "fingerprint": fingerprint_to_hex(fp ^ (1 << i))} for i in range(5)]
    out = client.post("/v1/add", json=items).json()
    assert [r["new"] for r in out] == [True, False, False, False, False]
    found = client.post(
        "/v1/check?limit=2&k=1", json={"fingerprint": fingerprint_to_hex(fp)}
    ).json()
    assert found["total"] == 5 and len(found["matches"]) == 2
    assert all(m["distance"] == 1 for m in found["matches"])


def test_html_is_read_as_its_text(client: TestClient) -> None:
    page = (
        "<html><head><title>t</title><script>var x=1;</script></head>"
        f"<body><p>{TEXT}</p></body></html>"
    )
    client.post("/v1/add", json={"id": "plain", "text": TEXT})
    found = client.post("/v1/check?probes=0", json={"text": page, "format": "html"}).json()
    assert [m["id"] for m in found["matches"]] == ["plain"]


def test_html_is_read_in_the_index_s_own_html_mode(tmp_path: Path) -> None:
    """An index built with --html raw keeps a page's navigation: the service too."""
    url = str(tmp_path / "raw")
    SimhashIndex.open(url, params={"html": "raw"}).close()
    page = f"<html><body><nav>{OTHER}</nav><article><p>{TEXT}</p></article></body></html>"
    with TestClient(create_app(ServeSettings(index=url))) as c:
        added = c.post("/v1/add", json={"id": "p", "text": page, "format": "html"}).json()
    with SimhashIndex.open(url, readonly=True) as index:
        raw = index.fingerprint(index.to_text(page, "html"))
        main = index.fingerprint(to_text(page, "html", html="main"))
    assert raw != main
    assert added["fingerprint"] == f"{raw:016x}"


def test_batches_answer_per_item_and_keep_good_items(client: TestClient) -> None:
    body = [{"id": "a", "text": TEXT}, {"id": "b"}, {"id": "c", "text": OTHER}, "x"]
    out = client.post("/v1/check-and-add", json=body).json()
    assert [r.get("new") for r in out] == [True, None, True, None]
    assert out[1]["error"]["code"] == "invalid_item" and out[3]["error"]["code"] == "invalid_item"
    assert client.get("/v1/docs/c").status_code == 200


def test_ndjson_in_and_out(client: TestClient) -> None:
    lines = b'{"id":"n1","fingerprint":"ff"}\n\n{"id":"n2","fingerprint":"ff"}\n{oops\n'
    r = client.post(
        "/v1/check-and-add", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert r.headers["content-type"].startswith("application/x-ndjson")
    rows = [orjson.loads(line) for line in r.content.splitlines()]
    assert [row.get("new") for row in rows] == [True, False, None]
    assert "line 4" in rows[2]["error"]["message"]  # blank lines count: an editor's numbers


def test_delete(client: TestClient) -> None:
    client.post("/v1/add", json={"id": "a/b c", "text": TEXT})
    assert client.delete("/v1/docs/a%2Fb%20c").json() == {"id": "a/b c", "deleted": True}
    _error(client.delete("/v1/docs/a%2Fb%20c"), 404, "not_found")
    _error(client.get("/v1/docs/a%2Fb%20c"), 404, "not_found")
    assert client.post("/v1/check", json={"text": TEXT}).json()["matches"] == []


def test_operations_endpoints(client: TestClient) -> None:
    client.post("/v1/add", json={"id": "a", "text": TEXT})
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    metrics = client.get("/metrics").text
    for name in (
        "shdb_requests_total",
        "shdb_request_seconds_bucket",
        "shdb_batch_items_bucket",
        "shdb_documents_total",
        "shdb_commit_documents_bucket",
        "shdb_store_errors",
    ):
        assert name in metrics
    status = client.get("/v1/status").json()
    hbase = status["url"].startswith("hbase://")
    assert status["index"]["documents"] == (None if hbase else 1)  # no full scans on HBase
    assert status["index"]["scheme"] == "5x10" and status["settings"]["k"] == 3
    assert status["recent"] and status["recent"][-1]["rate"] > 0
    assert "<form" in client.get("/").text
    spec = client.get("/openapi.json").json()
    assert {"/v1/check", "/v1/add", "/v1/check-and-add", "/v1/docs/{doc_id}"} <= set(spec["paths"])
    assert "/v1/check-and-add" in client.get("/docs").text


def test_errors_share_one_shape(client: TestClient) -> None:
    _error(client.post("/v1/check", content=b"{not json"), 400, "malformed_json")
    _error(client.post("/v1/check", json={"text": TEXT, "fingerprint": "ff"}), 400, "invalid_item")
    _error(client.post("/v1/add", json={"text": TEXT}), 400, "invalid_item")
    _error(client.post("/v1/check", json={"text": TEXT, "colour": 1}), 400, "invalid_item")
    _error(client.post("/v1/check", json={"fingerprint": "xyz"}), 400, "invalid_input")
    _error(client.post("/v1/check", json={"text": "，。！"}), 422, "no_terms")
    _error(client.post("/v1/check?k=9", json={"text": TEXT}), 400, "invalid_input")
    _error(client.post("/v1/check?limit=0", json={"text": TEXT}), 400, "invalid_parameter")
    _error(client.post("/v1/add", json={"id": "x" * 2000, "text": TEXT}), 400, "invalid_input")
    _error(client.post("/v1/add", json=[]), 400, "empty_batch")
    _error(client.get("/v1/nothing"), 404, "not_found")
    _error(client.get("/v1/check"), 405, "method_not_allowed")


def test_bounds(tmp_path: Path) -> None:
    settings = ServeSettings(
        index=str(tmp_path / "ix"), max_items=3, max_body_bytes=4096, max_text_bytes=1024
    )
    with TestClient(create_app(settings)) as c:
        _error(c.post("/v1/check", json=[{"fingerprint": "1"}] * 4), 413, "batch_too_large")
        _error(c.post("/v1/check", content=b"[" + b" " * 5000 + b"]"), 413, "body_too_large")
        _error(c.post("/v1/check", json={"text": "字" * 400}), 413, "text_too_large")


def test_token(tmp_path: Path) -> None:
    with TestClient(create_app(ServeSettings(index=str(tmp_path / "ix"), token=TOKEN))) as c:
        for auth in (None, "Bearer wrong", f"Basic {TOKEN}"):
            headers = {"Authorization": auth} if auth else {}
            r = c.post("/v1/check", json={"text": TEXT}, headers=headers)
            _error(r, 401, "unauthorized")
            assert r.headers["www-authenticate"] == "Bearer"
        _error(c.get("/metrics"), 401, "unauthorized")
        ok = c.post("/v1/check", json={"text": TEXT}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200


def test_public_bind_needs_a_token() -> None:
    from simhash_hbase.errors import InvalidSetting

    for host in ("127.0.0.1", "localhost", "::1", "127.3.4.5"):
        ServeSettings(host=host).check()
    for host in ("0.0.0.0", "10.1.2.3", "example.org", "::"):
        with pytest.raises(InvalidSetting, match="token"):
            ServeSettings(host=host).check()
        ServeSettings(host=host, token=TOKEN).check()
    with pytest.raises(InvalidSetting, match="shorter"):
        ServeSettings(token="short").check()


def test_bugs_answer_500_without_a_traceback(tmp_path: Path) -> None:
    app = create_app(ServeSettings(index=str(tmp_path / "ix")))
    with TestClient(app, raise_server_exceptions=False) as c:
        svc = app.state.service
        svc.index = None  # a broken state: the handler fails an assertion
        msg = _error(c.post("/v1/check", json={"text": TEXT}), 500, "internal")
        assert "assert" not in msg.lower()


def test_full_queue_answers_429(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        worker = StoreWorker(index, capacity=10, group=5)  # not started: nothing drains

        async def fill() -> int:
            futures = [
                worker.submit(Write([Document(f"d{i}", i)], [[i]], Terms(3, 10), True))
                for i in range(10)
            ]
            with pytest.raises(QueueFull) as exc:
                worker.submit(Write([Document("x", 99)], [[99]], Terms(3, 10), False))
            worker.start()
            await asyncio.gather(*futures)  # the queue drains once the worker runs
            worker.stop()
            return exc.value.retry_after

        assert asyncio.run(fill()) >= 1
        assert sum(1 for _ in index.documents()) == 10


def test_429_reaches_the_client(tmp_path: Path) -> None:
    app = create_app(ServeSettings(index=str(tmp_path / "ix"), queue_documents=2))
    with TestClient(app) as c:
        r = c.post("/v1/add", json=[{"id": f"d{i}", "fingerprint": "1"} for i in range(3)])
        assert r.status_code == 200  # one request alone may exceed the queue: it is not refused
        app.state.service.worker._waiting = 2  # as if two documents were queued
        r = c.post("/v1/add", json={"id": "x", "fingerprint": "1"})
        _error(r, 429, "queue_full")
        assert int(r.headers["retry-after"]) >= 1
        app.state.service.worker._waiting = 0


@given(
    ops=st.lists(st.tuples(st.sampled_from(["add", "cna", "del"]), st.integers(0, 3)), max_size=30)
)
def test_grouped_writes_equal_sequential_ones(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """Writes queued together (one group, one commit per run) answer as if one by one."""

    def run(grouped: bool) -> tuple[list[object], dict[str, int]]:
        path = tmp_path_factory.mktemp("w") / "ix"
        with SimhashIndex.open(str(path)) as index:
            worker = StoreWorker(index, group=1000 if grouped else 1)

            async def go() -> list[object]:
                futures = []
                for kind, n in ops:
                    if kind == "del":
                        from simhash_hbase.serve.worker import Delete

                        futures.append(worker.submit(Delete(f"d{n}")))
                    else:
                        doc = Document(f"d{n}", 0xABC ^ n)
                        futures.append(
                            worker.submit(
                                Write([doc], [[doc.fingerprint]], Terms(3, 10), kind == "add")
                            )
                        )
                worker.start()
                out = await asyncio.gather(*futures)
                worker.stop()
                return [
                    r if isinstance(r, bool) else [[m.doc_id for m in ms] for ms in r] for r in out
                ]

            answers = asyncio.run(go())
            return answers, {d.doc_id: d.fingerprint for d in index.documents()}

    assert run(grouped=True) == run(grouped=False)


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Starlette]]:
    """A service that fingerprints texts in one worker process."""
    url = str(tmp_path_factory.mktemp("pooled") / "ix")
    app = create_app(ServeSettings(index=url, fingerprint_workers=1))
    with TestClient(app) as c:
        yield c, app


_texts = st.lists(
    st.one_of(
        st.text(max_size=300),
        st.text(alphabet=st.sampled_from("今天北京天气晴朗市民公园，。 \nab1<p>"), max_size=300),
        st.sampled_from([TEXT, OTHER, "   ", f"<p>{TEXT}</p>"]),
    ),
    min_size=1,
    max_size=8,
)


@given(texts=_texts)
def test_fingerprinting_workers_answer_as_the_event_loop_does(
    pooled: tuple[TestClient, Starlette], texts: list[str]
) -> None:
    """Each text's answer (fingerprint, or its no-terms error) is the one the
    event loop's own fingerprinting gives, in item order."""
    client, app = pooled
    svc = app.state.service
    assert svc.preparers is not None and svc.preparers.size == 1
    items = [{"text": t} for t in texts]
    got = client.post("/v1/check?probes=3", json=items).json()
    preparer = Preparer(svc.index.fingerprinter, svc.index.minhasher, 3)
    here = preparer.prints_of([to_text(t, "auto", html=svc.index.params.html) for t in texts])
    for answer, want in zip(got, here, strict=True):
        if isinstance(want, str):
            assert answer["error"]["code"] == "no_terms"
        else:
            assert answer["fingerprint"] == fingerprint_to_hex(want[0][0])


def test_a_batch_larger_than_a_worker_chunk_keeps_its_order(
    pooled: tuple[TestClient, Starlette],
) -> None:
    """A batch goes to the workers in chunks; the answers come back in item order."""
    from simhash_hbase.serve.prepare import CHUNK_TEXTS

    client, app = pooled
    svc = app.state.service
    texts = [" " if i % 37 == 0 else TEXT[i % 50 :] + OTHER[: i % 70] for i in range(150)]
    assert len(texts) > 2 * CHUNK_TEXTS
    got = client.post("/v1/check?probes=2", json=[{"text": t} for t in texts]).json()
    preparer = Preparer(svc.index.fingerprinter, svc.index.minhasher, 2)
    here = preparer.prints_of([to_text(t, "auto", html=svc.index.params.html) for t in texts])
    assert [a.get("fingerprint") or a["error"]["code"] for a in got] == [
        "no_terms" if isinstance(w, str) else fingerprint_to_hex(w[0][0]) for w in here
    ]


def test_a_dead_fingerprinting_worker_leaves_the_pool(tmp_path: Path) -> None:
    """kill -9 of the worker: the service fingerprints in process from then on."""
    app = create_app(ServeSettings(index=str(tmp_path / "ix"), fingerprint_workers=1))
    with TestClient(app) as c:
        first = c.post("/v1/check-and-add", json={"id": "a", "text": TEXT}).json()
        pool = app.state.service.preparers
        (worker,) = pool._workers
        worker.proc.kill()
        worker.proc.wait()
        for _ in range(100):  # the loop notices the closed socket
            if pool.size == 0:
                break
            time.sleep(0.05)
        assert pool.size == 0
        again = c.post("/v1/check-and-add", json={"id": "b", "text": TEXT}).json()
        assert again["new"] is False and again["fingerprint"] == first["fingerprint"]
