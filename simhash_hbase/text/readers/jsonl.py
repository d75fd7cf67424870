"""JSON Lines, and JSON arrays of objects (Scrapy's ``-o items.json``)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import BadRecord, Problem, Record, parse_time
from simhash_hbase.text.readers.base import (
    READ_CHUNK,
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
    doc_id = _field(obj, opts.id_field, where) if opts.needs_id else where
    if isinstance(doc_id, BadRecord):
        return doc_id._replace(size=size)
    text = _field(obj, opts.text_field, where)
    if isinstance(text, BadRecord):
        return text._replace(size=size)
    time: int | BadRecord | None = None
    if opts.time_field is not None:
        time = _time(obj, opts.time_field, where)
    if isinstance(time, BadRecord):
        return time._replace(size=size)
    taken = (opts.id_field, opts.text_field, opts.time_field)
    meta = {k: v for k, v in obj.items() if k not in taken}
    return as_text(Record(doc_id, text, meta or None, where, size, time), "auto", opts)


def _time(obj: dict[str, Any], name: str, where: str) -> int | BadRecord:
    """The record's time field (RFC 3339 or epoch seconds) as ms since the epoch."""
    if name not in obj:
        present = ", ".join(sorted(map(str, obj))) or "none"
        return BadRecord(
            where, f"no {name!r} field (fields: {present[:200]})", 0, Problem.MISSING_FIELD
        )
    try:
        return parse_time(obj[name])
    except InvalidInput as exc:
        return BadRecord(where, f"field {name!r}: {exc}", 0, Problem.WRONG_TYPE)


def json_error(exc: json.JSONDecodeError, at: str | None = None) -> str:
    """What is wrong, in words, at ``at`` (else the column): the decoder's "Invalid
    control character" is mostly a string whose closing quote is missing, met at the
    line's end."""
    at = at or f"column {exc.colno}"
    char = exc.doc[exc.pos : exc.pos + 1]
    if exc.msg.startswith("Invalid control character") and char in ("\n", "\r"):
        return (
            f"unterminated string: the line ends inside it at {at} "
            "(close its quote; write \\n for a line break)"
        )
    if exc.msg.startswith("Invalid control character"):
        return f"control character U+{ord(char):04X} inside a string at {at}: escape it"
    if exc.msg.startswith("Unterminated string"):
        return f"unterminated string starting at {at}: close its quote"
    return f"{exc.msg.removesuffix(' at')} at {at}"


def parse_json_line(line: bytes, where: str, opts: SourceOptions) -> Record | BadRecord | None:
    text = decode_text(line, where, wide=False)
    if isinstance(text, BadRecord):
        return text._replace(where=where)
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadRecord(where, f"malformed JSON ({json_error(exc)})", len(line), Problem.MALFORMED)
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


# -- JSON arrays (and objects one after another, pretty-printed) --------------------
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]*")
#: Where the next element may start after a damaged one: after a comma that ends a
#: line (Scrapy writes one item a line), or an object after a comma or a line break.
_NEXT = re.compile(r",[ \t\r]*\n[ \t\r\n]*|[,\n][ \t\r\n]*(?=\{)")
_LONE_SURROGATE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8
#: A decode error this close to the end of what is buffered may be the buffer's end.
_NEAR_END = 16


class _Buffer:
    """The stream's text, decoded a chunk at a time and consumed from the front;
    ``line`` is the line number at ``pos``."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.text = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def more(self) -> bool:
        """Read another chunk; False at the end of the stream."""
        if self.eof:
            return False
        data = self._f.read(READ_CHUNK)
        self.eof = not data
        self.text = self.text[self.pos :] + self._decoder.decode(data, final=self.eof)
        self.pos = 0
        return not self.eof

    def advance(self, to: int) -> None:
        self.line += self.text.count("\n", self.pos, to)
        self.pos = to

    def skip_space(self) -> str:
        """The next character after blanks ("" at the end)."""
        while True:
            self.advance(_SPACE.match(self.text, self.pos).end())  # type: ignore[union-attr]
            if self.pos < len(self.text) or not self.more():
                return self.text[self.pos : self.pos + 1]

    def line_at(self, index: int) -> int:
        return self.line + self.text.count("\n", self.pos, index)


def read_json_values(f: BinaryIO, name: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    """A JSON array of objects, or JSON objects one after another (pretty-printed
    JSON Lines), read element by element: memory stays within ``max_bytes`` and a
    chunk, whatever the array's size. A damaged element is one bad record naming
    its line and index; reading goes on at the next object that starts after a comma
    or a line break."""
    buf = _Buffer(f)
    if buf.skip_space() == "\ufeff":
        buf.advance(buf.pos + 1)
    array = buf.skip_space() == "["
    if array:
        buf.advance(buf.pos + 1)
    index = 0
    while True:
        ahead = buf.skip_space()
        if array and ahead == "]":
            yield from _after_array(buf, name)
            return
        if not ahead:
            if array:
                yield _bad(name, buf.line, index, "the array is not closed: the file is cut short")
            return
        if array and index and ahead == ",":
            buf.advance(buf.pos + 1)
            buf.skip_space()
        item = _element(buf, name, index, opts)
        if item is not None:
            yield item
        index += 1


def _element(buf: _Buffer, name: str, index: int, opts: SourceOptions) -> Record | BadRecord | None:
    """The element at ``buf.pos``, consumed; damage is skipped up to the next object."""
    line = buf.line
    while True:
        try:
            value, end = _DECODER.raw_decode(buf.text, buf.pos)
        except json.JSONDecodeError as exc:
            partial = exc.pos >= len(buf.text) - _NEAR_END or exc.msg.startswith("Unterminated")
            if partial and len(buf.text) - buf.pos <= opts.max_bytes and buf.more():
                continue
            if len(buf.text) - buf.pos > opts.max_bytes:
                _resync(buf, buf.pos + 1)
                return _too_large(name, line, index, opts.max_bytes)
            at = buf.line_at(exc.pos)
            _resync(buf, exc.pos)
            reason = f"malformed JSON ({json_error(exc, f'line {at}')})"
            return _bad(name, line, index, reason)
        except (ValueError, RecursionError) as exc:  # too deep, or an integer too long
            _resync(buf, buf.pos + 1)
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            return _bad(name, line, index, f"unusable JSON ({reason})")
        if end >= len(buf.text) and not buf.eof and buf.more():
            continue  # a number or literal may go on in the next chunk
        break
    raw = buf.text[buf.pos : end]
    buf.advance(end)
    size = len(raw.encode("utf-8", "surrogateescape"))
    where = f"{name}:{line}"
    if size > opts.max_bytes:
        return _too_large(name, line, index, opts.max_bytes)
    if _LONE_SURROGATE.search(raw):
        return BadRecord(where, f"element {index}: invalid UTF-8", size, Problem.NOT_UTF8)
    if not isinstance(value, dict):
        return _bad(name, line, index, f"{json_kind(value)}, not an object")._replace(size=size)
    found = record_from_fields(value, opts, where, size)  # a missing or non-string field
    return (
        found._replace(reason=f"element {index}: {found.reason}")
        if isinstance(found, BadRecord)
        else found
    )


def _resync(buf: _Buffer, start: int) -> None:
    """Skip to the next element start (:data:`_NEXT`) at or after ``start``,
    reading on (and dropping what is passed) until one comes or the stream ends."""
    while True:
        found = _NEXT.search(buf.text, start)
        if found is not None:
            buf.advance(found.end())
            return
        keep = max(start, len(buf.text) - 1)  # a comma or newline may end this chunk
        buf.advance(keep)
        start = 0
        if not buf.more():
            buf.advance(len(buf.text))
            return


def _after_array(buf: _Buffer, name: str) -> Iterator[BadRecord]:
    """Only blanks may follow the array's closing bracket."""
    line = buf.line
    buf.advance(buf.pos + 1)
    if buf.skip_space():
        yield BadRecord(
            f"{name}:{line}",
            "content after the array's closing bracket was not read",
            0,
            Problem.MALFORMED,
        )


def _bad(name: str, line: int, index: int, reason: str) -> BadRecord:
    return BadRecord(f"{name}:{line}", f"element {index}: {reason}", 0, Problem.MALFORMED)


def _too_large(name: str, line: int, index: int, max_bytes: int) -> BadRecord:
    bad = too_large(f"{name}:{line}", None, max_bytes)
    return bad._replace(reason=f"element {index}: {bad.reason}")
