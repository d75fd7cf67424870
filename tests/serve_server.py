"""A real `shdb serve` process for the live tests (uvicorn, signals, kill -9)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(
        self, index: str, log: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "simhash_hbase", "serve", "--index", index, "--create"]
        cmd += ["--port", str(self.port), *args]
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
        self._wait_ready()

    def _wait_ready(self, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"shdb serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"shdb serve was not ready in {seconds} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def terminate(self, timeout: float = 60) -> bool:
        """SIGTERM, then wait for the drain; whether it ended as a drained server does
        (uvicorn re-raises the signal after its graceful shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        return code == -signal.SIGTERM and "the queue is drained and committed" in self.output()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@contextmanager
def live_server(
    index: str, log: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[Server]:
    server = Server(index, log, *args, env=env)
    try:
        yield server
    finally:
        server.kill()
