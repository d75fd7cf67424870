"""`shdb serve` under load: latency against offered load, and batched throughput.

The service runs as its own process (``python -m simhash_hbase serve``) on a fresh
embedded index, bound to 127.0.0.1; the load comes from this process over
loopback (httpx, asyncio), bounded in requests and seconds. The generator is
open-loop: request i is due at start + i / rate and its latency is counted from
then, so a slow server is not hidden by a generator that waits for it.

* Text check-and-add of ~2 KB Chinese texts at rising offered rates: p50/p99
  per rate (the plot), judged at 300 requests/s (floor: p99 <= 25 ms).
* Fingerprint check-and-add in batches of 1,000 per request, a few requests in
  flight, against the library's streaming dedup (``index_fingerprints`` with
  ``find_k=3``, the path of ``shdb ingest --fingerprints``) on the same
  fingerprints in the same run (floor: >= 50 %).
* The framework's own cost per request, in process: plain Starlette vs FastAPI
  with a pydantic body (why the service is plain Starlette).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from . import loadgen, report
from .common import ROOT, log
from .context import Context
from .registry import Figure, Section, Target, register
from .timing import latency_summary

TEXT_BYTES = 2048  # ~2 KB of UTF-8 Chinese per text
FLOOR_RATE = 300  # requests/s at which the p99 floor is judged
FLOOR_P99_MS = 25.0
BATCH = 1000  # fingerprints per request
IN_FLIGHT = 4  # batched requests in flight at once
STEP_GRACE = 30.0  # seconds an offered-load step waits for answers after its last is due


def _texts(ctx: Context, n: int) -> list[str]:
    """n texts of ~TEXT_BYTES: corpus documents cut (or repeated) to that size."""
    out = []
    for _, text in ctx.corpus():
        while len(text.encode()) < TEXT_BYTES:
            text += text
        cut = text.encode()[:TEXT_BYTES].decode("utf-8", "ignore")
        out.append(cut)
        if len(out) == n:
            break
    return out


class Server:
    """``shdb serve`` in its own process, on a free loopback port."""

    def __init__(self, index: Path, log_path: Path, *args: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "simhash_hbase", "serve", "--index", str(index), "--create"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--port", str(port), *args], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        self._wait()

    def _wait(self) -> None:
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"shdb serve exited {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("shdb serve did not get ready in 120 s")

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server and its fingerprinting workers have
        used so far."""
        pid = self.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return sum(map(_cpu_seconds, [pid, *map(int, children)]))

    def peak_rss_mib(self) -> float:
        """Peak resident memory (VmHWM) of the server and its fingerprinting workers,
        summed: each one's own peak."""
        pid = self.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return sum(map(_peak_kib, [pid, *map(int, children)])) / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far (0: it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_kib(pid: int) -> int:
    """Peak resident memory (VmHWM, KiB) of process ``pid`` (0: it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0
    return next(int(v.split()[1]) for v in status.splitlines() if v.startswith("VmHWM:"))


def _requests(texts: list[str], n: int, tag: str) -> list[bytes]:
    """n check-and-add requests, built before the step (nothing to build while timing)."""
    return [
        loadgen.post(
            "127.0.0.1",
            "/v1/check-and-add",
            orjson.dumps({"id": f"{tag}-{i}", "text": texts[i % len(texts)]}),
        )
        for i in range(n)
    ]


def _offered(
    server: Server, rate: float, seconds: float, texts: list[str], tag: str
) -> dict[str, Any]:
    """Open-loop load at ``rate`` for ``seconds`` (benchmarks/loadgen.py): latency
    from each request's due time; what is unanswered STEP_GRACE s after the last is
    due fails. With the server's CPU per answered request, and the cores the server
    and the generator got together (of the machine's, shared with its other work)."""
    requests = _requests(texts, max(1, int(rate * seconds)), tag)
    cpu, own, wall = server.cpu_seconds(), time.process_time(), time.perf_counter()
    outcome = _run(loadgen.open_loop(server.url, requests, rate, grace=STEP_GRACE))
    server_cpu = server.cpu_seconds() - cpu
    ok = outcome.ok()
    return {
        "rate": rate,
        "requests": len(requests),
        "ok": len(ok),
        "achieved": round(len(ok) / outcome.wall, 1),
        # CPU per answered request: what the service costs, whatever else runs here
        "server_cpu_ms": server_cpu * 1e3 / max(1, len(ok)),
        "cores": (server_cpu + time.process_time() - own) / (time.perf_counter() - wall),
        **latency_summary(ok),
    }


def fsync_latency(work: Path, n: int) -> dict[str, float]:
    """p50/p99 of one durable 4 KB page write (pwrite + fdatasync) in the bench's
    work directory: the floor under a durably acknowledged write on this disk
    (an LMDB commit syncs once), measured in the same run."""
    fd = os.open(work / "fsync-probe", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        took = []
        for i in range(n):
            os.pwrite(fd, os.urandom(4096), (i % 16) * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            took.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return latency_summary(took)


def _load_steps(
    work: Path, rates: list[int], seconds: float, texts: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """The offered-load steps on two services side by side, each rate on both in
    turn: as shipped (texts fingerprinted in worker processes) and with
    ``--fingerprint-workers 0`` (on the event loop, the baseline)."""
    configs: dict[str, list[str]] = {"load": [], "load_inline": ["--fingerprint-workers", "0"]}
    servers = {
        name: Server(work / f"texts-{name}", work / f"serve-{name}.log", *args)
        for name, args in configs.items()
    }
    steps: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    try:
        for name, server in servers.items():  # connections, caches
            _offered(server, 20, 2.0, texts, f"warm-{name}")
        for rate in rates:
            for name, server in servers.items():
                step = _offered(server, rate, seconds, texts, f"{name}-r{rate}")
                log(
                    f"serve ({name}): offered {rate}/s -> {step['achieved']}/s, "
                    f"p50 {step['p50_ms']:.1f} ms, p99 {step['p99_ms']:.1f} ms, "
                    f"server CPU {step['server_cpu_ms']:.2f} ms/request, "
                    f"{step['cores']:.2f} cores used"
                )
                steps[name].append(step)
    finally:
        for server in servers.values():
            server.stop()
    return steps


def _run(coro: Any) -> Any:
    """``coro`` on uvloop where installed (the generator's own CPU is what it saves)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def _batched(url: str, fps: list[int]) -> float:
    """Seconds to check-and-add ``fps`` in requests of BATCH, IN_FLIGHT at a time."""
    import httpx

    chunks = [fps[i : i + BATCH] for i in range(0, len(fps), BATCH)]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(chunks)):
        queue.put_nowait(i)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            body = [
                {"id": f"b{i}-{j}", "fingerprint": f"{fp:016x}"} for j, fp in enumerate(chunks[i])
            ]
            r = await client.post(f"{url}/v1/check-and-add?limit=1", json=body)
            r.raise_for_status()

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(worker(client) for _ in range(IN_FLIGHT)))
    return time.perf_counter() - started


def _library_dedup(index: Path, fps: list[int]) -> float:
    """Seconds of the library's streaming dedup of ``fps`` into a fresh index."""
    from simhash_hbase import SimhashIndex
    from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

    with SimhashIndex.open(str(index)) as ix:
        started = time.perf_counter()
        items = ((f"b{i}", fp) for i, fp in enumerate(fps))
        index_fingerprints(ix, items, IngestOptions(find_k=3, limit=1))
        return time.perf_counter() - started


def framework_overhead(rounds: int) -> dict[str, float]:
    """Microseconds per request of the bare frameworks, in process (no server)."""
    import orjson
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def plain(request: Request) -> Response:
        body = orjson.loads(await request.body())
        return Response(orjson.dumps({"id": body.get("id"), "matches": []}))

    apps: dict[str, Any] = {"starlette": Starlette(routes=[Route("/c", plain, methods=["POST"])])}
    try:
        from fastapi import FastAPI
        from pydantic import BaseModel
    except ImportError:
        log("serve: FastAPI is not installed; only Starlette's overhead is measured")
    else:

        class Item(BaseModel):
            id: str | None = None
            text: str | None = None

        fast = FastAPI()

        @fast.post("/c")
        async def checked(item: Item) -> dict[str, Any]:
            return {"id": item.id, "matches": []}

        apps["fastapi"] = fast
    body = orjson.dumps({"id": "d1", "text": "中文" * 700})
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/c",
        "raw_path": b"/c",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8080),
    }

    async def call(app: Any) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            pass

        await app(dict(scope), receive, send)

    async def measure() -> dict[str, float]:
        best: dict[str, float] = {}
        for _ in range(3):  # alternate rounds; best of each
            for name, app in apps.items():
                for _ in range(100):
                    await call(app)
                started = time.perf_counter()
                for _ in range(rounds):
                    await call(app)
                us = (time.perf_counter() - started) / rounds * 1e6
                best[name] = min(best.get(name, us), us)
        return best

    return asyncio.run(measure())


def run(ctx: Context) -> dict[str, Any]:
    rates = ctx.pick(
        smoke=[20, 50], quick=[50, 100, 200, 300, 400], full=[50, 100, 200, 300, 400, 500, 700]
    )
    seconds = ctx.pick(smoke=2.0, quick=6.0, full=20.0)
    n_fps = ctx.pick(smoke=5_000, quick=100_000, full=500_000)
    texts = _texts(ctx, 2000)
    fps = [int(x) for x in ctx.fingerprints(n_fps)]
    work = ctx.work / "serve"
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"text_bytes": TEXT_BYTES, "seconds": seconds, "batch": BATCH}
    out["framework_us"] = framework_overhead(ctx.pick(smoke=200, quick=3000, full=10000))
    out["fsync"] = fsync_latency(work, ctx.pick(smoke=20, quick=200, full=1000))
    out.update(_load_steps(work, rates, seconds, texts))
    # Batched fingerprints, then the library on the same fingerprints, twice each
    # alternating (a burst of load on the shared machine hits both alike).
    service, library = [], []
    for round_ in range(2):
        server = Server(work / f"fps-{round_}", work / "serve-fps.log")
        try:
            service.append(asyncio.run(_batched(server.url, fps)))
        finally:
            server.stop()
        library.append(_library_dedup(work / f"lib-{round_}", fps))
    out["fingerprints"] = len(fps)
    out["service_rate"] = len(fps) / min(service)
    out["library_rate"] = len(fps) / min(library)
    return out


def _at_floor(r: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in r.get("load", []) if s["rate"] == FLOOR_RATE), None)


def _fsync_note(r: dict[str, Any]) -> str:
    fsync = r.get("fsync")
    if fsync is None:
        return ""
    return (
        f"a durable commit's fdatasync on this disk, same run: p50 {fsync['p50_ms']:.1f} ms, "
        f"p99 {fsync['p99_ms']:.1f} ms"
    )


def figures(r: dict[str, Any]) -> list[Figure]:
    out = []
    step = _at_floor(r)
    if step is not None:
        out.append(
            Figure.judge(
                f"text check-and-add p99 at {FLOOR_RATE} req/s (~2 KB Chinese) / floor",
                step["p99_ms"] / FLOOR_P99_MS,
                Target.at_most(1.0),
                measured=f"p99 {step['p99_ms']:.1f} ms, p50 {step['p50_ms']:.1f} ms, "
                f"{step['achieved']}/s served ({step['ok']} of {step['requests']} answered "
                "200), server CPU "
                f"{step.get('server_cpu_ms', float('nan')):.2f} ms/request, "
                f"{step.get('cores', float('nan')):.2f} of 2 cores got",
                baseline=f"the floor, {FLOOR_P99_MS:.0f} ms",
                bound="; ".join(
                    x
                    for x in (
                        "fingerprinting, HTTP and the commits on the same 2 cores as the "
                        "generator and the machine's other work",
                        _fsync_note(r),
                    )
                    if x
                ),
            )
        )
    inline = next((s for s in r.get("load_inline", []) if s["rate"] == FLOOR_RATE), None)
    if step is not None and inline is not None:
        out.append(
            Figure.report(
                f"text check-and-add at {FLOOR_RATE} req/s: fingerprinting workers vs the "
                "event loop",
                f"p99 {step['p99_ms']:.1f} vs {inline['p99_ms']:.1f} ms, p50 "
                f"{step['p50_ms']:.1f} vs {inline['p50_ms']:.1f} ms, server CPU "
                f"{step['server_cpu_ms']:.2f} vs {inline['server_cpu_ms']:.2f} ms/request",
                "--fingerprint-workers 0, same run, rates taken in turn",
            )
        )
    if "service_rate" in r:
        out.append(
            Figure.judge(
                f"batched fingerprint check-and-add ({BATCH}/request) / library streaming dedup",
                r["service_rate"] / r["library_rate"],
                Target.at_least(0.5, "%"),
                measured=f"{r['service_rate']:,.0f} docs/s",
                baseline=f"index_fingerprints(find_k=3) {r['library_rate']:,.0f} docs/s",
                bound="JSON in and out per fingerprint (orjson), on the same 2 cores",
            )
        )
    fw = r.get("framework_us", {})
    if "fastapi" in fw:
        out.append(
            Figure.report(
                "framework time per request: FastAPI (pydantic body) / Starlette",
                f"{fw['fastapi']:.0f} us vs {fw['starlette']:.0f} us "
                f"({fw['fastapi'] / fw['starlette']:.1f}x)",
                "Starlette, in process, same run",
            )
        )
    return out


def render(results: dict[str, Any]) -> str:
    r = results["serve"]
    where = {"load": "worker processes", "load_inline": "event loop (baseline)"}
    rows = [
        (
            s["rate"],
            where[name],
            s["achieved"],
            s["ok"],
            report.fmt(s["p50_ms"], 1),
            report.fmt(s["p99_ms"], 1),
            report.fmt(s.get("server_cpu_ms"), 2),
            report.fmt(s.get("cores"), 2),
        )
        for i in range(len(r["load"]))
        for name in where
        if name in r
        for s in [r[name][i]]
    ]
    fw = r["framework_us"]
    return report.fill(
        "bench/serve.md",
        seconds=f"{r['seconds']:g}",
        table=report.table(
            (
                "offered req/s",
                "texts fingerprinted on",
                "served req/s",
                "answered",
                "p50 ms",
                "p99 ms",
                "server CPU ms/req",
                "cores used",
            ),
            rows,
        ),
        fingerprints=f"{r['fingerprints']:,}",
        batch=f"{r['batch']:,}",
        service_rate=f"{r['service_rate']:,.0f}",
        library_rate=f"{r['library_rate']:,.0f}",
        starlette_us=f"{fw['starlette']:.0f}",
        fsync_p50=report.fmt(r.get("fsync", {}).get("p50_ms"), 1),
        fsync_p99=report.fmt(r.get("fsync", {}).get("p99_ms"), 1),
        fastapi_us=report.fmt(fw.get("fastapi"), 0),
    )


register(Section("serve", "shdb serve under load", run, figures, render, order=60))
