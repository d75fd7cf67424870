"""Several gateways in one hbase:// URL, the wire options (TLS, framed, HTTP,
compact), retries and the per-gateway figures, without HBase: real sockets where
connections are opened, fake clients where calls fail (the live half is
tests/test_hbase_transports.py)."""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from thriftpy2.transport import TTransportException
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidIndexUrl, StoreUnavailable
from simhash_hbase.serve.metrics import GatewayCollector
from simhash_hbase.store.hbase import connect
from simhash_hbase.store.hbase.connect import Gateways
from simhash_hbase.store.hbase.metrics import GatewayStats
from simhash_hbase.store.hbase.settings import Gateway, Wire, parse_url
from simhash_hbase.store.hbase.transport import ClientPool

from .tls_certs import Certs, make_certs

# -- the URL ----------------------------------------------------------------------


def test_several_gateways_and_their_defaults() -> None:
    parts = parse_url("hbase://h1:9095,h2,[::1]:9?prefix=p")
    assert parts["gateways"] == (Gateway("h1", 9095), Gateway("h2", 9091), Gateway("::1", 9))
    assert parts["wire"] == Wire() and parts["retries"] == 3 and parts["timeout"] == 30_000


_PATHS = st.none() | st.sampled_from(["/etc/ca.pem", "c.pem"]) | st.text(min_size=1, max_size=30)


@st.composite
def _wires(draw: st.DrawFn) -> Wire:
    tls = draw(st.booleans())
    cert = draw(_PATHS) if tls else None
    transport = draw(st.sampled_from(["buffered", "framed", "http"]))
    sasl = draw(st.sampled_from([None, "gssapi"])) if transport != "framed" else None
    return Wire(
        transport=transport,
        protocol=draw(st.sampled_from(["binary", "compact"])),
        tls=tls,
        ca=draw(_PATHS) if tls else None,
        cert=cert,
        key=draw(_PATHS) if cert else None,
        verify=draw(st.booleans()) if tls else True,
        sasl=sasl,
        service=draw(st.sampled_from([None, "hbase", "HTTP"])) if sasl else None,
        principal=draw(st.none() | st.sampled_from(["shdb@EXAMPLE.COM", "svc/h@R"]))
        if sasl
        else None,
    )


@given(wire=_wires())
def test_a_wire_reads_back_from_the_url_it_writes(wire: Wire) -> None:
    assert parse_url(f"hbase://h?prefix=p{wire.query()}")["wire"] == wire


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ca=/x.pem", "add tls=1"),
        ("verify=0", "add tls=1"),
        ("tls=1&key=/k.pem", "give cert= too"),
        ("tls=maybe", "tls must be 1 or 0"),
        ("transport=udp", "transport must be buffered or framed or http"),
        ("protocol=json", "protocol must be binary or compact"),
        ("retries=-1", "retries 0 or more"),
        ("retries=x", "index URL"),
        ("sasl=plain", "sasl must be gssapi"),
        ("service=hbase", "add sasl=gssapi"),
        ("principal=shdb", "add sasl=gssapi"),
        ("sasl=gssapi&transport=framed", "buffered transport only"),
    ],
)
def test_bad_wire_options_say_what_to_do(query: str, message: str) -> None:
    with pytest.raises(InvalidIndexUrl, match=message):
        parse_url(f"hbase://h?{query}")


@pytest.mark.parametrize("netloc", ["", "h1,,h2", "h1,h2:x", "h:0"])
def test_bad_gateway_lists_are_refused(netloc: str) -> None:
    with pytest.raises(InvalidIndexUrl, match="index URL"):
        parse_url(f"hbase://{netloc}?prefix=p")


# -- failover when connecting ------------------------------------------------------


class Listener:
    """A TCP port that accepts connections (no Thrift: connecting is all it takes)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gateways(ports: list[int], stats: GatewayStats) -> Gateways:
    return Gateways([Gateway("127.0.0.1", p) for p in ports], Wire(), 2000, "hbase://test", stats)


def test_a_dead_gateway_is_skipped_then_probed_again_after_its_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(connect.time, "monotonic", lambda: clock[0])
    dead, alive = _closed_port(), Listener()
    stats = GatewayStats()
    gateways = _gateways([dead, alive.port], stats)
    try:
        for _ in range(3):  # sticks to the one that answered: the dead one is tried once
            gateway, protocol = gateways.connect()
            protocol.trans.close()
            assert gateway.port == alive.port
        assert stats.snapshot()[f"127.0.0.1:{dead}"].errors == {"connect": 1}
        revived = socket.create_server(("127.0.0.1", dead))  # the first one is back
        alive.close()  # ... and the second one dies
        gateway, protocol = gateways.connect()  # inside the first one's backoff: tried anyway
        protocol.trans.close()
        assert gateway.port == dead
        clock[0] += connect.BACKOFF_S + 1
        assert gateways.current.port == dead
        revived.close()
    finally:
        alive.close()


def test_no_gateway_answering_is_the_last_error() -> None:
    stats = GatewayStats()
    gateways = _gateways([_closed_port(), _closed_port()], stats)
    with pytest.raises(TTransportException):
        gateways.connect()
    assert [f.errors for f in stats.snapshot().values()] == [{"connect": 1}] * 2


def test_an_unreachable_index_names_every_gateway() -> None:
    a, b = _closed_port(), _closed_port()
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open(f"hbase://127.0.0.1:{a},127.0.0.1:{b}?prefix=x&timeout=2000")
    assert f"HBase at 127.0.0.1:{a},127.0.0.1:{b} is not reachable" in str(info.value)


# -- retries of calls ---------------------------------------------------------------


class Conn:
    """A connection to one fake gateway: ``fails`` says how its calls fail."""

    def __init__(self, gateway: Gateway, fails: dict[int, BaseException]) -> None:
        self.gateway, self.fails = gateway, fails

    def call(self) -> int:
        failure = self.fails.get(self.gateway.port)
        if failure is not None:
            raise failure
        return self.gateway.port

    def close(self) -> None:
        pass


class FakeGateways(Gateways):
    """Gateways that always connect; their calls fail as ``fails`` says."""

    def __init__(self, ports: list[int], stats: GatewayStats) -> None:
        super().__init__([Gateway("g", p) for p in ports], Wire(), 1000, "hbase://g", stats)
        self.fails: dict[int, BaseException] = {}

    def connect(self) -> tuple[Gateway, Conn]:
        i = self._order()[0]
        with self._lock:
            self._current = i
        return self.all[i], Conn(self.all[i], self.fails)


def _pool(ports: list[int], retries: int) -> tuple[FakeGateways, ClientPool[Conn], GatewayStats]:
    stats = GatewayStats()
    gateways = FakeGateways(ports, stats)
    return gateways, ClientPool(gateways, lambda conn: conn, 4, retries), stats


DROPPED = TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")


@pytest.mark.parametrize(
    "failure", [DROPPED, ConnectionRefusedError("refused"), TimeoutError("timed out")]
)
def test_a_call_that_fails_on_the_network_goes_to_the_next_gateway(
    failure: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("simhash_hbase.store.hbase.transport.RETRY_PAUSE_S", 0)
    gateways, pool, stats = _pool([1, 2], retries=3)
    assert pool.call("read", Conn.call) == 1
    gateways.fails[1] = failure
    assert pool.call("read", Conn.call) == 2  # no error surfaces
    assert pool.call("read", Conn.call) == 2  # ... and the pool stays there
    figures = stats.snapshot()
    assert figures["g:1"].retries >= 1 and sum(figures["g:1"].errors.values()) >= 1
    assert figures["g:2"].calls == 2 and figures["g:2"].errors == {}


def test_the_retry_budget_ends_in_an_error_naming_the_gateway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("simhash_hbase.store.hbase.transport.RETRY_PAUSE_S", 0)
    gateways, pool, stats = _pool([7], retries=2)
    gateways.fails[7] = DROPPED
    with pytest.raises(StoreUnavailable) as info:
        pool.call("read docs", Conn.call)
    message = str(info.value)
    assert "HBase at g:7 is not reachable while trying to read docs" in message
    assert "gateway g:7" in message and "3 attempts, retries=2 in the index URL" in message
    assert stats.snapshot()["g:7"].retries == 2


def test_a_server_error_is_not_retried() -> None:
    gateways, pool, stats = _pool([1, 2], retries=3)
    gateways.fails[1] = ValueError("a bug, or an answer: no retry mends it")
    with pytest.raises(ValueError):
        pool.call("read", Conn.call)
    assert stats.snapshot().get("g:1") is None or stats.snapshot()["g:1"].retries == 0


def test_a_timeout_with_one_gateway_is_not_asked_again() -> None:
    gateways, pool, stats = _pool([1], retries=3)
    gateways.fails[1] = TimeoutError("timed out")
    with pytest.raises(StoreUnavailable) as info:
        pool.call("read", Conn.call)
    assert "HBase at g:1 did not answer within 1000 ms while trying to read" in str(info.value)
    assert "timeout=" in str(info.value) and "hbase.client.operation.timeout" in str(info.value)
    assert stats.snapshot()["g:1"].errors == {"timeout": 1}
    assert stats.snapshot()["g:1"].retries == 0


# -- the figures on /metrics -----------------------------------------------------------


def test_gateway_figures_are_exported_per_gateway() -> None:
    stats = GatewayStats()
    for seconds in (0.0004, 0.003, 20.0):
        stats.call("a:1", seconds)
    stats.retry("a:1")
    stats.error("a:1", "dropped")
    stats.call("b:2", 0.01)
    registry = CollectorRegistry()
    registry.register(GatewayCollector(stats))
    text = generate_latest(registry).decode()
    assert 'shdb_hbase_call_seconds_bucket{gateway="a:1",le="0.001"} 1.0' in text
    assert 'shdb_hbase_call_seconds_bucket{gateway="a:1",le="0.005"} 2.0' in text
    assert 'shdb_hbase_call_seconds_bucket{gateway="a:1",le="+Inf"} 3.0' in text
    assert 'shdb_hbase_call_seconds_count{gateway="b:2"} 1.0' in text
    assert 'shdb_hbase_retries_total{gateway="a:1"} 1.0' in text
    assert 'shdb_hbase_errors_total{gateway="a:1",kind="dropped"} 1.0' in text


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


class TlsServer:
    """Completes TLS handshakes (asking for a client certificate signed by ``ca``
    if given), then closes: no gateway behind it."""

    def __init__(self, certs: Certs, client_ca: Path | None = None) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certs.server_cert, certs.server_key)
        if client_ca is not None:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(client_ca)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.handshakes: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    self.handshakes.append("ok")
                    tls.recv(1)
            except (ssl.SSLError, OSError) as exc:
                self.handshakes.append(type(exc).__name__)

    def url(self, query: str) -> str:
        return f"hbase://127.0.0.1:{self.port}?prefix=x&timeout=3000&{query}"


@pytest.fixture
def tls_server(certs: Certs) -> Iterator[TlsServer]:
    server = TlsServer(certs)
    yield server
    server.sock.close()


@pytest.mark.parametrize("transport", ["buffered", "http"])
def test_a_gateway_certificate_from_another_ca_is_refused_saying_what_to_do(
    tls_server: TlsServer, certs: Certs, transport: str
) -> None:
    url = tls_server.url(f"tls=1&ca={certs.other_ca}&transport={transport}")
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open(url)
    message = str(info.value)
    assert f"HBase at 127.0.0.1:{tls_server.port} (index URL hbase://127.0.0.1:" in message
    assert "certificate is not trusted" in message and "ca=PATH" in message


def test_the_cli_says_it_without_a_traceback(tls_server: TlsServer, certs: Certs) -> None:
    url = tls_server.url(f"tls=1&ca={certs.other_ca}")
    result = CliRunner().invoke(app, ["stats", "-i", url])
    assert result.exit_code == 2 and "certificate is not trusted" in result.stderr
    assert "Traceback" not in result.output


def test_the_right_ca_passes_the_handshake(tls_server: TlsServer, certs: Certs) -> None:
    with pytest.raises(StoreUnavailable) as info:  # no gateway behind the handshake
        SimhashIndex.open(tls_server.url(f"tls=1&ca={certs.ca}"))
    assert "not trusted" not in str(info.value) and "TLS failed" not in str(info.value)
    assert "ok" in tls_server.handshakes


def test_verify_0_connects_to_any_certificate_with_a_loud_warning(
    tls_server: TlsServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open(tls_server.url("tls=1&verify=0"))
    assert "not trusted" not in str(info.value) and "ok" in tls_server.handshakes
    assert "certificates are NOT checked" in caplog.text


def test_a_client_certificate_where_the_gateway_asks_for_one(certs: Certs) -> None:
    server = TlsServer(certs, client_ca=certs.ca)
    try:
        with pytest.raises(StoreUnavailable, match="give cert= and key="):
            SimhashIndex.open(server.url(f"tls=1&ca={certs.ca}"))
        with pytest.raises(StoreUnavailable) as info:  # signed by the CA it trusts
            SimhashIndex.open(
                server.url(f"tls=1&ca={certs.ca}&cert={certs.server_cert}&key={certs.server_key}")
            )
        assert "TLS failed" not in str(info.value) and "ok" in server.handshakes
    finally:
        server.sock.close()


def test_sasl_without_the_kerberos_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kerberos", None)  # as if not installed
    with pytest.raises(InvalidIndexUrl, match=r"pip install 'simhash-hbase\[kerberos\]'"):
        SimhashIndex.open("hbase://127.0.0.1:1?sasl=gssapi")


def test_a_ca_file_that_cannot_be_read_is_a_bad_url(tmp_path: Path) -> None:
    with pytest.raises(InvalidIndexUrl, match="cannot load ca"):
        SimhashIndex.open(f"hbase://127.0.0.1:1?tls=1&ca={tmp_path / 'missing.pem'}")
