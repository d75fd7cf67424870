"""The test harness never kills an HBase that is not its own."""

from __future__ import annotations

import pytest

from .hbase_server import ExternalHBase, HBaseUnavailable


def test_an_external_hbase_at_another_port_is_never_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SHDB_HBASE_THRIFT_PORT", "9090")
    with pytest.raises(HBaseUnavailable, match="SHDB_HBASE_THRIFT_PORT"):
        ExternalHBase("127.0.0.1:19490").kill()
