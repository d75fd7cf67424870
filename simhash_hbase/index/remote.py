"""A thin client of ``shdb serve``: the check, add and check-and-add methods of
:class:`~simhash_hbase.index.client.SimhashIndex`, over HTTP.

with RemoteIndex("http://127.0.0.1:8080") as index:
    (found,) = index.check_and_add_texts([("doc-1", html)], always=False)
    if not found.total:   # no near-copies: it was new (and is now held)
        crawl_on(...)

Standard library only (one keep-alive connection per thread), so a crawler needs
nothing but this package. The service serialises writes: of many identical
check-and-add submissions, from any number of clients, exactly one is new.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from simhash_hbase.errors import (
    BatchRefused,
    InvalidInput,
    ShdbError,
    StoreError,
    StoreUnavailable,
)
from simhash_hbase.fingerprint.minhash import check_similarity
from simhash_hbase.layout.window import Window
from simhash_hbase.records import (
    Document,
    Match,
    Matches,
    Time,
    fingerprint_to_hex,
    parse_fingerprint_hex,
    parse_time,
)

TOKEN_ENV = "SHDB_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
_K = 3  # the service's default k (simhash_hbase.index.client.DEFAULT_K)
_IDLE = 3.0  # seconds a kept-alive connection is reused after its last answer
_WRITES = ("add", "check-and-add")


class RemoteError(ShdbError):
    """The service refused a request; ``status`` and ``code`` are its answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {code})")
        self.status, self.code = status, code


class RemoteIndex:
    """The index behind ``shdb serve`` at ``url`` (token: ``$SHDB_TOKEN`` if not given)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 5,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"service URL {url!r}: give http://HOST:PORT or https://HOST:PORT")
        self.url = url.rstrip("/")
        self._parts = parts
        self._token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._timeout = timeout
        self._retries = retries  # answers of 429 (queue full) are retried after Retry-After
        self._local = threading.local()
        self._similarity: float | None = None  # None: the service's
        self._window: Window | None = None  # None: the service's (its --within, or none)

    def at_similarity(self, similarity: float | None) -> RemoteIndex:
        """This client asking the service to judge at ``similarity`` (``?similarity=``;
        None: as is), as :meth:`SimhashIndex.at_similarity`; it shares the connections."""
        if similarity is None:
            return self
        view = copy.copy(self)
        view._similarity = check_similarity(similarity)
        return view

    def within(self, window: Window | None) -> RemoteIndex:
        """This client asking the service to match only documents inside ``window``
        (``?since=``/``?until=``; None: the service's default), as
        :meth:`SimhashIndex.within`; it shares the connections."""
        if window is None or not window.bounded:
            return self
        view = copy.copy(self)
        view._window = window
        return view

    def __enter__(self) -> RemoteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- the local client's methods -----------------------------------------------
    def query(
        self,
        text: str,
        k: int = _K,
        *,
        probes: int | None = None,
        limit: int | None = None,
        fmt: str = "auto",
    ) -> Matches:
        """The ``limit`` nearest near-copies of the text (``fmt`` "html": of its
        visible text) and their count; None: the service's defaults."""
        item = {"text": text, "format": fmt}
        return _matches(self._one("check", item, k=k, probes=probes, limit=limit))

    def query_many(
        self,
        texts: Iterable[str],
        k: int = _K,
        *,
        probes: int | None = None,
        limit: int | None = None,
        fmt: str = "auto",
    ) -> list[Matches]:
        items = [{"text": text, "format": fmt} for text in texts]
        found = self._batch("check", items, k=k, probes=probes, limit=limit)
        return [_matches(r) for r in found]

    def query_fingerprint(self, fp: int, k: int = _K, *, limit: int | None = None) -> Matches:
        item = {"fingerprint": fingerprint_to_hex(fp)}
        return _matches(self._one("check", item, k=k, limit=limit))

    def query_fingerprints(
        self, fps: Sequence[int], k: int = _K, *, limit: int | None = None
    ) -> list[Matches]:
        items = [{"fingerprint": fingerprint_to_hex(fp)} for fp in fps]
        return [_matches(r) for r in self._batch("check", items, k=k, limit=limit)]

    def add(
        self,
        doc_id: str,
        text: str,
        meta: dict[str, Any] | None = None,
        *,
        store_text: bool = False,
        fmt: str = "auto",
        time: Time = None,
    ) -> int:
        """Index ``text`` under ``doc_id`` (replacing an earlier version); its fingerprint.
        ``time``: when it arrived (RFC 3339 or epoch seconds; None: when it is written)."""
        item: dict[str, Any] = {"id": doc_id, "text": text, "format": fmt, "meta": meta}
        item["store_text"] = store_text
        if time is not None:
            item["time"] = time
        return parse_fingerprint_hex(self._one("add", item)["fingerprint"])

    def add_fingerprint(self, doc_id: str, fp: int, meta: dict[str, Any] | None = None) -> None:
        self._one("add", {"id": doc_id, "fingerprint": fingerprint_to_hex(fp), "meta": meta})

    def check_and_add_texts(
        self,
        items: Sequence[tuple[str, str]],
        *,
        fmt: str = "auto",
        k: int = _K,
        probes: int | None = None,
        limit: int | None = None,
        always: bool = True,
    ) -> list[Matches]:
        """Each (id, raw text or HTML) item's near-copies (none: it was new);
        ``always`` writes every item, else only the new ones. One request."""
        body = [{"id": doc_id, "text": raw, "format": fmt} for doc_id, raw in items]
        endpoint = "add" if always else "check-and-add"
        found = self._batch(endpoint, body, k=k, probes=probes, limit=limit)
        return [_matches(r) for r in found]

    def check_and_add(
        self, docs: Sequence[Document], k: int = _K, *, always: bool = False
    ) -> list[Matches]:
        """Each document's near-copies; those with none are new and written (all of
        them with ``always``). Documents go by fingerprint: a text is not sent."""
        if any(d.text is not None for d in docs):
            raise InvalidInput(
                "RemoteIndex.check_and_add sends fingerprints, not texts: "
                "use check_and_add_texts to send texts"
            )
        items = [
            {"id": d.doc_id, "fingerprint": fingerprint_to_hex(d.fingerprint), "meta": d.meta}
            | ({} if d.time is None else {"time": d.time / 1000})
            for d in docs
        ]
        endpoint = "add" if always else "check-and-add"
        return [_matches(r) for r in self._batch(endpoint, items, k=k)]

    def get(self, doc_id: str) -> Document | None:
        status, body = self._call("GET", _doc_path(doc_id), None, {})
        if status == 404:
            return None
        fp = parse_fingerprint_hex(body["fingerprint"])
        return Document(body["id"], fp, body["text"], body["meta"], time=_time(body))

    def remove(self, doc_id: str) -> bool:
        """Delete a document; False if it was not there."""
        status, _ = self._call("DELETE", _doc_path(doc_id), None, {})
        return status != 404

    # -- HTTP -----------------------------------------------------------------------
    def _one(self, endpoint: str, item: dict[str, Any], **params: int | None) -> dict[str, Any]:
        """One item's answer; its error as itself (a batch's: :class:`BatchRefused`)."""
        try:
            (result,) = self._batch(endpoint, [item], **params)
        except BatchRefused as exc:
            raise exc.refused[0] from None
        return result

    def _batch(
        self, endpoint: str, items: list[dict[str, Any]], **params: int | None
    ) -> list[dict[str, Any]]:
        """One request of ``items``, as the local client's batch calls behave: a bad
        item (refused here, or by the service) raises :class:`BatchRefused` and
        nothing is written (writes go ``all_or_nothing``), so a retry of the others
        gets their true answers."""
        if not items:
            return []
        body = _body(items)
        query: dict[str, float | str | None] = {**params, "similarity": self._similarity}
        if self._window is not None:  # as ms-exact RFC 3339 text
            query.update(self._window.to_json())
        if endpoint in _WRITES:
            query["all_or_nothing"] = "true"
        _, results = self._call("POST", f"/v1/{endpoint}", body, query)
        refused: dict[int, ShdbError] = {
            i: RemoteError(r["error"]["status"], r["error"]["code"], r["error"]["message"])
            for i, r in enumerate(results)
            if "error" in r and r["error"]["code"] != "not_written"
        }
        if refused:
            raise BatchRefused(refused, len(items))
        return list(results)

    def _call(
        self, method: str, path: str, body: bytes | None, params: dict[str, float | str | None]
    ) -> tuple[int, Any]:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        target = f"{self._parts.path.rstrip('/')}{path}" + (f"?{query}" if query else "")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        for attempt in range(self._retries + 1):
            status, retry_after, answer = self._send(method, target, body, headers)
            if status != 429 or attempt == self._retries:
                break
            time.sleep(retry_after)
        if status == 404 and method in ("GET", "DELETE") and path.startswith("/v1/docs/"):
            return status, None
        if status >= 400:
            error = answer.get("error", {}) if isinstance(answer, dict) else {}
            code, message = error.get("code", "error"), error.get("message", "no message")
            if status >= 500 or status == 429:
                raise StoreError(f"{self.url}: {message} (HTTP {status}, {code})")
            raise RemoteError(status, code, message)
        return status, answer

    def _send(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, float, Any]:
        """One request. A connection the server dropped is reopened and the request
        sent again only when that cannot apply a write twice (GET, /v1/check): a
        check-and-add sent twice would find itself and answer "not new"."""
        try:
            response, raw = self._exchange(method, target, body, headers)
        except (ConnectionError, http.client.HTTPException) as exc:
            self.close()
            if method != "GET" and urlsplit(target).path != "/v1/check":
                raise StoreUnavailable(
                    f"{self.url} dropped the connection ({exc}); the write may or may not "
                    "have been applied: get the document to know"
                ) from exc
            try:
                response, raw = self._exchange(method, target, body, headers)
            except (ConnectionError, http.client.HTTPException) as again:
                self.close()
                raise StoreUnavailable(f"cannot reach {self.url}: {again}") from again
        retry_after = float(response.getheader("Retry-After") or 1)
        try:
            return response.status, retry_after, json.loads(raw) if raw else None
        except ValueError as exc:
            raise StoreError(f"{self.url} answered HTTP {response.status}, not JSON") from exc

    def _exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except ConnectionRefusedError as exc:  # nothing was sent
            self.close()
            raise StoreUnavailable(f"cannot reach {self.url}: {exc}") from exc
        except (ConnectionError, http.client.HTTPException):
            raise  # _send decides whether a new connection may send it again
        except OSError as exc:  # timed out, unreachable
            self.close()
            raise StoreUnavailable(f"cannot reach {self.url}: {exc}") from exc
        self._local.used = time.monotonic()
        return response, raw

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection; one idle longer than the server keeps it (uvicorn:
        5 s) is replaced first, so that a write is rarely sent on a closed one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - getattr(self._local, "used", 0.0) > _IDLE:
            self.close()
            conn = None
        if conn is None:
            kind = (
                http.client.HTTPSConnection
                if self._parts.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = kind(self._parts.hostname or "", self._parts.port, timeout=self._timeout)
            self._local.conn = conn
        return conn


def _doc_path(doc_id: str) -> str:
    if not isinstance(doc_id, str):
        raise InvalidInput(f"document id {doc_id!r:.80} is a {type(doc_id).__name__}, not a string")
    try:
        return f"/v1/docs/{quote(doc_id, safe='')}"
    except UnicodeEncodeError:
        raise InvalidInput(f"document id {doc_id!r:.80} holds a lone surrogate") from None


def _body(items: list[dict[str, Any]]) -> bytes:
    """The request body; an item JSON cannot carry (bytes, a set in meta, a lone
    surrogate) raises :class:`BatchRefused` naming it, before anything is sent."""
    parts, refused = [], {}
    for n, item in enumerate(items):
        fields = {k: v for k, v in item.items() if v is not None}
        try:
            text = fields.get("text")
            if text is not None and not isinstance(text, str):
                raise TypeError(f"the text is {type(text).__name__}, not a string: decode it")
            parts.append(json.dumps(fields, ensure_ascii=False, allow_nan=False).encode())
        except UnicodeEncodeError:
            refused[n] = InvalidInput(
                f"item {fields.get('id', n)!r:.80} holds a lone surrogate, not Unicode text: "
                "decode its source with errors='replace'"
            )
        except (TypeError, ValueError) as exc:  # json's own: a set, bytes, nan, a cycle
            refused[n] = InvalidInput(
                f"item {fields.get('id', n)!r:.80} cannot be sent as JSON: {exc} "
                "(meta is a JSON object of strings, numbers, lists and objects)"
            )
    if refused:
        raise BatchRefused(refused, len(items))
    return b"[" + b",".join(parts) + b"]"


def _matches(result: dict[str, Any]) -> Matches:
    found = (
        Match(
            m["id"],
            parse_fingerprint_hex(m["fingerprint"]),
            m["distance"],
            m["similarity"],
            _time(m),
        )
        for m in result["matches"]
    )
    matches = Matches(found, result["total"], result["total_exact"])
    matches.cluster = result.get("cluster")  # a write's: the cluster it joined
    return matches


def _time(item: dict[str, Any]) -> int | None:
    """A served document's or match's time (a service before times: None)."""
    value = item.get("time")
    return None if value is None else parse_time(value)
