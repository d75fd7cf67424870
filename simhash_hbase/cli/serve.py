"""`shdb serve`: the index as an HTTP service (simhash_hbase.serve, docs/serve.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from simhash_hbase.cli.options import (
    IndexOpt,
    KOpt,
    LimitOpt,
    QueryProbesOpt,
    RetainOpt,
    SimilarityOpt,
)
from simhash_hbase.cli.render import new_index
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.records import DEFAULT_LIMIT

HostOpt = Annotated[str, typer.Option(metavar="ADDR", help="Address to bind.")]
PortOpt = Annotated[int, typer.Option(metavar="PORT", min=0, max=65535)]
TokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="File holding the bearer token clients must send (else $SHDB_TOKEN); "
        "required to bind anything but loopback.",
    ),
]
MaxItemsOpt = Annotated[int, typer.Option(metavar="N", min=1, help="Items per request, at most.")]
MaxBodyOpt = Annotated[
    int, typer.Option(metavar="BYTES", min=1024, help="Request body size, at most.")
]
MaxTextOpt = Annotated[
    int, typer.Option(metavar="BYTES", min=1024, help="One item's text (UTF-8), at most.")
]
QueueOpt = Annotated[
    int, typer.Option(metavar="DOCS", min=1, help="Documents waiting to be written; beyond: 429.")
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        min=0,
        help="Processes that fingerprint texts [default: one per core but one, at least 1]; "
        "0: the server's own process.",
    ),
]
ServeWithinOpt = Annotated[
    str | None,
    typer.Option(
        metavar="DURATION",
        help="Requests that ask no window (?within=, ?since=, ?until=) match only documents "
        "that arrived in the last DURATION before each request (e.g. 30d; s, m, h, d, w).",
        show_default=False,
    ),
]
AccessLogOpt = Annotated[bool, typer.Option(help="Log every request.")]
ServeCreateOpt = Annotated[
    bool,
    typer.Option(
        "--create",
        envvar="SHDB_CREATE",
        metavar="",
        help="Create the index when there is none (said on stderr; also $SHDB_CREATE=1). "
        "Without it a missing index is an error: a mistyped --index never serves an empty "
        "index that calls every page new.",
    ),
]


def serve_cmd(
    index: IndexOpt = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8080,
    token_file: TokenFileOpt = None,
    k: KOpt = DEFAULT_K,
    limit: LimitOpt = DEFAULT_LIMIT,
    probes: QueryProbesOpt = None,
    similarity: SimilarityOpt = None,
    within: ServeWithinOpt = None,
    max_items: MaxItemsOpt = 10_000,
    max_body_bytes: MaxBodyOpt = 64 * 1024 * 1024,
    max_text_bytes: MaxTextOpt = 4 * 1024 * 1024,
    queue: QueueOpt = 200_000,
    fingerprint_workers: WorkersOpt = None,
    access_log: AccessLogOpt = False,
    create: ServeCreateOpt = False,
    retain: RetainOpt = None,
) -> None:
    """Serve the index over HTTP: check, add and check-and-add texts or fingerprints,
    one or in batches (see /docs on the running service, and docs/serve.md). -k,
    --limit, --probes, --similarity and --within are the defaults of requests that do
    not set them (--similarity on a new index: its recorded default)."""
    serve, settings_class, token_env = _service()
    settings = settings_class(
        index=index,
        host=host,
        port=port,
        token=_token(token_file, token_env),
        k=k,
        limit=limit,
        probes=DEFAULT_QUERY_PROBES if probes is None else probes,
        similarity=similarity,
        within=within,
        max_items=max_items,
        max_body_bytes=max_body_bytes,
        max_text_bytes=max_text_bytes,
        queue_documents=queue,
        fingerprint_workers=(
            _default_workers() if fingerprint_workers is None else fingerprint_workers
        ),
    )
    settings.check()  # a bad bind or token is said before the index is looked at
    with settings.listen() as sock:  # and a port in use, before the index is opened or made
        _open_or_create(index, create, similarity, retain)
        serve(settings, sock, access_log=access_log)


def _open_or_create(
    index: str | None, create: bool, similarity: float | None, retain: int | None
) -> None:
    """The index must be there, or ``create`` makes it (said once, on stderr); a
    similarity needs its sketches (both nets); ``retain``: a new index's retention."""
    from simhash_hbase.index.client import SimhashIndex

    opened = SimhashIndex.open(
        index, create=create, readonly=not create, similarity=similarity, retain=retain
    )
    with opened as ix:
        if ix.created:
            new_index(ix.url)


def _default_workers() -> int:
    """One per core but the one the server's event loop and store thread use."""
    return max(1, (os.cpu_count() or 1) - 1)


def _service() -> tuple[Any, Any, str]:
    """The service's runner, settings and token variable (the serve extra, loaded here)."""
    try:
        from simhash_hbase.serve.run import serve
        from simhash_hbase.serve.settings import TOKEN_ENV, ServeSettings
    except ImportError as exc:
        raise InvalidInput(
            f"shdb serve needs the serve extra ({exc.name} is missing): "
            "pip install 'simhash-hbase[serve]'"
        ) from None
    return serve, ServeSettings, TOKEN_ENV


def _token(token_file: Path | None, env: str) -> str | None:
    """The bearer token: the file's, else the environment's, else none."""
    if token_file is None:
        return os.environ.get(env) or None
    try:
        return token_file.read_text("utf-8").strip()
    except OSError as exc:
        raise InvalidInput(f"cannot read --token-file {token_file}: {exc.strerror}") from None
