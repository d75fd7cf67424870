"""What every reader shares: the reading options, decoding, bounded reads.

Readers never raise on a bad record: each record is read, decoded and checked
inside its own boundary, and a failure becomes a :class:`BadRecord` naming the
file and line, so the records around it are still read. Memory is bounded by
``max_bytes`` per record, counted in bytes, on every path. Nothing here needs an
index.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from simhash_hbase.errors import InvalidInput, InvalidSetting
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.charset import Undecodable, decode_bytes
from simhash_hbase.text.extract import to_text
from simhash_hbase.text.html import (
    DEFAULT_HTML_MODE,
    HTML_MODES,
    declared_charset,
    looks_like_html,
)

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Peak memory of indexing one record, per byte of it (measured with `shdb ingest`
#: of one 2-16 MB text: ~27-30 bytes, plus ~100 MB to start; docs/benchmarks.md).
MEMORY_PER_BYTE = 32
#: The largest record limit: 256 MiB costs ~8 GiB while indexed, a third of the
#: project's 24 GiB machines (1 GiB, the old bound, would need ~32 GiB).
MAX_MAX_BYTES = 256 * 1024 * 1024
#: jsonl: JSON records, as JSON Lines or a JSON array of objects (told by the content).
FORMATS = ("auto", "text", "jsonl", "csv", "html", "warc")
#: Formats whose records have fields (``--id-field``, ``--text-field``).
RECORD_FORMATS = ("jsonl", "csv")
STDIN = "-"
STDIN_NAME = "<stdin>"
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class SourceOptions:
    format: str = "auto"
    id_field: str = "id"
    text_field: str = "text"
    max_bytes: int = DEFAULT_MAX_BYTES
    stdin_id: str | None = None  # the id of a plain text read from stdin
    follow_symlinks: bool = False  # read files that links in a folder lead to outside it
    #: How a page becomes text: ``main`` (its article) or ``raw`` (all visible text).
    html: str = DEFAULT_HTML_MODE
    #: A CSV's column names when it has no header row (``--columns``).
    columns: tuple[str, ...] | None = None
    #: The id or text field was named by the user: an input that is not read as
    #: records is then refused, not read as one document with the names ignored.
    fields_given: bool = False
    #: False: records need no id field (an IDF table counts texts only); each is
    #: then named by where it was read (file:line).
    needs_id: bool = True
    #: The field holding when a record arrived (``--time-field``); None: none.
    time_field: str | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields every record must have."""
        return (self.id_field, self.text_field) if self.needs_id else (self.text_field,)

    def __post_init__(self) -> None:
        if self.columns is not None:
            _check_columns(self.columns, self.fields)
        if self.html not in HTML_MODES:
            raise InvalidSetting(
                "html", f"unknown HTML mode {self.html!r}; one of: {', '.join(HTML_MODES)}"
            )
        if self.format not in FORMATS:
            raise InvalidSetting(
                "format", f"unknown format {self.format!r}; one of: {', '.join(FORMATS)}"
            )
        if not 1 <= self.max_bytes <= MAX_MAX_BYTES:
            raise InvalidSetting(
                "max_bytes",
                f"the record size limit must be 1..{MAX_MAX_BYTES} bytes (256 MiB), got "
                f"{self.max_bytes}: indexing a record takes ~{MEMORY_PER_BYTE} bytes of memory "
                "per byte of it",
            )


def _check_columns(columns: tuple[str, ...], fields: tuple[str, ...]) -> None:
    given = ",".join(columns)
    if len(set(columns)) != len(columns) or not all(columns):
        raise InvalidSetting("columns", f"{given!r}: the names must be distinct and non-empty")
    missing = [name for name in fields if name not in columns]
    if missing:
        raise InvalidSetting(
            "columns",
            f"{given!r} has no {missing[0]!r} column: name it there, or name the id and "
            "text columns with --id-field and --text-field",
        )


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as printable text, whatever bytes its name holds."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# -- decoding -----------------------------------------------------------------
_WIDE_BOMS = (  # UTF-32 first: its little-endian BOM starts like UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def wide_encoding(head: bytes) -> str | None:
    """``utf-16``/``utf-32`` when ``head`` starts with that byte order mark."""
    return next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)


def _undecodable(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler for UTF-16/32 input: bytes that do not decode (a lone
    surrogate, a truncated last unit) become lone surrogates, which no UTF-8 holds,
    so the record holding them is reported as not UTF-8 instead of ending the run."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "".join(chr(0xDC00 | b) for b in exc.object[exc.start : exc.end]), exc.end


_UNDECODABLE = "shdb-undecodable"
codecs.register_error(_UNDECODABLE, _undecodable)


class _Transcoded:
    """A UTF-16/32 stream (known by its BOM) read as UTF-8 bytes, line by line or
    in blocks, so every reader sees UTF-8 and counts lines as usual. A lone
    surrogate comes out as bytes that are not UTF-8: the record holding it is
    then reported as such, and the rest is read."""

    def __init__(self, f: BinaryIO, encoding: str) -> None:
        # newline="\n": lines end at LF alone, as in a UTF-8 stream ("" would also
        # end one at a lone CR, and a record would count as two)
        self._text = io.TextIOWrapper(f, encoding, errors=_UNDECODABLE, newline="\n")  # type: ignore[type-var]

    def readline(self, limit: int = -1) -> bytes:
        return self._text.readline(limit).encode("utf-8", "surrogatepass")

    def read(self, size: int = -1) -> bytes:
        return self._text.read(size).encode("utf-8", "surrogatepass")

    def seekable(self) -> bool:
        return False


def as_utf8(f: BinaryIO) -> BinaryIO:
    """``f``, or a UTF-8 view of it when it starts with a UTF-16/32 BOM."""
    peek = getattr(f, "peek", None)
    if peek is not None:
        head = peek(4)[:4]
    elif seekable(f):
        at = f.tell()
        head = f.read(4)
        f.seek(at)
    else:
        return f
    encoding = wide_encoding(head)
    return f if encoding is None else _Transcoded(f, encoding)  # type: ignore[return-value]


def decode_text(raw: bytes, where: str, *, wide: bool = True) -> str | BadRecord:
    """Strict UTF-8 (a BOM is dropped), or UTF-16/32 when a BOM says so; NUL bytes
    in UTF-8 mean a binary file. A line of a stream passes ``wide=False``: a UTF-16/32
    BOM counts only at the stream's start (:func:`as_utf8` transcodes the whole
    stream), so a line that merely starts with those bytes is not UTF-8."""
    encoding = wide_encoding(raw[:4]) if wide else None
    if encoding is not None:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            return BadRecord(
                where, f"invalid {encoding.upper()} at byte {exc.start}", len(raw), Problem.NOT_UTF8
            )
    nul = raw.find(b"\x00")
    if nul >= 0:
        return BadRecord(
            where,
            f"binary content (NUL byte at offset {nul}); only UTF-8 text is indexed",
            len(raw),
            Problem.BINARY,
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return BadRecord(
            f"{where}:{line}",
            f"invalid UTF-8 at byte {exc.start}",
            len(raw),
            Problem.NOT_UTF8,
        )


def too_large(where: str, size: int | None, max_bytes: int) -> BadRecord:
    """``size`` None: the end of the record was not even read."""
    what = f"is {size} bytes" if size is not None else "is longer than that"
    return BadRecord(
        where,
        f"the document is over the {max_bytes}-byte limit (it {what})",
        size or max_bytes,
        Problem.TOO_LARGE,
    )


def read_bounded(f: BinaryIO, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` bytes, and whether there was more; never allocates
    more than it reads (``read(n)`` would reserve n bytes at once)."""
    parts: list[bytes] = []
    size = 0
    while size <= max_bytes:
        part = f.read(min(READ_CHUNK, max_bytes + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    raw = b"".join(parts)
    return raw[:max_bytes], size > max_bytes


def unreadable(where: str, exc: OSError) -> BadRecord:
    return BadRecord(where, f"cannot read it: {exc.strerror or exc}", 0, Problem.UNREADABLE)


def decoded(
    raw: bytes, where: str, doc_id: str, fmt: str, declared: str | None = None
) -> Record | BadRecord:
    """A whole document's bytes as text: UTF-8 (or UTF-16/32 by its BOM), else by
    evidence (:func:`~simhash_hbase.text.charset.decode_bytes`): the charset that
    ``declared`` (a Content-Type's) or a page's ``<meta>`` names, if a detector
    agrees; for a page that is a ``fmt`` html document or a text holding a whole page."""
    text = decode_text(raw, where)
    bad = text if isinstance(text, BadRecord) else None
    if bad is not None and bad.problem is Problem.NOT_UTF8 and wide_encoding(raw[:4]) is None:
        if declared is None and (fmt == "html" or looks_like_html(raw.decode("latin-1"))):
            declared = declared_charset(raw)
        try:
            text = decode_bytes(raw, declared)
        except Undecodable as exc:
            return bad._replace(reason=f"{exc}")
    if isinstance(text, BadRecord):
        return text
    return Record(doc_id, text, None, where, len(raw))


def check_readable_file(path: str) -> None:
    """An explicitly named input must be a file, a folder, a FIFO or ``-``: a
    device or socket would block or never end."""
    if path == STDIN:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InvalidInput(f"{display_path(path)}: no such file or folder") from None
    except OSError as exc:
        raise InvalidInput(f"{display_path(path)}: {exc.strerror or 'cannot be read'}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISFIFO(mode)):
        raise InvalidInput(f"{display_path(path)} is a device or socket, not a file")


# -- line-oriented formats ----------------------------------------------------
def bounded_lines(f: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, line, quote count) triples; the line is None when it is over
    ``max_bytes``: it is then read in chunks and dropped, so memory stays bounded,
    and only its count of ``"`` is kept (a CSV reader needs it to stay in step)."""
    lineno = 0
    while True:
        line = f.readline(max_bytes + 1)
        if not line:
            return
        lineno += 1
        if len(line) > max_bytes and not line.endswith(b"\n"):
            quotes = line.count(b'"')
            while (rest := f.readline(READ_CHUNK)) and not rest.endswith(b"\n"):
                quotes += rest.count(b'"')
            quotes += rest.count(b'"')
            yield lineno, None, quotes
            continue
        yield lineno, line, 0


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words ("a number", not "a float")."""
    if value is None or isinstance(value, bool):
        return f"JSON {json.dumps(value)}"
    kinds = {str: "a string", int: "a number", float: "a number", list: "an array"}
    return kinds.get(type(value), "an object")


def seekable(f: BinaryIO) -> bool:
    try:
        return f.seekable()
    except (OSError, ValueError):
        return False


def as_text(record: Record | BadRecord, fmt: str, opts: SourceOptions) -> Record | BadRecord:
    """A record's text as it is fingerprinted (:func:`~simhash_hbase.text.extract.to_text`):
    a page (``fmt`` html, or in auto mode a text that is a whole HTML document) as
    its article or visible text. A page that cannot be read is one bad record."""
    if not isinstance(record, Record):
        return record
    text_fmt = "html" if fmt == "html" else "text" if opts.format == "text" else "auto"
    try:
        return record._replace(text=to_text(record.text, text_fmt, html=opts.html))
    except InvalidInput as exc:
        return BadRecord(record.where, f"{exc}", record.size, Problem.BAD_HTML)
