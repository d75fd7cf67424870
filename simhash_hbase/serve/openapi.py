"""The service's OpenAPI 3.1 document (/openapi.json) and its reading at /docs.

Written out rather than generated: the handlers parse bodies with orjson, not
pydantic (see :mod:`simhash_hbase.serve.app`). /docs renders it on the server,
so it works offline (no Swagger UI from a CDN).
"""

from __future__ import annotations

import html as html_lib
import json
from typing import Any

_HEX = {"type": "string", "pattern": "^(0x)?[0-9a-fA-F]{1,16}$", "example": "3f2a9c0d11e4b7a8"}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["status", "code", "message"],
            "properties": {
                "status": {"type": "integer"},
                "code": {"type": "string", "example": "invalid_item"},
                "message": {"type": "string"},
            },
        }
    },
}
_ITEM = {
    "type": "object",
    "description": "Exactly one of text and fingerprint. id is needed to add.",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "description": "1 to 1024 bytes of UTF-8"},
        "text": {"type": "string"},
        "format": {"type": "string", "enum": ["auto", "text", "html"], "default": "auto"},
        "fingerprint": _HEX,
        "meta": {"type": "object"},
        "store_text": {"type": "boolean", "default": False},
        "time": {
            "type": ["string", "number"],
            "description": "when it arrived: RFC 3339 or seconds since the epoch "
            "(default: when it is written)",
        },
    },
}
_MATCH = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "distance": {"type": "integer"},
        "similarity": {"type": ["number", "null"]},
        "fingerprint": _HEX,
        "time": {
            "type": ["string", "null"],
            "description": "when the document arrived, RFC 3339 UTC (null: stored before "
            "documents had times)",
        },
    },
}
_RESULT = {
    "type": "object",
    "description": "new: only from add and check-and-add (true: nothing within k was held).",
    "properties": {
        "id": {"type": "string"},
        "new": {"type": "boolean"},
        "fingerprint": _HEX,
        "matches": {"type": "array", "items": {"$ref": "#/components/schemas/Match"}},
        "total": {"type": "integer"},
        "total_exact": {"type": "boolean"},
    },
}


def _param(name: str, description: str, kind: str = "integer") -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": {"type": kind}, "description": description}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "bad request or item",
        401: "missing or wrong bearer token",
        404: "not found",
        413: "body, batch or text too large",
        422: "the text has no terms",
        429: "write queue full (Retry-After)",
        503: "store failed, starting or shutting down",
    }
    err = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {str(c): {"description": text[c], **err} for c in codes}


def _items_op(summary: str, writes: bool = True) -> dict[str, Any]:
    one = {"$ref": "#/components/schemas/Item"}
    whole = _param(
        "all_or_nothing",
        "true: a batch holding a bad item writes nothing (the others: 409 not_written); "
        "default: the good items are written, each answered in its slot",
        "boolean",
    )
    result = {"$ref": "#/components/schemas/Result"}
    either = {"oneOf": [result, {"$ref": "#/components/schemas/Error"}]}
    return {
        "summary": summary,
        "parameters": [
            _param("k", "max Hamming distance (default: the service's, 3)"),
            _param("limit", "matches shown per item, nearest first (default 10)"),
            _param("probes", "multi-probe lookups of texts (default 10; 0: exact k only)"),
            _param(
                "similarity",
                "estimated shingle Jaccard, 0 < S <= 1, at or above which texts match "
                "(default: the service's --similarity, else the index's, 0.5)",
                "number",
            ),
            _param(
                "within",
                "match only documents that arrived in the last DURATION (e.g. 30d; units "
                "s, m, h, d, w), counted back from the request (default: the service's "
                "--within; a request giving within, since or until replaces it)",
                "string",
            ),
            _param(
                "since",
                "match only documents that arrived at or after TIME (RFC 3339 "
                "or epoch seconds); not with within",
                "string",
            ),
            _param("until", "match only documents that arrived before TIME", "string"),
            *([whole] if writes else []),
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"oneOf": [one, {"type": "array", "items": one}]}},
                "application/x-ndjson": {"schema": one, "description": "one item a line"},
            },
        },
        "responses": {
            "200": {
                "description": "one result; a batch: one result or error per item, in order",
                "content": {
                    "application/json": {
                        "schema": {"oneOf": [result, {"type": "array", "items": either}]}
                    },
                    "application/x-ndjson": {"schema": either},
                },
            },
            **_errors(400, 401, 413, 422, 429, 503),
        },
    }


def _simple(summary: str, *codes: int) -> dict[str, Any]:
    return {"summary": summary, "responses": {"200": {"description": "OK"}, **_errors(*codes)}}


def document(version: str) -> dict[str, Any]:
    doc_id = {"name": "doc_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "shdb serve",
            "version": version,
            "description": "Near-duplicate text index over HTTP (docs/serve.md).",
        },
        "components": {
            "schemas": {"Item": _ITEM, "Match": _MATCH, "Result": _RESULT, "Error": _ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/check": {
                "post": _items_op("Near-copies held in the index (nothing written)", writes=False)
            },
            "/v1/add": {"post": _items_op("Write each item; new says if nothing near was held")},
            "/v1/check-and-add": {
                "post": _items_op(
                    "Write each item that has no near-copy; of identical concurrent "
                    "submissions exactly one is new"
                )
            },
            "/v1/docs/{doc_id}": {
                "parameters": [doc_id],
                "get": _simple("A stored document", 401, 404, 503),
                "delete": _simple("Delete a document and its index rows", 401, 404, 503),
            },
            "/v1/docs": {
                "delete": {
                    **_simple(
                        "Delete documents and their index rows, in one batch; the answer "
                        "lists the ids removed and those not held",
                        400,
                        401,
                        413,
                        503,
                    ),
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"type": "string"}}
                            }
                        },
                    },
                }
            },
            "/v1/status": {"get": _simple("Settings, index size, recent load", 401, 503)},
            "/healthz": {"get": {**_simple("The process is up"), "security": []}},
            "/readyz": {"get": {**_simple("The store answers", 503), "security": []}},
            "/metrics": {"get": _simple("Prometheus metrics", 401)},
        },
    }


def html(doc: dict[str, Any]) -> str:
    """A plain page listing each operation with its parameters and schemas."""
    esc = html_lib.escape
    parts = [
        "<!doctype html><meta charset=utf-8><title>shdb serve API</title>",
        "<style>body{font:15px system-ui;max-width:60em;margin:2em auto}"
        "pre{background:#f4f4f4;padding:.6em;overflow:auto}</style>",
        f"<h1>{esc(doc['info']['title'])} {esc(doc['info']['version'])}</h1>",
        f"<p>{esc(doc['info']['description'])} The document: <a href=/openapi.json>"
        "/openapi.json</a>. Send <code>Authorization: Bearer TOKEN</code> when the service "
        "has a token.</p>",
    ]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if method == "parameters":
                continue
            parts.append(f"<h2><code>{method.upper()} {esc(path)}</code></h2>")
            parts.append(f"<p>{esc(op['summary'])}</p>")
            for p in op.get("parameters", []):
                parts.append(f"<p><code>{esc(p['name'])}</code>: {esc(p['description'])}</p>")
            codes = ", ".join(f"{c} {r['description']}" for c, r in op["responses"].items())
            parts.append(f"<p>Answers: {esc(codes)}</p>")
    parts.append("<h2>Schemas</h2>")
    for name, schema in doc["components"]["schemas"].items():
        parts.append(f"<h3>{name}</h3><pre>{esc(json.dumps(schema, indent=2))}</pre>")
    return "\n".join(parts)
