"""`shdb serve` as a process: exactly one new among 1,000 concurrent identical
check-and-adds, every acknowledged write kept across kill -9, SIGTERM draining,
the RemoteIndex client, and the status page in headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from simhash_hbase import Document, RemoteIndex, SimhashIndex
from simhash_hbase.errors import StoreUnavailable
from simhash_hbase.index.remote import RemoteError
from simhash_hbase.jobs.verify import verify
from simhash_hbase.records import Match, Matches, fingerprint_to_hex

from .serve_server import live_server
from .test_serve import OTHER, TEXT, TOKEN


def test_concurrent_identical_check_and_add_exactly_one_new(store_url: str, tmp_path: Path) -> None:
    with live_server(store_url, tmp_path / "serve.log") as server:

        async def submit_all() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=1000)
            async with httpx.AsyncClient(limits=limits, timeout=300) as client:
                return await asyncio.gather(
                    *(
                        client.post(
                            f"{server.url}/v1/check-and-add", json={"id": f"c{i}", "text": TEXT}
                        )
                        for i in range(1000)
                    )
                )

        responses = asyncio.run(submit_all())
        assert [r.status_code for r in responses] == [200] * 1000, server.output()
        new = [r.json()["id"] for r in responses if r.json()["new"]]
        assert len(new) == 1
        assert server.terminate(), server.output()
    with SimhashIndex.open(store_url, create=False) as index:
        assert [d.doc_id for d in index.documents()] == new


@pytest.mark.hbase
def test_replicas_on_hbase_exactly_one_new(hbase_url: str, tmp_path: Path) -> None:
    """Three `shdb serve` replicas of one HBase index, 1,000 concurrent check-and-adds
    of one text spread over them: exactly one new, and every other answer names it."""
    SimhashIndex.open(hbase_url).close()  # the replicas find the index made
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(live_server(hbase_url, tmp_path / f"serve{n}.log"))
            for n in range(3)
        ]

        async def submit_all() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=1000)
            async with httpx.AsyncClient(limits=limits, timeout=300) as client:
                return await asyncio.gather(
                    *(
                        client.post(
                            f"{servers[i % 3].url}/v1/check-and-add",
                            json={"id": f"c{i}", "text": TEXT},
                        )
                        for i in range(1000)
                    )
                )

        responses = asyncio.run(submit_all())
        logs = "\n".join(server.output() for server in servers)
        assert [r.status_code for r in responses] == [200] * 1000, logs
        answers = [r.json() for r in responses]
        new = [a["id"] for a in answers if a["new"]]
        assert len(new) == 1, new
        assert all(new[0] in {m["id"] for m in a["matches"]} for a in answers if not a["new"])
        assert all(server.terminate() for server in servers), logs
    with SimhashIndex.open(hbase_url, create=False) as index:
        assert [d.doc_id for d in index.documents()] == new
        assert verify(index).clean


async def _load(url: str, acked: set[str], stop: asyncio.Event, workers: int = 16) -> None:
    """Add unique fingerprints in small batches until ``stop``; ``acked`` gets each 200's ids."""
    rng = random.Random(7)

    async def worker(w: int, client: httpx.AsyncClient) -> None:
        n = 0
        while not stop.is_set():
            ids = [f"w{w}-{n + i}" for i in range(rng.randint(1, 20))]
            n += len(ids)
            items = [{"id": i, "fingerprint": fingerprint_to_hex(rng.getrandbits(64))} for i in ids]
            try:
                r = await client.post(f"{url}/v1/add", json=items)
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
                continue
            if r.status_code == 200:
                acked.update(row["id"] for row in r.json() if "error" not in row)

    async with httpx.AsyncClient(timeout=30) as client:
        await asyncio.gather(*(worker(w, client) for w in range(workers)))


def test_kill_9_under_load_keeps_every_acknowledged_write(store_url: str, tmp_path: Path) -> None:
    acked: set[str] = set()
    with live_server(store_url, tmp_path / "serve.log") as server:

        async def run() -> None:
            stop = asyncio.Event()
            load = asyncio.create_task(_load(server.url, acked, stop))
            deadline = time.monotonic() + 60
            while len(acked) < 2000 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            server.kill()  # SIGKILL while requests are in flight
            await asyncio.sleep(0.5)
            stop.set()
            await load

        asyncio.run(run())
    assert len(acked) >= 500
    with live_server(store_url, tmp_path / "serve2.log") as again:  # it restarts on the index
        probe = sorted(acked)[:: max(1, len(acked) // 50)]
        with RemoteIndex(again.url) as remote:
            assert all(remote.get(doc_id) is not None for doc_id in probe)
        assert again.terminate(), again.output()
    with SimhashIndex.open(store_url, create=False) as index:
        held = {d.doc_id for d in index.documents()}
        assert acked <= held
        report = verify(index)
        assert report.corrupt_documents == 0, report
        if not index.url.startswith("hbase"):
            assert report.clean, report
            return
        # HBase is atomic per row: a batch cut by the kill may leave a document never
        # acknowledged with part of its cells (the bucket layout writes docs rows
        # first: docs/SPEC.md, "Write order"). Every acknowledged one is whole, and
        # verify --repair leaves the index clean.
        cells = Counter(doc_id for _, doc_id in index.index_cells())
        assert all(cells[doc_id] == index.scheme.rows_per_fingerprint for doc_id in acked)
        assert verify(index, repair=True).repaired
        assert verify(index).clean


def test_sigterm_drains_in_flight_writes(tmp_path: Path) -> None:
    url = str(tmp_path / "ix")
    acked: set[str] = set()
    with live_server(url, tmp_path / "serve.log") as server:

        async def run() -> None:
            stop = asyncio.Event()
            load = asyncio.create_task(_load(server.url, acked, stop))
            while len(acked) < 300:
                await asyncio.sleep(0.02)
            drained = await asyncio.to_thread(server.terminate)
            stop.set()
            await load
            assert drained, server.output()

        asyncio.run(run())
    with SimhashIndex.open(url, create=False) as index:
        assert acked <= {d.doc_id for d in index.documents()}
        assert verify(index).clean


def _untimed(results: list[Matches]) -> list[list[Match]]:
    """Answers of two indexes that stored the same documents at other moments."""
    return [[m._replace(time=None) for m in matches] for matches in results]


def test_remote_index_mirrors_the_local_client(tmp_path: Path) -> None:
    url = str(tmp_path / "ix")
    with live_server(url, tmp_path / "serve.log", env={"SHDB_TOKEN": TOKEN}) as server:
        with RemoteIndex(server.url, token=TOKEN) as remote:
            fp = remote.add("a", TEXT, {"src": "x"}, store_text=True)
            assert [m.doc_id for m in remote.query(TEXT)] == ["a"]
            assert remote.query(OTHER) == []
            assert remote.query_many([TEXT, OTHER]) == [remote.query(TEXT), []]
            assert [m.distance for m in remote.query_fingerprint(fp ^ 1)] == [1]
            assert remote.check_and_add_texts([("b", OTHER)], always=False) == [[]]
            (found,) = remote.check_and_add_texts([("c", OTHER)], always=False)
            assert [m.doc_id for m in found] == ["b"] and remote.get("c") is None
            with SimhashIndex.open(str(tmp_path / "local")) as local:  # the same answers
                items = [("p", f"<html><body><p>{TEXT}</p></body></html>"), ("q", TEXT)]
                assert _untimed(remote.check_and_add_texts(items)) == _untimed(
                    local.check_and_add_texts([("a", TEXT), *items])[1:]
                )
            docs = [Document("f1", 0xF0F0), Document("f2", 0xF0F1), Document("f3", 0xF0F1)]
            found = remote.check_and_add(docs)
            assert [[m.doc_id for m in ms] for ms in found] == [[], ["f1"], ["f1"]]
            assert remote.check_and_add([Document("f4", 0xF0F0)], always=True)[0]
            time.sleep(5.5)  # past uvicorn's keep-alive: the write goes on a new connection
            remote.add_fingerprint("g", 0x1234, {"n": 1})
            held = remote.get("a")
            assert held is not None and held.time is not None
            assert held == Document("a", fp, TEXT, {"src": "x"}, time=held.time)
            assert remote.get("nope") is None
            assert remote.remove("a") and not remote.remove("a")
            with pytest.raises(RemoteError, match="id"):
                remote.add("x" * 5000, TEXT)
        with (
            RemoteIndex(server.url, token="wrong-token-wrong-token") as remote,
            pytest.raises(RemoteError, match="401"),
        ):
            remote.query(TEXT)
        with SimhashIndex.open(url, readonly=True) as local:  # the same answers, locally
            assert local.query_fingerprint(0xF0F0) == RemoteIndex(
                server.url, token=TOKEN
            ).query_fingerprint(0xF0F0)
    for call in (lambda r: r.query(TEXT), lambda r: r.add("z", TEXT)):
        with pytest.raises(StoreUnavailable, match="cannot reach"):
            call(RemoteIndex(server.url, token=TOKEN))


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(browser: str, url: str, tmp_path: Path) -> str:
    """The page's DOM once its scripts ran (Chromium's virtual time: no waiting)."""
    return subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_status_page_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") or os.environ.get("SHDB_REQUIRE_HBASE"):
            pytest.fail("chromium is missing: scripts/test installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    url = str(tmp_path / "ix")
    with live_server(url, tmp_path / "serve.log") as server:
        with RemoteIndex(server.url) as remote:
            remote.add("the-article", TEXT)
        dom = dump_dom(browser, f"{server.url}/?text={quote(TEXT)}", tmp_path)
    assert 'id="summary"' in dom, dom[-2000:]
    assert "1 near-copy" in dom
    assert "<td>the-article</td><td>0</td>" in dom
    assert "embedded" in dom  # the index table was filled from /v1/status


def test_cli_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "simhash_hbase", "serve", "--index", str(tmp_path / "ix")]
    env = {k: v for k, v in os.environ.items() if k != "SHDB_TOKEN"}
    out = subprocess.run(
        [*cmd, "--host", "0.0.0.0"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 2 and "token" in out.stderr and "Traceback" not in out.stderr
    short = tmp_path / "token"
    short.write_text("short\n")
    out = subprocess.run(
        [*cmd, "--host", "0.0.0.0", "--token-file", str(short)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2 and "shorter than 16" in out.stderr
