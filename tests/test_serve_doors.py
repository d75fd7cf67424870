"""`shdb serve`'s doors: a batch with a bad item answers the truth in the library,
the service and RemoteIndex alike; what one connection may make the server hold before
the token is read is bounded (a live server flooded by raw sockets); and the small
doors: query parameters, percent-encoding, the token, the hints."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from simhash_hbase import Document, RemoteIndex, SimhashIndex
from simhash_hbase.cli import app as cli_app
from simhash_hbase.errors import BatchRefused, InvalidInput, InvalidQuery, InvalidSetting
from simhash_hbase.serve.app import create_app
from simhash_hbase.serve.bounds import bounded
from simhash_hbase.serve.settings import Limits, ServeSettings

from .serve_server import Server, live_server
from .test_serve import OTHER, TEXT, TOKEN, _error

with warnings.catch_warnings():  # starlette asks for httpx2 on newer releases
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NO_TERMS = "！！！……。"
BATCH = [("p1", TEXT), ("p2", NO_TERMS), ("p3", OTHER)]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(ServeSettings(index=str(tmp_path / "ix")))) as c:
        yield c


# -- a batch with a bad item ------------------------------------------------------------
def test_the_library_writes_nothing_of_a_batch_with_a_bad_item(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        bad = [*BATCH, ("x" * 2000, TEXT), ("s", "中\ud800文"), ("n", None)]
        with pytest.raises(BatchRefused, match="4 of 6 items refused, nothing written") as info:
            index.check_and_add_texts(bad)  # type: ignore[arg-type]
        assert sorted(info.value.refused) == [1, 3, 4, 5]
        assert index.get("p1") is None and index.get("p3") is None
        again = index.check_and_add_texts([BATCH[0], BATCH[2]], always=False)
        assert again == [[], []]  # the truth: both new


def test_the_library_checks_every_document_before_writing_any(tmp_path: Path) -> None:
    docs = [Document("f1", 0xF0F0), Document("x" * 2000, 0xF0F1), Document("f3", 1 << 64)]
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        with pytest.raises(BatchRefused) as info:
            index.check_and_add(docs, always=True)
        assert sorted(info.value.refused) == [1, 2] and index.get("f1") is None


@pytest.mark.parametrize("call", ["add", "query"])
def test_a_lone_surrogate_is_a_library_error_not_a_unicode_one(tmp_path: Path, call: str) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        expected = InvalidQuery if call == "query" else InvalidInput
        with pytest.raises(expected, match="lone surrogate"):
            index.add("a", "中文\ud800" + TEXT) if call == "add" else index.query(TEXT + "\udfff")


def test_the_service_answers_a_bad_item_in_its_own_slot_or_writes_nothing(
    client: TestClient,
) -> None:
    items = [{"id": i, "text": t} for i, t in BATCH]
    whole = client.post("/v1/check-and-add?all_or_nothing=true", json=items).json()
    assert [row.get("error", {}).get("code") for row in whole] == [
        "not_written",
        "no_terms",
        "not_written",
    ]
    assert client.get("/v1/docs/p1").status_code == 404  # nothing written
    slots = client.post("/v1/check-and-add", json=items).json()  # the default: per slot
    assert [row.get("new") for row in slots] == [True, None, True]
    assert slots[1]["error"]["code"] == "no_terms"
    assert client.get("/v1/docs/p1").status_code == 200
    _error(client.post("/v1/add?all_or_nothing=maybe", json=items), 400, "invalid_parameter")


def test_remote_index_refuses_what_json_cannot_carry_before_sending() -> None:
    remote = RemoteIndex("http://127.0.0.1:9")  # never reached: refused before sending
    cases: list[Callable[[], object]] = [
        lambda: remote.add("a", b"bytes"),  # type: ignore[arg-type]
        lambda: remote.add("a", TEXT, {"tags": {"x"}}),
        lambda: remote.add("a", "中\ud800"),
        lambda: remote.add("a", TEXT, {"n": float("nan")}),
    ]
    for call in cases:
        with pytest.raises(InvalidInput, match="item 'a'"):
            call()
    with pytest.raises(BatchRefused) as info:
        remote.check_and_add_texts([("a", TEXT), ("b", b"x")])  # type: ignore[list-item]
    assert list(info.value.refused) == [1]
    for path_call in (remote.get, remote.remove):
        with pytest.raises(InvalidInput, match="lone surrogate"):
            path_call("a\udc80")


def test_remote_index_batches_write_nothing_when_an_item_is_refused(tmp_path: Path) -> None:
    """The issue's case: items 1 and 3 were written, item 2 raised, and a retry called
    1 and 3 "not new". Now nothing is written, and the retry without item 2 is true."""
    with (
        live_server(
            str(tmp_path / "ix"), tmp_path / "serve.log", "--fingerprint-workers", "0"
        ) as server,
        RemoteIndex(server.url) as remote,
    ):
        with pytest.raises(BatchRefused) as info:
            remote.check_and_add_texts(BATCH, always=False)
        assert list(info.value.refused) == [1] and "no usable terms" in str(info.value)
        assert remote.get("p1") is None and remote.get("p3") is None
        assert remote.check_and_add_texts([BATCH[0], BATCH[2]], always=False) == [[], []]


# -- the small doors ----------------------------------------------------------------------
@pytest.mark.parametrize("param", ["k=²", "limit=¹", "probes=⁵", "k=-1", "limit=1e3"])
def test_query_parameters_are_ascii_integers(client: TestClient, param: str) -> None:
    message = _error(client.post(f"/v1/check?{param}", json={"text": TEXT}), 400,
                     "invalid_parameter")  # fmt: skip
    assert param.split("=")[0] in message and "ASCII digits" in message


def test_a_path_id_is_read_from_its_percent_encoding_strictly(client: TestClient) -> None:
    client.post("/v1/add", json={"id": "\ufffd", "text": TEXT})
    client.post("/v1/add", json={"id": "é/x y", "text": OTHER})
    for method in ("GET", "DELETE"):
        message = _error(client.request(method, "/v1/docs/%ff"), 400, "invalid_id")
        assert "percent-encoded UTF-8" in message
    assert client.get("/v1/docs/%EF%BF%BD").status_code == 200  # U+FFFD itself is kept
    assert client.get("/v1/docs/%C3%A9%2Fx%20y").json()["id"] == "é/x y"
    assert client.delete("/v1/docs/%C3%A9%2Fx%20y").json() == {"id": "é/x y", "deleted": True}


def test_ndjson_sent_as_json_is_told_its_content_type(client: TestClient) -> None:
    lines = b'{"id":"a","text":"x"}\n{"id":"b","text":"y"}\n'
    message = _error(client.post("/v1/add", content=lines), 400, "malformed_json")
    assert "application/x-ndjson" in message
    utf16 = '{"text": "文本"}'.encode("utf-16")
    assert "UTF-16" in _error(client.post("/v1/check", content=utf16), 400, "malformed_json")


def test_a_token_no_header_can_carry_is_refused_at_start() -> None:
    with pytest.raises(InvalidSetting, match="printable ASCII"):
        ServeSettings(token="ключ-доступа-к-индексу").check()
    ServeSettings(token=TOKEN).check()


def test_the_text_limit_names_a_setting_serve_has(tmp_path: Path) -> None:
    settings = ServeSettings(index=str(tmp_path / "ix"), max_text_bytes=1024)
    with TestClient(create_app(settings)) as c:
        message = _error(c.post("/v1/check", json={"text": "字" * 400}), 413, "text_too_large")
    assert "--max-text-bytes" in message
    assert "--max-text-bytes" in CliRunner().invoke(cli_app, ["serve", "--help"]).output


# -- bounded before authentication --------------------------------------------------------
def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _flood(port: int, head: bytes, chunk: bytes, seconds: float, pause: float = 0.0) -> str:
    """Send ``head`` then ``chunk`` again and again for up to ``seconds``: how the
    server ended it (its answer's status line, or the connection reset), or "open" if
    it never did (a server that only stops reading is not an end)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(1)
        deadline = time.monotonic() + seconds
        try:
            sock.sendall(head)
            while time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):  # the server is not reading
                    sock.sendall(chunk)
                time.sleep(pause)
                if select.select([sock], [], [], 0)[0]:  # an answer, or the end
                    return sock.recv(100).split(b"\r\n")[0].decode() or "closed (EOF)"
        except ConnectionError as exc:  # reset or broken pipe: the server closed it
            return f"closed ({exc.__class__.__name__})"
        return "open"


FLOODS = {  # the head's bytes, what follows again and again, the pause between sends
    "an endless header line": (b"GET /v1/status HTTP/1.1\r\nX-Long: ", b"a" * 65536, 0.0),
    "headers by the thousand": (b"GET /v1/status HTTP/1.1\r\n", b"a: b\r\n" * 10000, 0.0),
    "a head a byte a second": (b"GET /v1/status HTTP/1.1\r\n", b"a", 1.0),
}


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("flood")
    with live_server(str(tmp / "ix"), tmp / "serve.log", "--fingerprint-workers", "0",
                     env={"SHDB_TOKEN": TOKEN}) as server:  # fmt: skip
        yield server


@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_flood_before_the_token_is_cut_off_and_others_are_answered(
    flooded: Server, flood: str
) -> None:
    """Each flood is ended by the server (431, or 408 for the slow head) within its
    bound, the server's RSS stays within 100 MB of idle, and a client with the token
    is answered while the flood runs."""
    idle = _rss_mb(flooded.proc.pid)
    outcome: list[str] = []
    head, chunk, pause = FLOODS[flood]
    thread = threading.Thread(
        target=lambda: outcome.append(_flood(flooded.port, head, chunk, 30, pause))
    )
    thread.start()
    time.sleep(0.5)
    answered = httpx.get(f"{flooded.url}/v1/status", headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=10)  # fmt: skip
    thread.join(60)
    assert answered.status_code == 200
    expected = "408 Request Timeout" if pause else "431 Request Header Fields Too Large"
    assert outcome and (expected in outcome[0] or outcome[0].startswith("closed")), outcome
    assert _rss_mb(flooded.proc.pid) - idle < 100


def test_a_long_request_target_is_refused(flooded: Server) -> None:
    outcome = _flood(flooded.port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n", b"", 5)
    assert "414 URI Too Long" in outcome or outcome.startswith("closed")


async def _echo_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that reads the whole body and answers its length."""
    if scope["type"] != "http":
        return
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size, more = size + len(message.get("body", b"")), message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


@pytest.fixture
def quick_limits() -> Iterator[int]:
    """uvicorn with the bounded protocol, head and body allowed a second each: the
    port it listens on (an ephemeral one)."""
    limits = Limits(head_seconds=1.0, body_seconds=1.0)
    config = uvicorn.Config(_echo_length, host="127.0.0.1", port=0, http=bounded(limits),
                            lifespan="off", log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield int(server.servers[0].sockets[0].getsockname()[1])
    server.should_exit = True
    thread.join(10)


def test_a_body_sent_a_byte_at_a_time_is_cut_off_after_its_bound(quick_limits: int) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    began = time.monotonic()
    outcome = _flood(quick_limits, head, b"a", 10, pause=0.2)
    assert outcome.startswith("closed") and time.monotonic() - began < 5, outcome
    with socket.create_connection(("127.0.0.1", quick_limits)) as sock:  # whole: answered
        sock.sendall(head + b"a" * 1000)
        assert sock.recv(100).startswith(b"HTTP/1.1 200")


def test_a_connection_that_sends_nothing_is_closed(quick_limits: int) -> None:
    with socket.create_connection(("127.0.0.1", quick_limits)) as sock:
        sock.settimeout(5)
        began = time.monotonic()
        assert sock.recv(100) == b""  # closed, without an answer: nothing was asked
        assert time.monotonic() - began < 4
