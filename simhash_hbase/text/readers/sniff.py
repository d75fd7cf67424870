"""What an input holds, told by its first bytes as well as its name.

A name can lie (JSON Lines saved as ``.json``, a Scrapy export that is one JSON
array, a ``.gz`` feed): the content decides where it can, the suffix where it
cannot (a CSV is a CSV by its suffix or ``--format csv``).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import PurePath
from typing import BinaryIO

from simhash_hbase.records import BadRecord
from simhash_hbase.text.readers.base import wide_encoding
from simhash_hbase.text.readers.compressed import SUFFIXES, Guard, compression_of, decompressing

HEAD = 1 << 16  # bytes looked at (and the buffer of a file opened for reading)
JSON_SUFFIXES = {".json", ".jsonl", ".ndjson"}
JSONL_SUFFIXES = {".jsonl", ".ndjson"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
#: What the readers read: ``json`` is a JSON array (or objects spanning lines).
RECORD_KINDS = ("jsonl", "json", "csv")
_WHAT = {
    "text": "one plain-text document",
    "html": "one HTML page",
    "warc": "a WARC archive (its pages' ids are their URIs)",
}


@dataclass
class Content:
    """An opened input: its content (decompressed), how it is read, and whether
    the decompression met damage."""

    stream: BinaryIO
    fmt: str  # text, html, jsonl, json, csv or warc
    delimiter: str
    compression: str | None
    _guard: Guard | None

    def damage(self, name: str) -> BadRecord | None:
        """The damage met while reading, as one bad record (after the records read)."""
        found = None if self._guard is None else self._guard.damage
        return None if found is None else found.record(name)

    def not_records(self, name: str) -> str:
        """Why ``--id-field``/``--text-field`` cannot apply to this input."""
        packed = f"{self.compression}-compressed " if self.compression else ""
        return (
            f"{name} is read as {_WHAT.get(self.fmt, self.fmt)} (by its {packed}content, its "
            "name or --format), not as records: --id-field and --text-field name the "
            "fields of JSON Lines, a JSON array of objects or CSV. Give --format jsonl or csv "
            "if it holds records, or leave those options out"
        )


def open_content(f: BinaryIO, file_name: str, fmt: str, *, stdin: bool = False) -> Content:
    """``f`` decompressed when its magic bytes or suffix say so, and the format it
    is read in: ``fmt`` unless auto, else by content and name (stdin: records)."""
    stream: io.BufferedReader = _peekable(f)
    suffix = PurePath(file_name).suffix.lower()
    compression = compression_of(stream.peek(16)[:16], suffix)
    guard = None
    if compression is not None:
        stream, guard = decompressing(stream, compression)
        if suffix in SUFFIXES:
            suffix = PurePath(file_name).with_suffix("").suffix.lower()
    head = _utf8_head(stream.peek(HEAD)[:HEAD])
    kind = kind_of(head, suffix, fmt, stdin=stdin)
    return Content(stream, kind, CSV_SUFFIXES.get(suffix, ","), compression, guard)


def kind_of(head: bytes, suffix: str, fmt: str = "auto", *, stdin: bool = False) -> str:
    """How content starting with ``head`` (UTF-8) is read, given its (inner) suffix.

    JSON records: an array (``[``, then an object) whatever the name; JSON Lines
    when the first line is a whole JSON object; objects spanning lines when the
    name says JSON. Anything else is what its suffix says, a text by default."""
    start = _start(head)
    lines = fmt == "jsonl" or (fmt == "auto" and (stdin or suffix in JSONL_SUFFIXES))
    if lines and not head.startswith(b"WARC/"):
        # JSON Lines whose first line is an array stay lines: an array spans lines
        return "json" if start.startswith(b"[") and not _first_line_is_json(start) else "jsonl"
    if fmt != "auto":
        return fmt
    if head.startswith(b"WARC/") or suffix == ".warc":
        return "warc"
    after = start[1:].lstrip()[:1]
    if start.startswith(b"[") and (suffix in JSON_SUFFIXES or after in (b"{", b"]")):
        return "json"  # not "[1] Introduction", a text that starts with a bracket
    if start.startswith(b"{") and _first_line_is_json(start, dict):
        return "jsonl"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in CSV_SUFFIXES:
        return "csv"
    if start.startswith(b"{") and suffix == ".json":
        return "json"
    return "text"


def _first_line_is_json(start: bytes, kind: type = object) -> bool:
    """Whether the first line is a whole JSON value (of ``kind``): a line of JSON
    Lines, not the start of a value spanning lines."""
    line = start.partition(b"\n")[0]
    try:
        return isinstance(json.loads(line), kind)
    except ValueError:  # not JSON, or cut short by the end of the head
        return False


def _start(head: bytes) -> bytes:
    return head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")


def _utf8_head(head: bytes) -> bytes:
    """The head as UTF-8 for sniffing (a UTF-16/32 text is known by its BOM)."""
    wide = wide_encoding(head)
    return head if wide is None else head.decode(wide, "ignore").encode("utf-8")


def _peekable(f: BinaryIO) -> io.BufferedReader:
    if isinstance(f, io.BufferedReader):
        return f
    return io.BufferedReader(f, HEAD)  # type: ignore[arg-type]
