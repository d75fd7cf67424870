"""Fuzz targets: every reader and the text -> fingerprint path (issue 22.8).

Each target takes arbitrary bytes and checks a property, not only "no crash":
readers account for every line, the bulk fingerprint-line parser agrees with the
per-line one, a fingerprint is deterministic, the two segmenters agree. An
exception that is not the documented one (``InvalidInput`` where a function may
refuse input) is a finding. Run with atheris: ``python -m fuzz.run TARGET``
(docs/fuzzing.md); tests/test_fuzz.py runs each briefly.
"""

from __future__ import annotations

import contextlib
import gzip
import io
from collections.abc import Callable

from simhash_hbase.errors import EmptyDocument, InvalidInput
from simhash_hbase.records import BadRecord, Record
from simhash_hbase.text.extract import to_text
from simhash_hbase.text.readers import (
    STDIN,
    SourceOptions,
    as_utf8,
    fingerprint_record,
    read_fingerprint_lines,
    read_sources,
    wide_encoding,
)
from simhash_hbase.text.readers.compressed import compression_of
from simhash_hbase.text.readers.sniff import kind_of

_MAX = 1 << 16


def _read(data: bytes, **options: object) -> list[Record | BadRecord]:
    opts = SourceOptions(max_bytes=_MAX, **options)  # type: ignore[arg-type]
    return list(read_sources([STDIN], opts, stdin=io.BytesIO(data)))


def _utf8(data: bytes) -> bytes:
    """``data`` as the readers see it: UTF-16/32 (known by its BOM) as UTF-8."""
    return as_utf8(io.BytesIO(data)).read()


def text_reader(data: bytes) -> None:
    """A plain text read from a stream is one record: its exact text, or one bad record."""
    items = _read(data, format="text", stdin_id="doc")
    assert len(items) == 1, items
    (item,) = items
    if isinstance(item, Record):  # the text as its encoding says: a BOM dropped once
        wide = wide_encoding(data[:4])
        try:
            expected = data.decode(wide) if wide else data.decode("utf-8-sig")
        except UnicodeDecodeError:  # a legacy charset, read by evidence (text/charset.py):
            assert "\ufffd" not in item.text, "decoded with replacement characters"
            return
        assert item.text == expected, "text changed on the way in"


def html_reader(data: bytes) -> None:
    """A page, in both modes: text (one block a line, no empty line) or one bad record."""
    for mode in ("main", "raw"):
        (item,) = _read(data, format="html", stdin_id="page", html=mode)
        if isinstance(item, Record):
            lines = item.text.split("\n") if item.text else []
            assert all(line and line == line.strip() for line in lines), lines[:5]
            assert "\x00" not in item.text


def jsonl_reader(data: bytes) -> None:
    """Every non-blank line is one record or one bad record that names its line (a
    JSON array or compressed bytes are read by their content: ``content`` checks them)."""
    items = _read(data, format="jsonl")
    if (
        compression_of(data[:16], "") is not None
        or kind_of(_utf8(data[:4096]), "", "jsonl") != "jsonl"
    ):
        assert all(item.where.startswith("<stdin>") for item in items), items[:3]
        return
    lines = _utf8(data).split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    blank = 0
    for line in lines:  # blank as the reader sees it: a UTF-8 BOM is dropped
        with contextlib.suppress(UnicodeDecodeError):
            blank += not line.decode("utf-8-sig").strip()
    assert len(items) == len(lines) - blank, (len(items), len(lines), blank)
    for item in items:
        assert item.where.startswith("<stdin>:"), item


def content_reader(data: bytes) -> None:
    """Any bytes on stdin, read by their content (compressed, a JSON array or lines,
    WARC): records and bad records naming stdin, never raising; the same bytes
    gzip-compressed give the same items."""
    items = _read(data)
    assert all(item.where.startswith("<stdin>") for item in items), items[:3]
    if len(data) <= 4096 and compression_of(data[:16], "") is None:
        assert _read(gzip.compress(data)) == items


def csv_reader(data: bytes) -> None:
    """A CSV stream gives records and bad records, each naming its line, never raising."""
    for item in _read(data, format="csv"):
        assert isinstance(item, (Record, BadRecord))
        assert item.where.startswith("<stdin>:"), item


def fingerprint_reader(data: bytes) -> None:
    """The bulk (NumPy) parser of ``ID<TAB>HEX`` lines agrees with the per-line one."""
    bulk = list(read_fingerprint_lines([STDIN], stdin=io.BytesIO(data)))
    utf8 = _utf8(data)
    one_by_one: list[tuple[str, int] | BadRecord] = []
    for lineno, line in enumerate(utf8.splitlines(keepends=True), 1):
        if line.endswith(b"\r") and not line.endswith(b"\r\n"):
            return  # a lone CR: the bulk reader's lines end at \n only (splitlines differs)
        item = fingerprint_record(line, f"<stdin>:{lineno}")
        if item is not None:
            one_by_one.append(item)
    assert bulk == one_by_one, (bulk[:3], one_by_one[:3])


_fingerprinters: dict[int, Callable[[str], int]] = {}


def fingerprint_text(data: bytes) -> None:
    """raw -> text -> fingerprint: deterministic, the same from a fresh fingerprinter."""
    from simhash_hbase.fingerprint.simhash import Fingerprinter

    try:
        text = to_text(data, "auto")
    except InvalidInput:
        return
    if not _fingerprinters:
        _fingerprinters[1] = Fingerprinter().fingerprint
    try:
        first = _fingerprinters[1](text)
    except EmptyDocument:
        return
    assert _fingerprinters[1](text) == first
    assert Fingerprinter().fingerprint(text) == first


def segmenters(data: bytes) -> None:
    """jieba and rjieba (the fast path) cut every text into the same tokens."""
    from simhash_hbase.fingerprint import segment

    text = data.decode("utf-8", "replace")
    slow, fast = segment.segmenter("jieba"), segment.segmenter("rjieba")
    assert list(slow(text)) == list(fast(text)), text


TARGETS: dict[str, Callable[[bytes], None]] = {
    "text": text_reader,
    "html": html_reader,
    "jsonl": jsonl_reader,
    "content": content_reader,
    "csv": csv_reader,
    "fingerprints": fingerprint_reader,
    "fingerprint_text": fingerprint_text,
    "segmenters": segmenters,
}
