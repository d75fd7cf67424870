"""The status page as a user sees it, in headless Chromium (issue 43, items 13 and 14):
the chart has a legend and axes, and the "documents" row is never blank (a count, or on
HBase why there is none). The HBase case is the page fed the status an HBase index
gives (``_index_stats``), served from a stub, since HBase runs only in CI."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from simhash_hbase import RemoteIndex, SimhashIndex
from simhash_hbase.serve.app import _index_stats

from .serve_server import live_server
from .test_serve import TEXT
from .test_serve_live import _chromium, dump_dom


@contextmanager
def stub(status: dict[str, Any]) -> Iterator[str]:
    """The status page and a given /v1/status, on an ephemeral port."""
    page = files("simhash_hbase.serve").joinpath("status.html").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = (
                (json.dumps(status).encode(), "application/json")
                if self.path.startswith("/v1/status")
                else (page, "text/html; charset=utf-8")
            )
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser() -> str:
    found = _chromium()
    if found is None:
        if os.environ.get("CI") or os.environ.get("SHDB_REQUIRE_HBASE"):
            pytest.fail("chromium is missing: scripts/test installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def rows(dom: str) -> dict[str, str]:
    """The index table's rows: {name: value}."""
    table = re.search(r'<table id="index">(.*?)</table>', dom, re.S)
    assert table is not None, dom[-2000:]
    return dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table[1]))


def hbase_status(tmp_path: Path, recent: list[dict[str, Any]], now: float) -> dict[str, Any]:
    """What /v1/status answers for an HBase index (its index part from the service's
    own ``_index_stats``), the rest from a live service's answer."""
    with live_server(str(tmp_path / "ix"), tmp_path / "serve.log") as server:
        status: dict[str, Any] = httpx.get(f"{server.url}/v1/status").json()
    with SimhashIndex.open(str(tmp_path / "ix"), readonly=True) as index:
        on_hbase = SimpleNamespace(
            url="hbase://10.0.0.5:9091?prefix=web", scheme=index.scheme, manifest=index.manifest
        )
        status["index"] = _index_stats(on_hbase)  # type: ignore[arg-type]
    status.update(url="hbase://10.0.0.5:9091?prefix=web", now=now, recent=recent)
    return status


def test_on_hbase_the_documents_row_says_why_there_is_no_count(
    tmp_path: Path, browser: str
) -> None:
    status = hbase_status(tmp_path, [], 1_800_000_000.0)
    with stub(status) as url:
        dom = dump_dom(browser, url, tmp_path)
    shown = rows(dom)
    assert shown["store"] == "hbase"
    assert shown["documents"].startswith("unknown on HBase: counting is a full scan"), shown
    assert "run shdb stats" in shown["documents"]


def test_the_chart_has_a_legend_and_labelled_axes_over_ten_minutes(
    tmp_path: Path, browser: str
) -> None:
    now = 1_800_000_005.0
    recent = [  # buckets 9.5 min, 5 min and 10 s ago; the others idle
        {"start": 1_799_999_430, "rate": 2.5, "p50_ms": 3.1, "p99_ms": 8.0},
        {"start": 1_799_999_700, "rate": 40.0, "p50_ms": 2.0, "p99_ms": 12.5},
        {"start": 1_799_999_990, "rate": 7.0, "p50_ms": 1.5, "p99_ms": 4.0},
    ]
    with stub(hbase_status(tmp_path, recent, now)) as url:
        dom = dump_dom(browser, url, tmp_path)
    legend = re.search(r'<p id="legend">(.*?)</p>', dom, re.S)
    assert legend is not None
    for entry in ("requests per second", "p50 latency, ms", "p99 latency, ms"):
        assert entry in legend[1]
    texts = dict(re.findall(r'<text class="([a-z-]+)"[^>]*>([^<]*)</text>', dom))
    labels = re.findall(r'<text class="([a-z-]+)"[^>]*>([^<]*)</text>', dom)
    assert ("y-rate", "40") in labels and ("y-rate", "0") in labels  # left: req/s, 0 to max
    assert ("y-ms", "12.5") in labels and ("y-ms", "0") in labels  # right: ms, 0 to max
    assert [t for c, t in labels if c == "x-time"] == ["-10 min", "-5 min", "now"]
    assert {"req/s", "ms"} <= {t for c, t in labels if c == "y-title"}
    assert "x-title" in texts
    lines = dict(re.findall(r'<polyline class="([a-z0-9_]+)"[^>]*points="([^"]*)"', dom))
    assert set(lines) == {"rate", "p50_ms", "p99_ms"}
    assert len(lines["p99_ms"].split()) == 3
    assert len(lines["rate"].split()) == 60  # every 10-second bucket, idle ones at 0
    xs = [float(p.split(",")[0]) for p in lines["p99_ms"].split()]
    assert xs == sorted(xs) and xs[0] < 80 and xs[-1] > 560  # placed by time, not by index


def test_on_the_embedded_store_the_documents_row_counts_them(tmp_path: Path, browser: str) -> None:
    with live_server(str(tmp_path / "ix"), tmp_path / "serve.log") as server:
        with RemoteIndex(server.url) as remote:
            remote.add("the-article", TEXT)
        dom = dump_dom(browser, server.url, tmp_path)
    shown = rows(dom)
    assert shown["store"].startswith("embedded") and shown["documents"] == "1"
    assert re.search(r'<polyline class="rate"', dom)  # the request just made
