"""Gateways set an operator's way, on a real HBase: framed, HTTP and compact
transports, TLS (HTTPS) with a client that refuses a certificate from another CA,
and failover between two gateways when one is killed mid-run. Each test starts
its own gateways beside the session's HBase (:meth:`HBaseServer.gateway`)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex, StoreUnavailable
from simhash_hbase.cli.app import app
from simhash_hbase.store.hbase.metrics import GATEWAY_STATS

from .conftest import fresh_hbase_url
from .hbase_server import HBaseServer
from .serve_server import free_port
from .tls_certs import PASSWORD, make_certs

pytestmark = pytest.mark.hbase


@contextlib.contextmanager
def gateway(server: HBaseServer, name: str, *settings: str) -> Iterator[tuple[str, int]]:
    """A Thrift2 gateway of its own (``settings``: KEY=VALUE), on a free port, under
    a name no other gateway has (e.g. the TLS opt-in's ``tls``)."""
    port = free_port()
    name = f"test-{name}-{uuid.uuid4().hex[:6]}"
    server.gateway("start", name, str(port), "thrift2", *settings)
    try:
        yield name, port
    finally:
        server.gateway("stop", name)


def _prefix(url: str) -> str:
    return url.split("prefix=")[1]


def _round_trip(url: str) -> None:
    """A write and the reads that must see it, through ``url``."""
    with SimhashIndex.open(url) as index:
        index.add_fingerprint("a", 0xABC)
        assert [m.doc_id for m in index.query_fingerprint(0xABC)] == ["a"]
        assert index.get("a") is not None


@pytest.mark.parametrize(
    ("settings", "query"),
    [
        (["hbase.regionserver.thrift.framed=true"], "transport=framed"),
        (["hbase.regionserver.thrift.http=true"], "transport=http"),
        (["hbase.regionserver.thrift.compact=true"], "protocol=compact"),
        (
            ["hbase.regionserver.thrift.framed=true", "hbase.regionserver.thrift.compact=true"],
            "transport=framed&protocol=compact",
        ),
    ],
)
def test_each_transport_serves_an_index(
    hbase_server: HBaseServer, settings: list[str], query: str
) -> None:
    with (
        fresh_hbase_url("thrift2") as url,
        gateway(hbase_server, "wire", *settings) as (_, port),
    ):
        _round_trip(f"hbase://127.0.0.1:{port}?prefix={_prefix(url)}&{query}")
        # the same gateway without its setting in the URL: a clear error, no hang
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
            SimhashIndex.open(f"hbase://127.0.0.1:{port}?prefix={_prefix(url)}&timeout=5000")


def test_a_tls_gateway_end_to_end(hbase_server: HBaseServer, tmp_path: Path) -> None:
    """The gateway the TLS opt-in of scripts/hbase and the image starts: Thrift2 over
    HTTPS with a PKCS12 keystore made here. The right CA works; a certificate from
    another CA is refused, saying what to do, from the library and the CLI."""
    certs = make_certs(hbase_server.shared_dir(tmp_path) / "certs")
    tls = [
        "hbase.regionserver.thrift.http=true",
        "hbase.thrift.ssl.enabled=true",
        f"hbase.thrift.ssl.keystore.store={certs.keystore}",
        f"hbase.thrift.ssl.keystore.password={PASSWORD}",
        f"hbase.thrift.ssl.keystore.keypassword={PASSWORD}",
        "hbase.thrift.ssl.keystore.type=pkcs12",
    ]
    with fresh_hbase_url("thrift2") as url, gateway(hbase_server, "tls", *tls) as (_, port):
        base = f"hbase://127.0.0.1:{port}?prefix={_prefix(url)}&transport=http&tls=1"
        _round_trip(f"{base}&ca={certs.ca}")
        with pytest.raises(StoreUnavailable) as info:
            SimhashIndex.open(f"{base}&ca={certs.other_ca}")
        assert "certificate is not trusted" in str(info.value) and "ca=PATH" in str(info.value)
        assert f"HBase at 127.0.0.1:{port}" in str(info.value)
        result = CliRunner().invoke(app, ["stats", "-i", f"{base}&ca={certs.other_ca}"])
        assert result.exit_code == 2 and "certificate is not trusted" in result.stderr
        with pytest.raises(StoreUnavailable, match="a TLS server answered"):
            SimhashIndex.open(f"hbase://127.0.0.1:{port}?prefix=x&timeout=5000")  # plain


def test_failover_when_a_gateway_is_killed_mid_run(hbase_server: HBaseServer) -> None:
    """Writes and reads through a URL naming two gateways; the one in use is
    SIGKILLed part way. No error surfaces, every document written is there, and the
    figures show the retries on the dead gateway and the calls on the live one."""
    with (
        fresh_hbase_url("thrift2") as url,
        gateway(hbase_server, "a") as (first, a),
        gateway(hbase_server, "b") as (_, b),
    ):
        two = f"hbase://127.0.0.1:{a},127.0.0.1:{b}?prefix={_prefix(url)}"
        killer = threading.Thread(target=hbase_server.gateway, args=("kill", first))
        ids = [f"d{i}" for i in range(300)]
        with SimhashIndex.open(two) as index:
            for i, doc_id in enumerate(ids):
                index.add_fingerprint(doc_id, i * 0x9E3779B97F4A7C15 % 2**64)
                if i == 80:
                    killer.start()  # while the writes go on
                if i % 25 == 0:
                    assert index.get(ids[i // 2]) is not None
            killer.join()
        with SimhashIndex.open(f"hbase://127.0.0.1:{b}?prefix={_prefix(url)}") as index:
            assert [d for d in ids if index.get(d) is None] == []
        after = GATEWAY_STATS.snapshot()
        dead, live = after[f"127.0.0.1:{a}"], after[f"127.0.0.1:{b}"]
        assert dead.retries >= 1 and sum(dead.errors.values()) >= 1 and live.calls > 0
