"""CSV and TSV: a header row (or ``--columns``), then one record a row."""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Generator, Iterator
from typing import BinaryIO

from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers.base import SourceOptions, bounded_lines, seekable, too_large
from simhash_hbase.text.readers.jsonl import record_from_fields


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
        self.seekable = seekable(f)
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
        if first and self.seekable and not again:
            self.resume = (self.lineno + 1, self._f.tell())
        if line is None or self.record_bytes > self._max:
            self.over = True
            self.held = []
            quotes = quotes if line is None else line.count(b'"')
            return '"' * quotes + "\n"
        self.held.append((self.lineno, line))
        # surrogateescape keeps reading past invalid UTF-8; the row is checked later.
        return line.decode("utf-8", "surrogateescape")


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


def read_csv(
    f: BinaryIO, name: str, opts: SourceOptions, delimiter: str
) -> Iterator[Record | BadRecord]:
    feed = _CsvFeed(f, opts.max_bytes)
    csv.field_size_limit(opts.max_bytes + 1)  # characters <= bytes: the feed's limit rules
    reader = csv.reader(feed, delimiter=delimiter, strict=True)
    header = list(opts.columns) if opts.columns is not None else None
    if header is None:
        header = yield from _header(reader, feed, name, opts)
        if header is None:
            return
    lacking = _lacking(header, opts)
    first = True
    while True:
        where = f"{name}:{feed.start_record()}"
        try:
            row = next(reader)
        except StopIteration:
            if lacking is not None and first:  # a header alone: said, not silent
                yield BadRecord(f"{name}:1", lacking, 0, Problem.MISSING_FIELD)
            return
        except csv.Error as exc:
            first = False  # a record, if a bad one: the header is not alone
            yield _malformed_csv(where, exc, feed)
            if not feed.give_back():
                return
            reader = csv.reader(feed, delimiter=delimiter, strict=True)  # a fresh quoting state
            continue
        if first and row:  # a headerless file's BOM is on its first record
            row[0] = row[0].removeprefix("\ufeff")
        first = False
        if feed.over:
            yield too_large(where, None, opts.max_bytes)
        elif lacking is not None and any(row):  # each row a skipped record, as in JSON Lines
            yield BadRecord(where, lacking, feed.record_bytes, Problem.MISSING_FIELD)
        else:
            yield _csv_record(row, header, opts, where, feed.record_bytes)


def _header(
    reader: Iterator[list[str]], feed: _CsvFeed, name: str, opts: SourceOptions
) -> Generator[BadRecord, None, list[str] | None]:
    """The header row, or None (unreadable: the file is skipped, said as one bad record)."""
    where = f"{name}:1"
    try:
        header = next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        yield BadRecord(where, f"unreadable CSV header ({exc})", 0, Problem.MALFORMED)
        return None
    if header:  # an empty first line is a header without columns (named below)
        header[0] = header[0].removeprefix("\ufeff")
    problem = _check_utf8(header, where)
    if feed.over:
        problem = too_large(where, None, opts.max_bytes)
    if problem is not None:
        yield problem._replace(reason=problem.reason + " in the header; the file was skipped")
        return None
    return header


def _lacking(header: list[str], opts: SourceOptions) -> str | None:
    """Why every row of a CSV whose header lacks the id or text column is skipped
    (each row is one skipped record, named by its line, as a JSON line without the
    field is), or None."""
    missing = [c for c in opts.fields if c not in header]
    if not missing:
        return None
    cells = ", ".join(cell.replace("\n", " ")[:40] for cell in header[:8])[:200]
    return (
        f"no column {missing[0]!r} in the header on line 1 (columns: {cells}); "
        "a CSV without a header row: name its columns with --columns"
    )


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
    return record_from_fields(dict(zip(header, row)), opts, where, size)
