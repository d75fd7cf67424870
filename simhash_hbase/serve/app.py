"""The ASGI app of `shdb serve`: Starlette routes over one :class:`StoreWorker`.

Plain Starlette with orjson, not FastAPI: measured per request in-process
(benchmarks/serve.py), FastAPI's routing and pydantic bodies cost 2-4x the
framework time of Starlette's; the OpenAPI document is written out instead
(:mod:`simhash_hbase.serve.openapi`).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from importlib.resources import files
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from simhash_hbase.errors import InvalidInput, InvalidSetting, ShdbError
from simhash_hbase.fingerprint.minhash import check_similarity
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout.prepare import Preparer, Prints, assemble, checked, error_for
from simhash_hbase.layout.window import WindowSpec
from simhash_hbase.records import MAX_LIMIT, BadRecord, Document, Record
from simhash_hbase.serve import openapi
from simhash_hbase.serve.metrics import BUCKET_SECONDS, WINDOW_BUCKETS, Metrics
from simhash_hbase.serve.prepare import Preparers
from simhash_hbase.serve.settings import ServeSettings
from simhash_hbase.serve.wire import (
    NDJSON,
    ApiError,
    Item,
    document,
    dumps,
    dumps_lines,
    error_of,
    parse_body,
    parse_item,
    result_json,
)
from simhash_hbase.serve.worker import (
    Call,
    Check,
    Delete,
    QueueFull,
    ShuttingDown,
    StoreWorker,
    Terms,
    Write,
)
from simhash_hbase.store import local_path
from simhash_hbase.text.html import DEFAULT_HTML_MODE
from simhash_hbase.version import __version__

log = logging.getLogger("shdb.serve")
Handler = Callable[[Request], Awaitable[Response]]
#: An item's fingerprint then its probes, and its document (sketched); or its error.
Lookup = tuple[list[int], Document] | ApiError
_READY_ID = "shdb-serve-readyz"  # a lookup by id that answers from the store
_INLINE_TEXT_CHARS = 64 * 1024  # fingerprinted on the event loop below this; else a thread
_STATS_SECONDS = 60.0  # the status page's index size is counted at most this often


class Service:
    """The state behind the routes: settings, the index's worker, metrics."""

    def __init__(self, settings: ServeSettings, index: SimhashIndex | None = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._given = index  # opened (and closed) by the caller
        # Set while serving. The event loop uses only its fingerprinter and MinHash
        # (no store calls); every store call runs on the worker's thread.
        self.index: SimhashIndex | None = None
        self.worker: StoreWorker | None = None
        self.preparers: Preparers | None = None  # fingerprinting processes
        self._token = settings.token.encode() if settings.token else None
        self._stats: tuple[float, dict[str, Any]] | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        given = self._given
        index = given if given is not None else await anyio.to_thread.run_sync(self._open)
        await anyio.to_thread.run_sync(_warm, index)
        self.index = index
        self.worker = StoreWorker(
            index,
            capacity=self.settings.queue_documents,
            group=self.settings.group_documents,
            observer=self.metrics,
        )
        self.worker.start()
        if self.settings.fingerprint_workers:
            self.preparers = await Preparers.start(index.url, self.settings.fingerprint_workers)
        log.info("serving %s", index.url)
        try:
            yield
        finally:  # the server has finished its requests: drain, commit, close
            if self.preparers is not None:
                await self.preparers.stop()
            await anyio.to_thread.run_sync(self.worker.stop)
            if given is None:
                index.close()
            log.info("stopped: the queue is drained and committed, the index closed")

    def _open(self) -> SimhashIndex:
        return SimhashIndex.open(self.settings.index)

    # -- plumbing -------------------------------------------------------------------
    def endpoint(self, name: str, handler: Handler, *, auth: bool = True) -> Handler:
        """``handler`` with the token check, the error shape and the metrics."""

        async def run(request: Request) -> Response:
            started = time.perf_counter()
            try:
                if auth:
                    self._authorize(request)
                response = await handler(request)
            except ShdbError as exc:
                response = error_response(error_of(exc))
            self.metrics.request(name, response.status_code, time.perf_counter() - started)
            return response

        return run

    def _authorize(self, request: Request) -> None:
        if self._token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token
        ):
            raise ApiError(
                401,
                "unauthorized",
                "send the service's token as 'Authorization: Bearer TOKEN'",
                {"WWW-Authenticate": "Bearer"},
            )

    async def submit(self, op: Any, weight: int = 1) -> Any:
        if self.worker is None:
            raise ApiError(503, "starting", "the service is starting", {"Retry-After": "1"})
        try:
            future = self.worker.submit(op, weight)
        except QueueFull as exc:
            raise ApiError(
                429, "queue_full", str(exc), {"Retry-After": str(exc.retry_after)}
            ) from None
        except ShuttingDown as exc:
            raise ApiError(503, "shutting_down", str(exc), {"Retry-After": "5"}) from None
        return await future

    async def body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
        except ClientDisconnect:  # nobody reads the answer; nothing was queued
            raise ApiError(400, "client_disconnected", "the client went away") from None
        return b"".join(chunks)

    # -- the index endpoints ----------------------------------------------------------
    def items(self, kind: str) -> Handler:
        """POST /v1/check, /v1/add, /v1/check-and-add: one item, an array or NDJSON."""

        async def handle(request: Request) -> Response:
            k, limit, probes, similarity = self._params(request)
            window = _window_param(request, self.settings.within)
            content_type = request.headers.get("content-type", "")
            objs, batch = parse_body(
                await self.body(request), content_type, self.settings.max_items
            )
            self.metrics.batch.labels(kind).observe(len(objs))
            items: list[Item | ApiError] = [self._item(obj, kind) for obj in objs]
            lookups = await self._fingerprint(items, probes, kind == "check")
            whole = _flag(request, "all_or_nothing") and kind != "check"
            answers = await self._run(
                kind, items, lookups, Terms(k, limit, similarity, window), whole
            )
            for answer in answers:
                self.metrics.documents.labels(kind, _outcome(answer)).inc()
            if not batch:
                (answer,) = answers
                if isinstance(answer, ApiError):
                    raise answer
                return json_response(answer)
            rows = [a.body() if isinstance(a, ApiError) else a for a in answers]
            if content_type.split(";")[0].strip().lower() == NDJSON:
                return Response(dumps_lines(rows), media_type=NDJSON)
            return json_response(rows)

        return handle

    def _params(self, request: Request) -> tuple[int, int, int, float | None]:
        """k, limit, probes and similarity: the query string's, else the service's."""
        s = self.settings
        k = _int_param(request, "k", s.k, 0, 64)
        similarity = _similarity_param(request, s.similarity)
        if self.worker is not None:
            self.worker.index.scheme.check_k(k)  # here, not in a group of others' writes
            self.worker.index.at_similarity(similarity)  # an index without sketches: 400
        return (
            k,
            _int_param(request, "limit", s.limit, 1, MAX_LIMIT),
            _int_param(request, "probes", s.probes, 0, 64),
            similarity,
        )

    def _item(self, obj: Any, kind: str) -> Item | ApiError:
        try:
            return parse_item(
                obj,
                needs_id=kind != "check",
                max_text_bytes=self.settings.max_text_bytes,
                html=self.index.params.html if self.index is not None else DEFAULT_HTML_MODE,
            )
        except ShdbError as exc:
            return error_of(exc)

    async def _fingerprint(
        self, items: list[Item | ApiError], probes: int, lookup: bool
    ) -> list[Lookup]:
        """Each item's lookup (see :data:`Lookup`), or its error. Texts go to the
        fingerprinting workers, else (none running) to a thread above
        ``_INLINE_TEXT_CHARS``, else are done here (cheaper than a thread hop). An
        item to write is checked as a stored document; a ``lookup``'s need not be."""
        texts = [i.text for i in items if isinstance(i, Item) and i.text is not None]
        prints: list[Prints] = []
        if texts and self.preparers is not None and self.preparers.size:
            prints = await self.preparers.prepare(texts, probes)
        elif texts:
            assert self.index is not None
            preparer = Preparer(self.index.fingerprinter, self.index.minhasher, probes)
            if sum(map(len, texts)) > _INLINE_TEXT_CHARS:
                prints = await anyio.to_thread.run_sync(preparer.prints_of, texts)
            else:
                prints = preparer.prints_of(texts)
        done = iter(prints)
        return [_lookup(item, done, lookup) for item in items]

    async def _run(
        self,
        kind: str,
        items: list[Item | ApiError],
        lookups: list[Lookup],
        terms: Terms,
        whole: bool = False,
    ) -> list[dict[str, Any] | ApiError]:
        """Queue the good items as one operation; answers in item order. Every item is
        checked first; with ``whole`` (``?all_or_nothing=true``) a bad one keeps the
        others from being written (their answer: ``not_written``)."""
        answers: list[dict[str, Any] | ApiError] = []
        good: list[tuple[int, Item, list[int], Document]] = []
        for n, (item, lookup) in enumerate(zip(items, lookups)):
            if isinstance(lookup, ApiError):
                answers.append(lookup)
                continue
            assert isinstance(item, Item)
            plist, doc = lookup
            answers.append({})
            good.append((n, item, plist, doc))
        if not good:
            return answers
        if whole and len(good) < len(items):
            bad = next(n for n, a in enumerate(answers) if isinstance(a, ApiError))
            held = _not_written(bad)
            return [a if isinstance(a, ApiError) else held for a in answers]
        lists = [plist for _, _, plist, _ in good]
        docs = [doc for *_, doc in good]
        if kind == "check":
            op: Any = Check(lists, [(d.sketch, d.bands) for d in docs], terms)
        else:
            op = Write(docs, lists, terms, always=kind == "add")
        found = await self.submit(op, len(good))
        for (n, item, plist, _), matches in zip(good, found):
            new = None if kind == "check" else matches.total == 0
            answers[n] = result_json(item, plist[0], matches, new)
        return answers

    async def get_doc(self, request: Request) -> Response:
        doc_id = _path_id(request)
        doc = await self.submit(Call(lambda index: index.get(doc_id)))
        if doc is None:
            raise ApiError(404, "not_found", f"no document {doc_id!r}")
        return json_response(doc.to_json())

    async def delete_doc(self, request: Request) -> Response:
        doc_id = _path_id(request)
        if not await self.submit(Delete([doc_id])):
            raise ApiError(404, "not_found", f"no document {doc_id!r}")
        return json_response({"id": doc_id, "deleted": True})

    async def delete_docs(self, request: Request) -> Response:
        """DELETE /v1/docs: a JSON array of ids (or NDJSON), removed in one batch."""
        content_type = request.headers.get("content-type", "")
        ids, _ = parse_body(await self.body(request), content_type, self.settings.max_items)
        if not all(isinstance(i, str) for i in ids):
            raise ApiError(400, "invalid_item", "the body is a JSON array of ids (strings)")
        removed = set(await self.submit(Delete(ids), len(ids)))
        missing = [i for i in ids if i not in removed]
        return json_response({"removed": [i for i in ids if i in removed], "missing": missing})

    # -- operations -----------------------------------------------------------------
    async def healthz(self, _request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, _request: Request) -> Response:
        """Ready when the store answers a lookup within 5 s."""
        try:
            with anyio.fail_after(5):
                await self.submit(Call(lambda index: index.get(_READY_ID)))
        except TimeoutError:
            raise ApiError(503, "not_ready", "the store did not answer within 5 s") from None
        except ApiError as exc:
            raise ApiError(503, "not_ready", exc.message) from None
        return json_response({"status": "ready"})

    async def metrics_text(self, _request: Request) -> Response:
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def status(self, _request: Request) -> Response:
        """What the status page shows: settings, index size, the recent window."""
        now = time.monotonic()
        if self._stats is None or now - self._stats[0] > _STATS_SECONDS:
            self._stats = (now, await self.submit(Call(_index_stats)))
        s = self.settings
        return json_response(
            {
                "version": __version__,
                "url": self.index.url if self.index is not None else None,
                "index": self._stats[1],
                "settings": {
                    "k": s.k,
                    "limit": s.limit,
                    "probes": s.probes,
                    "similarity": s.similarity,
                    "within": s.within,
                    "max_items": s.max_items,
                    "max_body_bytes": s.max_body_bytes,
                    "queue_documents": s.queue_documents,
                    "token_required": s.token is not None,
                },
                "queue": self.worker.waiting if self.worker else 0,
                "now": time.time(),  # the chart's time axis ends here (the server's clock)
                "bucket_seconds": BUCKET_SECONDS,
                "window_seconds": BUCKET_SECONDS * WINDOW_BUCKETS,
                "recent": self.metrics.recent.summary(),
            }
        )

    async def page(self, _request: Request) -> Response:
        return HTMLResponse(files("simhash_hbase.serve").joinpath("status.html").read_text("utf-8"))

    async def openapi_json(self, _request: Request) -> Response:
        return json_response(openapi.document(__version__))

    async def docs(self, _request: Request) -> Response:
        return HTMLResponse(openapi.html(openapi.document(__version__)))


def _lookup(item: Item | ApiError, prints: Iterator[Prints], lookup: bool) -> Lookup:
    """The item's lookup: a fingerprint's own, or its text's next prints made a
    document by the one preparer (:func:`assemble`); a write's is checked."""
    if isinstance(item, ApiError):
        return item
    if item.text is not None:
        record = Record(item.doc_id or "", item.text, item.meta, time=item.time)
        found = assemble(record, next(prints), item.store_text, lookup=lookup)
        if isinstance(found, BadRecord):
            return error_of(error_for(found))
        return found.probes, found.doc
    assert item.fingerprint is not None  # an item has a text or a fingerprint
    doc = document(item, item.fingerprint)
    held = doc if lookup else checked(doc)
    if isinstance(held, BadRecord):
        return error_of(error_for(held))
    return [item.fingerprint], held


def _index_stats(index: SimhashIndex) -> dict[str, Any]:
    """The index's stats, where counting is cheap (embedded: LMDB's own counts). On
    HBase counting is a full scan of both tables: only the settings are shown."""
    if local_path(index.url) is not None:
        return index.stats()
    return {
        "store": "hbase",
        "documents": None,
        "scheme": index.scheme.name,
        "exact_for_k": index.scheme.k,
        "fingerprint": index.manifest["fingerprint"],
        "counted_by": "unknown on HBase: counting is a full scan of both tables (run "
        "shdb stats, or HBase's RowCounter on big tables)",
    }


def _warm(index: SimhashIndex) -> None:
    """Load the segmenter, IDF table and MinHash before the first request."""
    index.fingerprinter.fingerprint("预热 warm-up")
    _ = index.minhasher


def create_app(settings: ServeSettings, index: SimhashIndex | None = None) -> Starlette:
    """The service; ``index`` (opened by the caller, who closes it) or settings.index."""
    svc = Service(settings, index)
    e = svc.endpoint
    routes = [
        Route("/v1/check", e("check", svc.items("check")), methods=["POST"]),
        Route("/v1/add", e("add", svc.items("add")), methods=["POST"]),
        Route(
            "/v1/check-and-add", e("check-and-add", svc.items("check-and-add")), methods=["POST"]
        ),
        Route("/v1/docs/{doc_id:path}", e("get", svc.get_doc), methods=["GET"]),
        Route("/v1/docs/{doc_id:path}", e("delete", svc.delete_doc), methods=["DELETE"]),
        Route("/v1/docs", e("delete", svc.delete_docs), methods=["DELETE"]),
        Route("/v1/status", e("status", svc.status), methods=["GET"]),
        Route("/healthz", e("healthz", svc.healthz, auth=False), methods=["GET"]),
        Route("/readyz", e("readyz", svc.readyz, auth=False), methods=["GET"]),
        Route("/metrics", e("metrics", svc.metrics_text), methods=["GET"]),
        Route("/", e("page", svc.page, auth=False), methods=["GET"]),
        Route("/openapi.json", e("openapi", svc.openapi_json, auth=False), methods=["GET"]),
        Route("/docs", e("docs", svc.docs, auth=False), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=svc.lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    app.state.service = svc
    return app


def json_response(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")


def error_response(error: ApiError) -> Response:
    return Response(
        dumps(error.body()),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )


async def _http_error(_request: Request, exc: Exception) -> Response:
    """Unknown paths and methods, in the one error shape."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(ApiError(exc.status_code, code, str(exc.detail)))


async def _internal_error(_request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback here, never sent to the client."""
    log.error("internal error", exc_info=exc)
    return error_response(ApiError(500, "internal", "internal error (see the service's log)"))


def _outcome(answer: dict[str, Any] | ApiError) -> str:
    if isinstance(answer, ApiError):
        return "error"
    new = answer.get("new")
    return "check" if new is None else ("new" if new else "seen")


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # ASCII digits only: str.isdigit() also takes '²' and '⁵', which int() refuses
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise ApiError(
            400,
            "invalid_parameter",
            f"{name}={raw[:20]!r}: {name} must be an integer from {low} to {high}, in ASCII digits",
        )
    return int(raw)


def _similarity_param(request: Request, default: float | None) -> float | None:
    """?similarity=S, a number in (0, 1] (else the service's default)."""
    raw = request.query_params.get("similarity")
    if raw is None:
        return default
    value: object = raw
    with contextlib.suppress(ValueError):  # not a number: check_similarity says so
        value = float(raw)
    try:
        return check_similarity(value)
    except InvalidSetting as exc:
        raise ApiError(400, "invalid_parameter", f"similarity={raw[:20]!r}: {exc}") from None


def _window_param(request: Request, default: str | None) -> WindowSpec | None:
    """?within=DURATION, or ?since=TIME, and ?until=TIME; a request giving none: the
    service's --within. Resolved when the lookup runs (a within counts back from then)."""
    asked = [request.query_params.get(name) for name in ("within", "since", "until")]
    if asked == [None, None, None]:
        asked[0] = default
    try:
        return WindowSpec.parse(*asked, names=("within", "since", "until"))
    except InvalidInput as exc:
        raise ApiError(400, "invalid_parameter", str(exc)) from None


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise ApiError(400, "invalid_parameter", f"{name}={raw[:20]!r}: give true or false")
    return raw in ("true", "1")


def _not_written(bad: int) -> ApiError:
    return ApiError(
        409,
        "not_written",
        f"not written: item {bad} of the batch was refused and the request asked "
        "all_or_nothing; send this item again without the refused ones",
    )


_DOCS_PATH = b"/v1/docs/"


def _path_id(request: Request) -> str:
    """The document id of a /v1/docs/ path, read from the raw path: the decoded one
    (uvicorn's) turns invalid percent-encoding into U+FFFD, which names another id."""
    raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
    at = raw.find(_DOCS_PATH)
    try:
        return unquote_to_bytes(raw[at + len(_DOCS_PATH) :]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400,
            "invalid_id",
            f"the id in the path is not percent-encoded UTF-8 ({exc.reason} at byte "
            f"{exc.start}): encode the id's UTF-8 bytes, e.g. urllib.parse.quote(id, safe='')",
        ) from None


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413, "body_too_large", f"the body is over {limit} bytes (--max-body-bytes); split it"
    )
