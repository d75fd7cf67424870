"""Run the service under uvicorn until SIGTERM or Ctrl-C.

On either signal uvicorn stops accepting connections and lets the requests in
flight finish (their writes are queued, so they commit and are acknowledged);
then the app's lifespan drains whatever is still queued, commits it and closes
the index. uvicorn then re-raises the signal, so the exit status says "ended by
SIGTERM" (143 in a shell) as supervisors expect.
"""

from __future__ import annotations

import logging
import socket

import uvicorn

from simhash_hbase.serve.app import create_app
from simhash_hbase.serve.bounds import bounded
from simhash_hbase.serve.settings import ServeSettings

DRAIN_SECONDS = 30  # requests still in flight after this are cut off
log = logging.getLogger("shdb.serve")


def serve(settings: ServeSettings, sock: socket.socket, *, access_log: bool = False) -> None:
    """Serve on ``sock`` (:meth:`ServeSettings.listen`: bound before the index is opened)."""
    settings.check()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
    config = uvicorn.Config(
        create_app(settings),
        http=bounded(settings.limits),  # httptools, bounded before the token is read
        timeout_keep_alive=settings.idle_seconds,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        access_log=access_log,
        # Per request work nobody reads: client addresses from X-Forwarded-* (the
        # service logs no clients) and a Server header.
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=DRAIN_SECONDS,
        log_level="info",
    )
    # uvicorn says where it listens only for sockets it binds itself: say it here,
    # or --port 0 (the hint of a port in use) would leave the port to guess.
    log.info("listening on %s", address(sock))
    uvicorn.Server(config).run(sockets=[sock])


def address(sock: socket.socket) -> str:
    """The URL of the bound ``sock`` (its real port when --port 0 chose one)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
