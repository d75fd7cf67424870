"""Input readers: text files, folders, JSONL, CSV/TSV, stdin, fingerprint lines.

Readers never raise on a bad record: each record is read, decoded and checked
inside its own boundary, and a failure becomes a :class:`BadRecord` naming the
file and line, so the records around it are still read. Memory is bounded by
``max_bytes`` per record, counted in bytes, on every path. Nothing here needs an
index.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import json
import os
import stat
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from simhash_hbase.errors import InvalidInput, InvalidSetting
from simhash_hbase.records import BadRecord, Problem, Record, parse_fingerprint_hex
from simhash_hbase.text.extract import TEXT_FORMATS, decode, to_text
from simhash_hbase.text.html import DEFAULT_HTML_MODE, HTML_MODES

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Peak memory of indexing one record, per byte of it (measured with `shdb ingest`
#: of one 2-16 MB text: ~27-30 bytes, plus ~100 MB to start; docs/benchmarks.md).
MEMORY_PER_BYTE = 32
#: The largest record limit: 256 MiB costs ~8 GiB while indexed, a third of the
#: project's 24 GiB machines (1 GiB, the old bound, would need ~32 GiB).
MAX_MAX_BYTES = 256 * 1024 * 1024
FORMATS = ("auto", "text", "jsonl", "csv", "html")
STDIN = "-"
STDIN_NAME = "<stdin>"
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
_READ_CHUNK = 1 << 20
_FINGERPRINT_LINE_BYTES = 4096  # an id (<= 1024 bytes), a tab and 16 hex digits fit


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

    def __post_init__(self) -> None:
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
    elif _seekable(f):
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


def _read_bounded(f: BinaryIO, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` bytes, and whether there was more; never allocates
    more than it reads (``read(n)`` would reserve n bytes at once)."""
    parts: list[bytes] = []
    size = 0
    while size <= max_bytes:
        part = f.read(min(_READ_CHUNK, max_bytes + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    raw = b"".join(parts)
    return raw[:max_bytes], size > max_bytes


def _unreadable(where: str, exc: OSError) -> BadRecord:
    return BadRecord(where, f"cannot read it: {exc.strerror or exc}", 0, Problem.UNREADABLE)


def _read_document(
    path: Path, doc_id: str, max_bytes: int, fmt: str = "text"
) -> Record | BadRecord:
    where = display_path(path)
    try:
        with path.open("rb") as f:
            raw, more = _read_bounded(f, max_bytes)
            if more:
                size = os.fstat(f.fileno()).st_size
                return too_large(where, size if size > max_bytes else None, max_bytes)
    except OSError as exc:
        return _unreadable(where, exc)
    return _decoded(raw, where, doc_id, fmt)


def _decoded(raw: bytes, where: str, doc_id: str, fmt: str) -> Record | BadRecord:
    """A whole document's bytes as text: UTF-8, or for a page (``fmt`` html) the
    charset its ``<meta>`` declares."""
    text = decode_text(raw, where)
    if isinstance(text, BadRecord) and text.problem is Problem.NOT_UTF8 and fmt == "html":
        with contextlib.suppress(InvalidInput):  # else the UTF-8 error: where the bad byte is
            text = decode(raw, "html")
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


def read_text_file(
    path: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stdin: BinaryIO | None = None,
    *,
    fmt: str = "auto",
    html: str = DEFAULT_HTML_MODE,
) -> str:
    """One whole file (``-``: stdin) as the text it is fingerprinted as, the way
    ingest reads it (:func:`~simhash_hbase.text.extract.to_text`): ``fmt`` auto, text
    or html (auto: a page by its suffix or content), ``html`` the index's HTML mode.
    :class:`InvalidInput` says what is wrong."""
    if fmt not in TEXT_FORMATS:
        raise InvalidSetting("format", f"a single text is {', '.join(TEXT_FORMATS)}, not {fmt!r}")
    opts = SourceOptions(format=fmt, max_bytes=max_bytes, html=html)
    check_readable_file(path)
    if path == STDIN:
        doc_fmt = "html" if fmt == "html" else "text"
        raw = _whole_stream(stdin or sys.stdin.buffer, STDIN_NAME, STDIN_NAME, max_bytes, doc_fmt)
    else:
        doc_fmt = "html" if format_of(Path(path), opts) == "html" else "text"
        raw = _read_document(Path(path), path, max_bytes, doc_fmt)
    result = _as_text(raw, doc_fmt, opts)
    if isinstance(result, BadRecord):
        raise InvalidInput(f"{result.where}: {result.reason}")
    return result.text


def _whole_stream(
    f: BinaryIO, name: str, doc_id: str, max_bytes: int, fmt: str = "text"
) -> Record | BadRecord:
    raw, more = _read_bounded(f, max_bytes)
    if more:
        return too_large(name, None, max_bytes)
    return _decoded(raw, name, doc_id, fmt)


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
            while (rest := f.readline(_READ_CHUNK)) and not rest.endswith(b"\n"):
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


def _record_from_fields(
    obj: dict[str, Any], opts: SourceOptions, where: str, size: int
) -> Record | BadRecord:
    doc_id = _field(obj, opts.id_field, where)
    if isinstance(doc_id, BadRecord):
        return doc_id._replace(size=size)
    text = _field(obj, opts.text_field, where)
    if isinstance(text, BadRecord):
        return text._replace(size=size)
    meta = {k: v for k, v in obj.items() if k not in (opts.id_field, opts.text_field)}
    return _as_text(Record(doc_id, text, meta or None, where, size), "auto", opts)


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
    return _record_from_fields(obj, opts, where, len(line))


def _read_jsonl(f: BinaryIO, name: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    for lineno, line, _ in bounded_lines(f, opts.max_bytes):
        where = f"{name}:{lineno}"
        if line is None:
            yield too_large(where, None, opts.max_bytes)
            continue
        record = parse_json_line(line, where, opts)
        if record is not None:
            yield record


class _CsvFeed:
    """Decoded lines for ``csv.reader``, counting the bytes of the current record
    and keeping its raw lines, so that a record that turns out malformed (an
    unclosed or stray quote swallowed the lines after it) can be given back:
    the lines after its first are read again as records of their own.

    A record over the limit is not kept: its lines are replaced by their quote
    characters only, which keeps the reader's quoting state exact (so the next
    record starts where it should) while its content is dropped. Such a record
    can be given back only by seeking (a file), not from a pipe.
    """

    def __init__(self, f: BinaryIO, max_bytes: int) -> None:
        self._f = f
        self._max = max_bytes
        self._lines = bounded_lines(f, max_bytes)
        self._again: deque[tuple[int, bytes]] = deque()  # lines given back, to read again
        self._offset = 0  # lines are numbered from here on after a seek
        self._seekable = _seekable(f)
        self.lineno = 0  # the number of the last line handed out
        self.record_bytes = 0
        self.over = False
        self.held: list[tuple[int, bytes]] = []  # the current record's lines, while whole
        self.resume: tuple[int, int] | None = None  # (line, byte offset) after its first line

    def start_record(self) -> int:
        """Begin a record; the number of its first line."""
        self.record_bytes, self.over, self.held, self.resume = 0, False, [], None
        return self._again[0][0] if self._again else self.lineno + 1

    def give_back(self) -> bool:
        """Read the lines after the current record's first line again; False when
        they are gone (a record over the limit, read from a pipe)."""
        if not self.over:
            self._again.extendleft(reversed(self.held[1:]))
            return True
        if self.resume is None:
            return False
        line, offset = self.resume
        self._f.seek(offset)
        self._again.clear()
        self._lines = bounded_lines(self._f, self._max)
        self._offset, self.lineno = line - 1, line - 1
        return True

    def __iter__(self) -> _CsvFeed:
        return self

    def __next__(self) -> str:
        again = bool(self._again)
        if again:
            self.lineno, line = self._again.popleft()
            quotes = 0
        else:
            number, got, quotes = next(self._lines)
            self.lineno, line = self._offset + number, got  # type: ignore[assignment]
        first = not self.held and not self.over
        self.record_bytes += len(line) if line is not None else self._max + 1
        if first and self._seekable and not again:
            self.resume = (self.lineno + 1, self._f.tell())
        if line is None or self.record_bytes > self._max:
            self.over = True
            self.held = []
            quotes = quotes if line is None else line.count(b'"')
            return '"' * quotes + "\n"
        self.held.append((self.lineno, line))
        # surrogateescape keeps reading past invalid UTF-8; the row is checked later.
        return line.decode("utf-8", "surrogateescape")


def _seekable(f: BinaryIO) -> bool:
    try:
        return f.seekable()
    except (OSError, ValueError):
        return False


def _check_utf8(cells: list[str], where: str) -> BadRecord | None:
    for cell in cells:
        if "\x00" in cell:
            reason = "binary content (a NUL byte); only UTF-8 text is indexed"
            return BadRecord(where, reason, 0, Problem.BINARY)
        try:
            cell.encode("utf-8")
        except UnicodeEncodeError:
            return BadRecord(where, "invalid UTF-8", 0, Problem.NOT_UTF8)
    return None


def _read_csv(
    f: BinaryIO, name: str, opts: SourceOptions, delimiter: str
) -> Iterator[Record | BadRecord]:
    feed = _CsvFeed(f, opts.max_bytes)
    csv.field_size_limit(opts.max_bytes + 1)  # characters <= bytes: the feed's limit rules
    reader = csv.reader(feed, delimiter=delimiter, strict=True)
    where = f"{name}:1"
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield BadRecord(where, f"unreadable CSV header ({exc})", 0, Problem.MALFORMED)
        return
    if header:  # an empty first line is a header without columns (named below)
        header[0] = header[0].removeprefix("\ufeff")
    problem = _check_utf8(header, where)
    if feed.over:
        problem = too_large(where, None, opts.max_bytes)
    if problem is not None:
        yield problem._replace(reason=problem.reason + " in the header; the file was skipped")
        return
    missing = [c for c in (opts.id_field, opts.text_field) if c not in header]
    if missing:
        yield BadRecord(
            where,
            f"no column {missing[0]!r} (columns: {', '.join(header)[:200]}); the file was skipped",
            0,
            Problem.MISSING_FIELD,
        )
        return
    while True:
        where = f"{name}:{feed.start_record()}"
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield _malformed_csv(where, exc, feed)
            if not feed.give_back():
                return
            reader = csv.reader(feed, delimiter=delimiter, strict=True)  # a fresh quoting state
            continue
        if feed.over:
            yield too_large(where, None, opts.max_bytes)
        else:
            yield _csv_record(row, header, opts, where, feed.record_bytes)


def _malformed_csv(where: str, exc: csv.Error, feed: _CsvFeed) -> BadRecord:
    """The record that failed. The lines after its first are read again, unless a
    pipe cannot give them back: then the reading stops here, and says so."""
    first = int(where.rsplit(":", 1)[1])
    reason = f"malformed CSV ({exc})"
    if feed.lineno > first:
        reason += f"; a quote opened on this line was still open at line {feed.lineno}"
        if feed.over and feed.resume is None:
            reason += (
                f"; lines {first + 1}-{feed.lineno} could not be read again from a pipe: "
                "fix the quote, or give the file by name"
            )
        else:
            reason += f", so lines {first + 1}-{feed.lineno} were read again as records"
    return BadRecord(where, reason, 0, Problem.MALFORMED)


def _csv_record(
    row: list[str], header: list[str], opts: SourceOptions, where: str, size: int
) -> Record | BadRecord:
    if not any(row):
        return BadRecord(where, "empty CSV row", size, Problem.MALFORMED)
    if len(row) != len(header):
        return BadRecord(
            where,
            f"row has {len(row)} fields, the header has {len(header)}",
            size,
            Problem.MALFORMED,
        )
    bad = _check_utf8(row, where)
    if bad is not None:
        return bad._replace(size=size)
    return _record_from_fields(dict(zip(header, row)), opts, where, size)


# -- paths --------------------------------------------------------------------
def format_of(path: Path, opts: SourceOptions) -> str:
    if opts.format != "auto":
        return opts.format
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    if suffix in _HTML_SUFFIXES:
        return "html"
    return "csv" if suffix in _CSV_SUFFIXES else "text"


def read_file(path: Path, doc_id: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    fmt = format_of(path, opts)
    if fmt in ("text", "html"):
        yield _as_text(_read_document(path, doc_id, opts.max_bytes, fmt), fmt, opts)
        return
    try:
        f = path.open("rb")
    except OSError as exc:
        yield _unreadable(display_path(path), exc)
        return
    with f:
        delimiter = _CSV_SUFFIXES.get(path.suffix.lower(), ",")
        yield from _read_stream(f, display_path(path), fmt, opts, delimiter)


def _as_text(record: Record | BadRecord, fmt: str, opts: SourceOptions) -> Record | BadRecord:
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


def _read_stream(
    f: BinaryIO, name: str, fmt: str, opts: SourceOptions, delimiter: str = ","
) -> Iterator[Record | BadRecord]:
    if fmt == "csv":
        yield from _read_csv(as_utf8(f), name, opts, delimiter)
    elif fmt in ("text", "html"):
        doc_id = opts.stdin_id or name
        yield _as_text(_whole_stream(f, name, doc_id, opts.max_bytes, fmt), fmt, opts)
    else:
        yield from _read_jsonl(as_utf8(f), name, opts)


def _special(path: Path) -> BadRecord | None:
    """A folder entry that is not a regular file (FIFO, socket, device) is never
    opened: reading it could block forever."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return _unreadable(display_path(path), exc)
    if stat.S_ISREG(mode):
        return None
    return BadRecord(
        display_path(path), "not a regular file (FIFO, socket or device)", 0, Problem.SPECIAL_FILE
    )


def walk(
    root: Path, exclude: Sequence[Path] = (), follow: bool = False
) -> Iterator[Path | BadRecord]:
    """Regular files below ``root`` in sorted order; hidden files and folders, and
    those in ``exclude`` (e.g. the index being written), are left out.

    A symbolic link that leads out of ``root`` is not followed (a skipped record
    naming it and its target), unless ``follow``; a linked folder inside ``root``
    is walked where it really is. With ``follow``, linked folders are walked
    once each, so a link loop ends.
    """
    problems: list[OSError] = []
    skip = {os.path.realpath(p) for p in exclude}
    inside = os.path.realpath(root)
    seen = {inside}
    for folder, dirs, files in os.walk(root, onerror=problems.append, followlinks=follow):
        kept = []
        for d in sorted(dirs):
            path = os.path.join(folder, d)
            real = os.path.realpath(path)
            if d.startswith(".") or real in skip:
                continue
            if os.path.islink(path):
                if not follow and not _within(real, inside):
                    yield _outside(Path(path), real, root)
                if not follow or real in seen:
                    continue
            seen.add(real)
            kept.append(d)
        dirs[:] = kept
        for problem in problems:
            yield BadRecord(
                display_path(problem.filename or folder),
                f"cannot list the folder: {problem.strerror}",
                0,
                Problem.UNREADABLE,
            )
        problems.clear()
        for name in sorted(files):
            file = Path(folder) / name
            target = os.path.realpath(file)
            if name.startswith(".") or target in skip:
                continue
            if not follow and not _within(target, inside):
                yield _outside(file, target, root)
                continue
            yield _special(file) or file


def _within(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _outside(path: Path, real: str, root: Path) -> BadRecord:
    return BadRecord(
        display_path(path),
        f"a symbolic link to {display_path(real)}, outside {display_path(root)}: not followed",
        0,
        Problem.SYMLINK,
    )


def relative_id(path: Path, root: Path) -> str | BadRecord:
    doc_id = path.relative_to(root).as_posix()
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        return BadRecord(
            display_path(path),
            "the file name is not valid UTF-8, so it cannot be a document id (rename it)",
            0,
            Problem.INVALID,
        )
    return doc_id


def check_paths(paths: Sequence[str]) -> None:
    """Fail before reading anything if a path is missing or cannot be read whole."""
    if not paths:
        raise InvalidInput("no input given (a file, a folder, or - for stdin)")
    if paths.count(STDIN) > 1:
        raise InvalidInput("stdin (-) can be read only once")
    for path in paths:
        check_readable_file(path)


def read_sources(
    paths: Sequence[str],
    opts: SourceOptions,
    stdin: BinaryIO | None = None,
    exclude: Sequence[Path] = (),
) -> Iterator[Record | BadRecord]:
    """Records of every path in order: folders (one doc per file, id = relative path),
    text files (one doc), JSONL/CSV (one doc per record), ``-`` (stdin, JSONL by default)."""
    check_paths(paths)
    for path in paths:
        if path == STDIN:
            fmt = "jsonl" if opts.format == "auto" else opts.format
            yield from _read_stream(stdin or sys.stdin.buffer, STDIN_NAME, fmt, opts)
        elif os.path.isdir(path):
            root = Path(path)
            for item in walk(root, exclude, opts.follow_symlinks):
                doc_id = item if isinstance(item, BadRecord) else relative_id(item, root)
                if isinstance(doc_id, BadRecord):
                    yield doc_id
                else:
                    yield from read_file(item, doc_id, opts)  # type: ignore[arg-type]
        else:
            yield from read_file(Path(path), path, opts)


def input_files(
    paths: Sequence[str], exclude: Sequence[Path] = (), follow: bool = False
) -> Iterator[Path]:
    """Every regular file the paths name, folders walked as :func:`read_sources` does."""
    for path in paths:
        if path == STDIN:
            continue
        if os.path.isdir(path):
            yield from (p for p in walk(Path(path), exclude, follow) if isinstance(p, Path))
        else:
            yield Path(path)


def total_bytes(
    paths: Sequence[str], exclude: Sequence[Path] = (), follow: bool = False
) -> int | None:
    """Input size for a progress bar; None when it cannot be known (stdin, FIFO)."""
    check_paths(paths)
    if STDIN in paths:
        return None
    total = 0
    for path in input_files(paths, exclude, follow):
        try:
            info = path.stat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            return None
        total += info.st_size
    return total


# -- fingerprint lines --------------------------------------------------------
@dataclass
class FingerprintBlock:
    """Consecutive fingerprint lines parsed in bulk: the good ones as ids and a
    uint64 array, in input order, and the bad ones, each with how many good
    lines of the block came before it (so the input order can be rebuilt)."""

    ids: list[str]
    fps: np.ndarray
    bad: list[tuple[int, BadRecord]]


def _hex_table() -> np.ndarray:
    table = np.full(256, 255, dtype=np.uint8)
    for value, digit in enumerate("0123456789abcdef"):
        table[ord(digit)] = table[ord(digit.upper())] = value
    return table


_HEX_VALUE = _hex_table()
_NIBBLE_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)
_BOM = np.frombuffer(b"\xef\xbb\xbf", dtype=np.uint8)
_REGULAR_TAIL = 17  # a tab and exactly 16 hex digits end a line the bulk path takes


def read_fingerprint_lines(
    paths: Sequence[str], stdin: BinaryIO | None = None
) -> Iterator[tuple[str, int] | BadRecord]:
    """Lines ``HEX`` or ``ID<TAB>HEX``; a bare HEX gets the id ``file:line``."""
    return in_order(read_fingerprint_blocks(paths, stdin))


def in_order(blocks: Iterable[FingerprintBlock]) -> Iterator[tuple[str, int] | BadRecord]:
    """The blocks' good and bad lines one by one, in input order."""
    for block in blocks:
        start = 0
        for pos, bad in block.bad:
            yield from zip(block.ids[start:pos], block.fps[start:pos].tolist())
            yield bad
            start = pos
        yield from zip(block.ids[start:], block.fps[start:].tolist())


def read_fingerprint_arrays(paths: Sequence[str]) -> tuple[list[str], np.ndarray, list[BadRecord]]:
    """All good lines as ids and a uint64 array, and the bad lines, without a
    Python object per fingerprint."""
    ids: list[str] = []
    fps: list[np.ndarray] = [np.zeros(0, dtype=np.uint64)]
    skipped: list[BadRecord] = []
    for block in read_fingerprint_blocks(paths):
        ids.extend(block.ids)
        fps.append(block.fps)
        skipped.extend(bad for _, bad in block.bad)
    return ids, np.concatenate(fps), skipped


def read_fingerprint_blocks(
    paths: Sequence[str], stdin: BinaryIO | None = None, chunk: int = _READ_CHUNK
) -> Iterator[FingerprintBlock]:
    """The lines of :func:`read_fingerprint_lines`, ``chunk`` bytes at a time."""
    check_paths(paths)
    for path in paths:
        name = STDIN_NAME if path == STDIN else display_path(path)
        if path == STDIN:
            yield from _fingerprint_blocks(as_utf8(stdin or sys.stdin.buffer), name, chunk)
            continue
        try:
            f = open(path, "rb")  # noqa: SIM115
        except OSError as exc:
            yield _bad_block(_unreadable(name, exc))
            continue
        with f:
            yield from _fingerprint_blocks(as_utf8(f), name, chunk)


def _bad_block(bad: BadRecord) -> FingerprintBlock:
    return FingerprintBlock([], np.zeros(0, dtype=np.uint64), [(0, bad)])


def _long_line(where: str) -> BadRecord:
    reason = f"the line is over {_FINGERPRINT_LINE_BYTES} bytes (expected ID<TAB>HEX)"
    return too_large(where, None, _FINGERPRINT_LINE_BYTES)._replace(reason=reason)


def _fingerprint_blocks(f: BinaryIO, name: str, chunk: int) -> Iterator[FingerprintBlock]:
    """Whole lines, ``chunk`` bytes at a time; a line over the limit is reported
    as soon as it is, and the rest of it is read and dropped, so memory stays
    within a chunk plus one line."""
    lineno = 1  # the number of the first line not handed out yet
    carry = b""
    skipping = False
    while True:
        data = f.read(chunk)
        eof = not data
        if skipping and not eof:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            skipping, data = False, data[nl + 1 :]
        buf = carry + data
        if eof:
            if buf:
                yield _parse_lines(buf, name, lineno)
            return
        cut = buf.rfind(b"\n") + 1
        carry = buf[cut:]
        if cut:
            yield _parse_lines(buf[:cut], name, lineno)
            lineno += buf.count(b"\n", 0, cut)
        if len(carry) > _FINGERPRINT_LINE_BYTES:
            yield _bad_block(_long_line(f"{name}:{lineno}"))
            lineno += 1
            carry, skipping = b"", True


def _parse_lines(buf: bytes, name: str, first: int) -> FingerprintBlock:
    """Lines ending in a tab and 16 hex digits are parsed with NumPy; any other
    line (blank, short, 0x, BOM, NUL, not UTF-8, too long) goes through
    :func:`fingerprint_record`, so its result and report are the per-line ones."""
    padded = np.frombuffer(buf + bytes(_REGULAR_TAIL), dtype=np.uint8)
    arr = padded[: len(buf)]
    ends = np.flatnonzero(arr == 10)
    if not buf.endswith(b"\n"):
        ends = np.append(ends, len(arr))
    starts = np.concatenate(([0], ends[:-1] + 1))
    cr = (ends > starts) & (padded[ends - 1] == 13)  # an empty line has no \r to strip
    stop = ends - cr
    windows = np.lib.stride_tricks.sliding_window_view(padded, 16)
    nibbles = _HEX_VALUE[windows[np.maximum(stop - 16, 0)]]
    regular = (
        (stop - starts > _REGULAR_TAIL)
        & (ends - starts <= _FINGERPRINT_LINE_BYTES)
        & (padded[np.maximum(stop - _REGULAR_TAIL, 0)] == 9)
        & (nibbles < 16).all(axis=1)
        & (windows[starts, :3] != _BOM).any(axis=1)
    )
    regular[np.searchsorted(ends, np.flatnonzero(arr == 0))] = False
    try:
        text = buf.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
        regular[:] = False
    good = np.flatnonzero(regular)
    ids = _regular_ids(text, good, cr, buf.count(b"\t") == len(good) == len(ends))
    nibbles = nibbles[good]
    fps = ((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view(">u8").ravel().astype(np.uint64)
    odd = np.flatnonzero(~regular)
    if not len(odd):
        return FingerprintBlock(ids, fps, [])
    return _merge_odd(buf, name, first, (starts, ends), odd, FingerprintBlock(ids, fps, []), good)


def _regular_ids(text: str, good: np.ndarray, cr: np.ndarray, only_separators: bool) -> list[str]:
    """The ids of the regular lines. When every line is regular and its tab the
    only one, splitting on tabs and newlines gives ids and hex alternately."""
    if only_separators and not cr.any():
        return text.replace("\n", "\t").split("\t")[0 : 2 * len(good) : 2]
    lines = text.split("\n")
    return [lines[i][:-c] for i, c in zip(good.tolist(), (_REGULAR_TAIL + cr[good]).tolist())]


def _merge_odd(
    buf: bytes,
    name: str,
    first: int,
    bounds: tuple[np.ndarray, np.ndarray],
    odd: np.ndarray,
    block: FingerprintBlock,
    good: np.ndarray,
) -> FingerprintBlock:
    """Add the lines the bulk path left (``odd``) to ``block``, in input order."""
    starts, ends = bounds
    extra_pos: list[int] = []
    extra_ids: list[str] = []
    extra_fps: list[int] = []
    bad_lines: list[tuple[int, BadRecord]] = []
    for i in odd.tolist():
        item = fingerprint_record(buf[starts[i] : ends[i] + 1], f"{name}:{first + i}")
        if isinstance(item, BadRecord):
            bad_lines.append((i, item))
        elif item is not None:
            extra_pos.append(i)
            extra_ids.append(item[0])
            extra_fps.append(item[1])
    pos = np.concatenate((good, np.array(extra_pos, dtype=np.int64)))
    order = np.argsort(pos, kind="stable")
    ids = block.ids + extra_ids
    fps = np.concatenate((block.fps, np.array(extra_fps, dtype=np.uint64)))
    kept = pos[order]
    bad = [(int(np.searchsorted(kept, i)), b) for i, b in bad_lines]
    return FingerprintBlock([ids[j] for j in order.tolist()], fps[order], bad)


def fingerprint_record(raw: bytes, where: str) -> tuple[str, int] | BadRecord | None:
    """One raw line (with its newline, if any) the per-line way; None for a blank line."""
    if len(raw) - raw.endswith(b"\n") > _FINGERPRINT_LINE_BYTES:
        return _long_line(where)
    line = decode_text(raw, where, wide=False)
    if isinstance(line, BadRecord):
        return line._replace(where=where)
    return _fingerprint_line(line.rstrip("\r\n"), where) if line.strip() else None


def _fingerprint_line(line: str, where: str) -> tuple[str, int] | BadRecord:
    doc_id, _, hex_fp = line.rpartition("\t")
    try:
        return doc_id or where, parse_fingerprint_hex(hex_fp)
    except InvalidInput as exc:
        return BadRecord(where, str(exc), 0, Problem.BAD_FINGERPRINT)
