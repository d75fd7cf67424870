"""An hbase:// URL that reaches something other than a Thrift gateway (issue 43,
item 4): StoreUnavailable naming host:port and what answered, no traceback."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase import NotAuthenticated, SimhashIndex, StoreUnavailable
from simhash_hbase.cli.app import app

HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request"
TLS_ALERT = b"\x15\x03\x03\x00\x02\x02\x28"
APIS = ["", "&api=thrift1", "&api=thrift2"]


def _reply(data: bytes) -> Callable[[socket.socket], None]:
    def handle(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(data)

    return handle


def _close(conn: socket.socket) -> None:
    pass


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _silent(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.recv(65536)  # until the client gives up and closes


class FakeServer:
    """A server on an ephemeral port that answers each connection with ``handle``."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.handle = handle
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            with contextlib.suppress(OSError):
                self.handle(conn)

    def url(self, api: str = "") -> str:
        return f"hbase://127.0.0.1:{self.port}?prefix=x&timeout=1000{api}"


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], FakeServer]]:
    servers: list[FakeServer] = []

    def start(handle: Callable[[socket.socket], None]) -> FakeServer:
        servers.append(FakeServer(handle))
        return servers[-1]

    yield start
    for server in servers:
        server.sock.close()


KINDS = {
    "http": (_reply(HTTP), "an HTTP server answered"),
    "tls": (_reply(TLS_ALERT), "a TLS server answered"),
    "garbage": (_reply(bytes(range(64))), "not Thrift"),
    "close": (_close, "without answering"),
    "reset": (_reset, "without answering"),
    "silent": (_silent, "no answer within 1000 ms"),
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_wrong_server_is_store_unavailable_naming_it(serve, kind: str, api: str) -> None:
    handle, says = KINDS[kind]
    server = serve(handle)
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open(server.url(api))
    assert f"127.0.0.1:{server.port}" in str(info.value)
    assert says in str(info.value)


def test_an_http_answer_names_the_gateway_ports(serve) -> None:
    server = serve(_reply(HTTP))
    with pytest.raises(StoreUnavailable, match="serve or REST port") as info:
        SimhashIndex.open(server.url())
    assert "9090 (Thrift1)" in str(info.value) and "9091 (Thrift2)" in str(info.value)
    assert info.value.answered == "an HTTP server"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(min_size=1, max_size=200), api=st.sampled_from(APIS))
def test_any_bytes_answered_are_store_unavailable(serve, data: bytes, api: str) -> None:
    server = serve(_reply(data))
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open(server.url(api))
    assert f"127.0.0.1:{server.port}" in str(info.value)


@pytest.mark.parametrize("kind", ["http", "tls", "reset", "silent"])
def test_the_cli_says_it_without_a_traceback(serve, kind: str) -> None:
    server = serve(KINDS[kind][0])
    result = CliRunner().invoke(app, ["stats", "-i", server.url()])
    assert result.exit_code == 2, result.output
    assert f"127.0.0.1:{server.port}" in result.stderr
    assert "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)


SPNEGO = b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Negotiate\r\nContent-Length: 0\r\n\r\n"


def test_an_http_gateway_asking_for_kerberos_says_add_sasl(serve) -> None:
    server = serve(_reply(SPNEGO))
    url = f"{server.url()}&transport=http"
    with pytest.raises(NotAuthenticated, match="add sasl=gssapi to the index URL"):
        SimhashIndex.open(url)
    result = CliRunner().invoke(app, ["stats", "-i", url])
    assert result.exit_code == 2 and "kinit" in result.stderr and "Traceback" not in result.output


def test_sasl_without_a_ticket_says_kinit_before_sending_anything(
    serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("kerberos", reason="the kerberos extra")
    pytest.importorskip("puresasl", reason="the kerberos extra")
    (tmp_path / "krb5.conf").write_text("[libdefaults]\n  default_realm = SHDB.TEST\n")
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    monkeypatch.setenv("KRB5CCNAME", str(tmp_path / "no-cache"))
    server = serve(_silent)
    said = r"no Kerberos credentials for hbase/127\.0\.0\.1"
    with pytest.raises(NotAuthenticated, match=said) as i:
        SimhashIndex.open(f"{server.url()}&sasl=gssapi")
    assert "kinit" in str(i.value) and f"127.0.0.1:{server.port}" in str(i.value)
