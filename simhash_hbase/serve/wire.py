"""The service's request and answer bodies: items in, results out, one error shape.

An item is a JSON object: ``id`` (needed to add), ``text`` with ``format``
("auto", the default, "text" or "html", read by
:func:`simhash_hbase.text.extract.to_text`) or ``fingerprint`` (16 hex digits),
optional ``meta`` (a JSON object) and ``store_text``. A request body holds one
item, a JSON array of items, or NDJSON (one item a line, ``Content-Type:
application/x-ndjson``). Every error, of a request or of one item of a batch, is
``{"error": {"status": 400, "code": "...", "message": "..."}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from simhash_hbase.errors import EmptyDocument, InvalidInput, ShdbError
from simhash_hbase.records import (
    Document,
    Matches,
    fingerprint_to_hex,
    now_ms,
    parse_fingerprint_hex,
    parse_time,
)
from simhash_hbase.text.extract import TEXT_FORMATS, to_text
from simhash_hbase.text.html import DEFAULT_HTML_MODE

NDJSON = "application/x-ndjson"
_FIELDS = {"id", "text", "format", "fingerprint", "meta", "store_text", "time"}


class ApiError(ShdbError):
    """An answer other than 200, in the one error shape."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "code": self.code, "message": self.message}}


def error_of(exc: ShdbError) -> ApiError:
    """The answer for a library error: what went wrong, never a traceback."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, EmptyDocument):
        return ApiError(422, "no_terms", str(exc))
    if isinstance(exc, InvalidInput):
        return ApiError(400, "invalid_input", str(exc))
    return ApiError(503, "store_error", f"the index failed: {exc}")


@dataclass
class Item:
    """One parsed item: its text (to fingerprint) or its fingerprint."""

    doc_id: str | None
    text: str | None
    fingerprint: int | None
    meta: dict[str, Any] | None
    store_text: bool
    time: int | None = None  # when it arrived (ms since the epoch); None: when written


def parse_body(raw: bytes, content_type: str, max_items: int) -> tuple[list[Any], bool]:
    """The request's items (objects, unchecked) and whether it was a batch."""
    if content_type.split(";")[0].strip().lower() == NDJSON:
        lines = [(n, line) for n, line in enumerate(raw.split(b"\n"), 1) if line.strip()]
        _check_count(len(lines), max_items)
        return [_ndjson_line(line, n) for n, line in lines], True
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "malformed_json", f"the body is not JSON: {exc}{_hint(raw)}") from None
    if isinstance(body, list):
        _check_count(len(body), max_items)
        return body, True
    return [body], False


def _hint(raw: bytes) -> str:
    """What a body that is not JSON most likely is: NDJSON sent as JSON (its first
    line is a whole document), or text in another encoding than UTF-8."""
    first, newline, _ = raw.strip().partition(b"\n")
    if newline:
        try:
            orjson.loads(first)
            return f"; it looks like NDJSON: send it with Content-Type: {NDJSON}"
        except orjson.JSONDecodeError:
            pass
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in raw[:4]:
        return "; it looks like UTF-16: send the body as UTF-8"
    return ""


def _ndjson_line(line: bytes, number: int) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return ApiError(400, "malformed_json", f"line {number} is not JSON: {exc}")


def _check_count(n: int, max_items: int) -> None:
    if n > max_items:
        raise ApiError(
            413, "batch_too_large", f"{n} items in one request; send at most {max_items} a request"
        )
    if n == 0:
        raise ApiError(400, "empty_batch", "the batch holds no items")


def parse_item(
    obj: Any, *, needs_id: bool, max_text_bytes: int, html: str = DEFAULT_HTML_MODE
) -> Item:
    """One item, checked; :class:`ApiError` (400) says what is wrong with it."""
    if isinstance(obj, ApiError):
        raise obj
    if not isinstance(obj, dict):
        raise _bad(f"an item is a JSON object, not {type(obj).__name__}")
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise _bad(
            f"unknown field(s) {', '.join(unknown)}; an item has {', '.join(sorted(_FIELDS))}"
        )
    doc_id = obj.get("id")
    if doc_id is not None and not isinstance(doc_id, str):
        raise _bad(f"id must be a string, not {type(doc_id).__name__}")
    if needs_id and doc_id is None:
        raise _bad("an item to add needs its id")
    text, hex_fp = obj.get("text"), obj.get("fingerprint")
    if (text is None) == (hex_fp is None):
        raise _bad("give exactly one of text or fingerprint")
    meta, store_text = obj.get("meta"), obj.get("store_text", False)
    if meta is not None and not isinstance(meta, dict):
        raise _bad("meta must be a JSON object")
    if not isinstance(store_text, bool):
        raise _bad("store_text must be true or false")
    try:
        time = None if obj.get("time") is None else parse_time(obj["time"])
    except InvalidInput as exc:
        raise _bad(str(exc)) from None
    if hex_fp is not None:
        if not isinstance(hex_fp, str):
            raise _bad("fingerprint must be a string of 16 hex digits")
        if store_text:
            raise _bad("store_text needs a text, not a fingerprint")
        return Item(doc_id, None, parse_fingerprint_hex(hex_fp), meta, False, time)
    if not isinstance(text, str):
        raise _bad(f"text must be a string, not {type(text).__name__}")
    if len(text) > max_text_bytes // 4 and len(text.encode()) > max_text_bytes:
        raise ApiError(
            413, "text_too_large", f"the text has over {max_text_bytes} bytes (--max-text-bytes)"
        )
    fmt = obj.get("format", "auto")
    if fmt not in TEXT_FORMATS:
        raise _bad(f"format must be one of {', '.join(TEXT_FORMATS)}, not {fmt!r}")
    return Item(doc_id, to_text(text, fmt, html=html), None, meta, store_text, time)


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_item", message)


def document(item: Item, fingerprint: int) -> Document:
    """The item as a document arriving now, unless it says when (a lookup's has no
    id: it is never written)."""
    text = item.text if item.store_text else None
    when = now_ms() if item.time is None else item.time
    return Document(item.doc_id or "", fingerprint, text, item.meta, time=when)


def result_json(item: Item, fingerprint: int, matches: Matches, new: bool | None) -> dict[str, Any]:
    """The answer for one item: ``query --json``'s shape, with ``new`` for writes."""
    out: dict[str, Any] = {} if item.doc_id is None else {"id": item.doc_id}
    if new is not None:
        out["new"] = new
    out["fingerprint"] = fingerprint_to_hex(fingerprint)
    out.update(matches.to_json())
    return out


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def dumps_lines(values: list[Any]) -> bytes:
    return b"".join(orjson.dumps(v) + b"\n" for v in values)
