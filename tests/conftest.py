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
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from .hbase_server import ExternalHBase, HBaseServer, HBaseUnavailable, open_server

# Example counts stay as each test sets them; wall-clock limits do not belong in
# tests on shared, noisy machines (speed lives in the benchmarks).
settings.register_profile("shdb", deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI (issue 37): the same examples every run, so a red run is reproduced by running
# it again, and no example database to carry between clean clones. Each test's
# example count is capped (a laptop run, without CI, keeps every test's own count
# and explores new examples each time).
settings.register_profile(
    "ci", parent=settings.get_profile("shdb"), derandomize=True, database=None, print_blob=True
)
CI_MAX_EXAMPLES = 100
#: A property test that runs on the embedded store too runs at most this many examples
#: on HBase: its embedded runs (every example of its count) prove the logic, its HBase
#: runs the store path, at round trips (~0.5-1 s) an example. A test that runs on HBase
#: alone keeps its count: nothing else explores its inputs.
HBASE_MAX_EXAMPLES = 10
_CI = bool(os.environ.get("CI"))
settings.load_profile("ci" if _CI else "shdb")
_FEWER = pytest.StashKey[int]()  # the example count of an HBase run of a test (above)


@pytest.hookimpl(tryfirst=True)  # before -m deselects the other stores' runs
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Cap the example count of every property test under the CI profile, and of the
    HBase runs of the property tests that run on the embedded store too."""
    embedded = {_test_of(i) for i in items if i.get_closest_marker("hbase") is None}
    for item in items:
        test = _test_of(item)
        held = getattr(test, "_hypothesis_internal_use_settings", None)
        if held is None:
            continue
        if _CI and held.max_examples > CI_MAX_EXAMPLES:
            held = settings(held, max_examples=CI_MAX_EXAMPLES)
            test._hypothesis_internal_use_settings = held  # type: ignore[union-attr]
        if item.get_closest_marker("hbase") and test in embedded:
            item.stash[_FEWER] = min(held.max_examples, HBASE_MAX_EXAMPLES)


def _test_of(item: pytest.Item) -> Any:
    """The test function, one object for all of its parametrized runs."""
    return getattr(item, "obj", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Run an HBase run of a property test with its own count (its settings live on
    the one function all its runs share: set for this run, then put back)."""
    fewer = item.stash.get(_FEWER, None)
    if fewer is None:
        return (yield)
    test = _test_of(item)
    held = test._hypothesis_internal_use_settings
    test._hypothesis_internal_use_settings = settings(held, max_examples=fewer)
    try:
        return (yield)
    finally:
        test._hypothesis_internal_use_settings = held


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
        if isinstance(server, ExternalHBase):  # a container goes with its tables
            _pool.drop_all()
        if request.session.testsfailed:
            _Session.diagnostics = server.diagnostics()
        server.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _Session.diagnostics:
        terminalreporter.write_sep("-", "HBase logs (tests failed)")
        terminalreporter.write_line(_Session.diagnostics)


def _connection() -> Any:
    import happybase

    host, port = gateway_address("thrift1").rsplit(":", 1)
    return happybase.Connection(host, int(port))


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


class _TablePool:
    """Table sets made once per gateway and session, leased to tests and emptied
    on return (issue 37): creating and dropping three tables a test (the index
    pre-split in 16 regions) cost 1-2 s a DDL operation, hundreds of times a run.

    A set is made as a new index's would be (``open_store``: the gateway's
    schema and splits) and holds no manifest, so an index opened on it is new,
    and ``create=False`` finds none. Emptying deletes every row: HBase's delete
    markers mask only cells stamped at or before them, and every later write is
    stamped later. A set that cannot be emptied is dropped, never reused. Sets
    are dropped once, when the session ends.
    """

    _TABLES = ("index", "docs", "meta")

    def __init__(self) -> None:
        self._free: dict[str, list[str]] = {api: [] for api in HBASE_APIS}
        self._made: list[str] = []

    def lease(self, api: str) -> str:
        if self._free[api]:
            return self._free[api].pop()
        from simhash_hbase.store import open_store

        prefix = f"pool{len(self._made)}{api[-1]}x{uuid.uuid4().hex[:6]}"
        open_store(f"hbase://{gateway_address(api)}?prefix={prefix}").close()
        self._made.append(prefix)
        return prefix

    def give_back(self, api: str, prefix: str) -> None:
        try:
            self._empty(prefix)
        except Exception:
            self._made.remove(prefix)
            _drop_tables(gateway_address("thrift1"), prefix)
            return
        self._free[api].append(prefix)

    def _empty(self, prefix: str) -> None:
        conn = _connection()
        try:
            names = {n.decode() for n in conn.tables()}
            if any(f"{prefix}_{t}" not in names for t in self._TABLES):
                raise LookupError(f"a test dropped a table of {prefix}")
            for name in self._TABLES:
                table = conn.table(f"{prefix}_{name}")
                with table.batch(batch_size=2000) as batch:
                    for key, _ in table.scan(filter=b"KeyOnlyFilter()", batch_size=2000):
                        batch.delete(key)
        finally:
            conn.close()

    def drop_all(self) -> None:
        for prefix in self._made:
            _drop_tables(gateway_address("thrift1"), prefix)
        self._made.clear()
        self._free = {api: [] for api in HBASE_APIS}


_pool = _TablePool()


@contextmanager
def fresh_hbase_url(api: str) -> Iterator[str]:
    """An empty HBase index URL on the ``api`` gateway: a leased table set."""
    prefix = _pool.lease(api)
    try:
        yield f"hbase://{gateway_address(api)}?prefix={prefix}"
    finally:
        _pool.give_back(api, prefix)


@contextmanager
def new_tables_url(api: str) -> Iterator[str]:
    """An HBase index URL whose tables do not exist yet (tests of table creation)."""
    prefix = "t" + uuid.uuid4().hex[:12]
    try:
        yield f"hbase://{gateway_address(api)}?prefix={prefix}"
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
        from simhash_hbase.store.lmdb.store import EmbeddedStore

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


@pytest.fixture
def new_hbase_url(hbase_api: str) -> Iterator[str]:
    """An HBase index URL on the ``hbase_api`` gateway whose tables do not exist yet
    (only tests of table creation need one: the rest lease a set)."""
    with new_tables_url(hbase_api) as url:
        yield url


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """A local Spark of 2 cores for a test module; a task may fail 3 times (the
    fault tests kill one and expect its retry)."""
    from simhash_hbase.spark.session import get_session

    session = get_session(
        "local[2,3]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.python.worker.reuse": "true",
        },
    )
    yield session
    session.stop()
