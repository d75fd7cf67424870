"""Fixtures shared by the suites. ``store_url`` runs a test on every store.

HBase tests need ``SHDB_TEST_HBASE``: ``container`` (the project's image, started
once per session by testcontainers; see tests/hbase_server.py) or ``host:port``
of a running HBase's Thrift1 gateway, its Thrift2 gateway being at port+1
(``scripts/test`` and ``.ci/run`` set it). Every HBase test runs once per gateway
protocol, each through the plain URL of that gateway (the store detects the
protocol). Without it they are
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
from hypothesis import HealthCheck, settings

from .hbase_server import HBaseServer, HBaseUnavailable, open_server

# Example counts stay as each test sets them; wall-clock limits do not belong in
# tests on shared, noisy machines (speed lives in the benchmarks).
settings.register_profile("shdb", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shdb")

HBASE_ENV = "SHDB_TEST_HBASE"
HBASE_APIS = ("thrift1", "thrift2")


class _Session:
    """The session's HBase: opened by the first test that needs it, closed at the end."""

    server: HBaseServer | None = None
    error: str | None = None  # why it could not be opened (the next tests fail at once)
    diagnostics: str = ""  # its logs, kept for the summary when tests failed


def current_hbase() -> HBaseServer:
    """The HBase named by ``SHDB_TEST_HBASE`` (fails or skips the test without one)."""
    if _Session.server is not None:
        return _Session.server
    spec = os.environ.get(HBASE_ENV)
    if not spec:
        if os.environ.get("CI") or os.environ.get("SHDB_REQUIRE_HBASE"):
            pytest.fail(
                f"{HBASE_ENV} is not set, but HBase tests must run here: export "
                f"{HBASE_ENV}=container (Docker), or start HBase with `scripts/hbase start` "
                f"and export {HBASE_ENV}=127.0.0.1:9090"
            )
        pytest.skip(f"{HBASE_ENV} not set; run scripts/test to start a local HBase")
    if _Session.error is None:
        try:
            _Session.server = open_server(spec)
            return _Session.server
        except HBaseUnavailable as exc:
            _Session.error = str(exc)
    pytest.fail(_Session.error, pytrace=False)


def hbase_address() -> str:
    """host:port of the Thrift1 gateway of the session's HBase (Thrift2: port+1)."""
    return current_hbase().address


@pytest.fixture
def hbase_server() -> HBaseServer:
    """The session's HBase, for tests that kill and restart it."""
    return current_hbase()


@pytest.fixture(scope="session", autouse=True)
def _close_hbase(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    server = _Session.server
    if server is not None:
        if request.session.testsfailed:
            _Session.diagnostics = server.diagnostics()
        server.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _Session.diagnostics:
        terminalreporter.write_sep("-", "HBase logs (tests failed)")
        terminalreporter.write_line(_Session.diagnostics)


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
    host, port = hbase_address().rsplit(":", 1)
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
    "embedded-format1",  # indexes written before the compact layout keep working
    *(pytest.param(f"hbase-{api}", marks=pytest.mark.hbase) for api in HBASE_APIS),
]


@pytest.fixture(params=_STORE_PARAMS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty index URL on each store kind and HBase gateway protocol."""
    if request.param == "embedded":
        yield str(tmp_path / "index")
    elif request.param == "embedded-format1":
        from simhash_hbase.store.embedded import EmbeddedStore

        EmbeddedStore(tmp_path / "index", format=1).close()
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
