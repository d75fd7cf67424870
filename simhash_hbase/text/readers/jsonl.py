"""JSON Lines, and JSON arrays of objects (Scrapy's ``-o items.json``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers.base import (
    SourceOptions,
    as_text,
    bounded_lines,
    decode_text,
    json_kind,
    too_large,
)


def _field(obj: dict[str, Any], name: str, where: str) -> str | BadRecord:
    if name not in obj:
        present = ", ".join(sorted(map(str, obj))) or "none"
        return BadRecord(
            where, f"no {name!r} field (fields: {present[:200]})", 0, Problem.MISSING_FIELD
        )
    value = obj[name]
    if not isinstance(value, str):
        return BadRecord(
            where,
            f"field {name!r} is {json_kind(value)}, not a string",
            0,
            Problem.WRONG_TYPE,
        )
    return value


def record_from_fields(
    obj: dict[str, Any], opts: SourceOptions, where: str, size: int
) -> Record | BadRecord:
    doc_id = _field(obj, opts.id_field, where)
    if isinstance(doc_id, BadRecord):
        return doc_id._replace(size=size)
    text = _field(obj, opts.text_field, where)
    if isinstance(text, BadRecord):
        return text._replace(size=size)
    meta = {k: v for k, v in obj.items() if k not in (opts.id_field, opts.text_field)}
    return as_text(Record(doc_id, text, meta or None, where, size), "auto", opts)


def parse_json_line(line: bytes, where: str, opts: SourceOptions) -> Record | BadRecord | None:
    text = decode_text(line, where, wide=False)
    if isinstance(text, BadRecord):
        return text._replace(where=where)
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadRecord(
            where,
            f"malformed JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})",
            len(line),
            Problem.MALFORMED,
        )
    except (ValueError, RecursionError) as exc:  # too deep, or an integer too long
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return BadRecord(where, f"unusable JSON ({reason})", len(line), Problem.MALFORMED)
    if not isinstance(obj, dict):
        return BadRecord(where, f"{json_kind(obj)}, not an object", len(line), Problem.MALFORMED)
    return record_from_fields(obj, opts, where, len(line))


def read_jsonl(f: BinaryIO, name: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    for lineno, line, _ in bounded_lines(f, opts.max_bytes):
        where = f"{name}:{lineno}"
        if line is None:
            yield too_large(where, None, opts.max_bytes)
            continue
        record = parse_json_line(line, where, opts)
        if record is not None:
            yield record
