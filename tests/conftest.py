"""Fixtures shared by the suites. ``store_url`` runs a test on every store.

HBase tests need ``SHDB_TEST_HBASE=host:port``, the Thrift1 gateway; the Thrift2
gateway is always at port+1 (``scripts/test`` and ``.ci/run`` start HBase and set
it). Every HBase test runs once per gateway protocol, each through the plain URL
of that gateway (the store detects the protocol). Without the variable they are
skipped on a laptop, but they fail in CI (``CI`` or ``SHDB_REQUIRE_HBASE`` set):
there they must never be skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

HBASE_ENV = "SHDB_TEST_HBASE"
HBASE_APIS = ("thrift1", "thrift2")


def hbase_address() -> str | None:
    address = os.environ.get(HBASE_ENV)
    if address:
        return address
    if os.environ.get("CI") or os.environ.get("SHDB_REQUIRE_HBASE"):
        pytest.fail(
            f"{HBASE_ENV} is not set, but HBase tests must run here: start HBase with "
            f"`scripts/hbase start` and export {HBASE_ENV}=127.0.0.1:9090"
        )
    pytest.skip(f"{HBASE_ENV} not set; run scripts/test to start a local HBase")


def _drop_tables(address: str, prefix: str) -> None:
    import happybase

    host, port = address.rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        for name in conn.tables():
            if name.decode().startswith(prefix + "_"):
                if conn.is_table_enabled(name):
                    conn.disable_table(name)
                conn.delete_table(name)
    finally:
        conn.close()


def gateway_address(api: str) -> str:
    """host:port of the ``api`` gateway: Thrift1 at the test address, Thrift2 at port+1."""
    address = hbase_address()
    assert address is not None
    host, port = address.rsplit(":", 1)
    return f"{host}:{int(port) + HBASE_APIS.index(api)}"


@contextmanager
def fresh_hbase_url(api: str) -> Iterator[str]:
    address = gateway_address(api)
    prefix = "t" + uuid.uuid4().hex[:12]
    try:
        yield f"hbase://{address}?prefix={prefix}"
    finally:
        _drop_tables(gateway_address("thrift1"), prefix)


_STORE_PARAMS = [
    "embedded",
    *(pytest.param(f"hbase-{api}", marks=pytest.mark.hbase) for api in HBASE_APIS),
]


@pytest.fixture(params=_STORE_PARAMS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty index URL on each store kind and HBase gateway protocol."""
    if request.param == "embedded":
        yield str(tmp_path / "index")
    else:
        with fresh_hbase_url(request.param.removeprefix("hbase-")) as url:
            yield url


@pytest.fixture(params=[pytest.param(api, marks=pytest.mark.hbase) for api in HBASE_APIS])
def hbase_api(request: pytest.FixtureRequest) -> str:
    """Each HBase gateway protocol in turn (for HBase-only tests)."""
    return str(request.param)


@pytest.fixture
def hbase_url(hbase_api: str) -> Iterator[str]:
    """A fresh, empty HBase index URL on the ``hbase_api`` gateway."""
    with fresh_hbase_url(hbase_api) as url:
        yield url
