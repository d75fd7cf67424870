"""Fixtures shared by the suites. ``store_url`` runs a test on every store.

HBase tests need ``SHDB_TEST_HBASE=host:port`` (``scripts/test`` and ``.ci/run``
start HBase and set it). Without it they are skipped on a laptop, but they fail
in CI (``CI`` or ``SHDB_REQUIRE_HBASE`` set): there they must never be skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

HBASE_ENV = "SHDB_TEST_HBASE"


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


@contextmanager
def _fresh_hbase_url() -> Iterator[str]:
    address = hbase_address()
    assert address is not None
    prefix = "t" + uuid.uuid4().hex[:12]
    try:
        yield f"hbase://{address}?prefix={prefix}"
    finally:
        _drop_tables(address, prefix)


@pytest.fixture(params=["embedded", pytest.param("hbase", marks=pytest.mark.hbase)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty index URL on each store kind."""
    if request.param == "embedded":
        yield str(tmp_path / "index")
    else:
        with _fresh_hbase_url() as url:
            yield url


@pytest.fixture
def hbase_url() -> Iterator[str]:
    """A fresh, empty HBase index URL (for HBase-only tests)."""
    with _fresh_hbase_url() as url:
        yield url
