"""WARC files (a crawler's archive): each response record holding a page is one
document, its id the record's target URI. Read with warcio; the records are named
``file@offset`` (the record's byte offset in the uncompressed archive)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers.base import SourceOptions, as_text, decoded, read_bounded, too_large

#: Responses read as documents; any other (images, scripts, PDFs) is not text.
PAGE_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text"}


def read_warc(f: BinaryIO, name: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    """The pages of a WARC archive; a record that cannot be parsed ends the reading
    there (WARC records have no line to resume at), said as one bad record."""
    from warcio.archiveiterator import ArchiveIterator  # loaded for WARC input only

    records = ArchiveIterator(f, ensure_http_headers=False)
    at = [0]  # the offset of the last record read whole

    def where() -> str:
        """The record's name; warcio knows its offset once it is read to its end."""
        at[0] = records.get_record_offset()
        return f"{name}@{at[0]}"

    try:
        for record in records:
            if record.rec_type == "response":
                item = _page(record, where, opts)
                if item is not None:
                    yield item
    except Exception as exc:  # warcio raises plain exceptions of many kinds on damage
        yield BadRecord(
            f"{name}@{at[0]}",
            f"not a readable WARC record after this one ({_said(exc)}); the records before "
            "were read, the rest of the archive was not",
            0,
            Problem.MALFORMED,
        )


def _said(exc: Exception) -> str:
    """warcio's error, short and printable (it may quote a line of binary garbage)."""
    text = f"{type(exc).__name__}: {exc}"
    return text[:160].encode("ascii", "backslashreplace").decode("ascii")


def _page(
    record: Any, where_of: Callable[[], str], opts: SourceOptions
) -> Record | BadRecord | None:
    """One response: a document, a bad record, or None (not a page)."""
    headers = record.http_headers
    content_type = (headers.get_header("Content-Type") or "") if headers is not None else ""
    mime, _, params = content_type.partition(";")
    fmt = PAGE_TYPES.get(mime.strip().lower())
    if fmt is None:
        return None
    uri = record.rec_headers.get_header("WARC-Target-URI")
    try:
        raw, more = read_bounded(record.content_stream(), opts.max_bytes)
        error = None
    except Exception as exc:  # a Content-Encoding or chunked body that does not decode
        error = exc
    where = where_of()
    if error is not None:
        return BadRecord(where, f"the body does not decode ({error})", 0, Problem.MALFORMED)
    if not uri:
        return BadRecord(where, "a response without WARC-Target-URI", 0, Problem.MISSING_FIELD)
    if more:
        return too_large(where, None, opts.max_bytes)
    return as_text(decoded(raw, where, uri, fmt, _declared(params)), fmt, opts)


def _declared(params: str) -> str | None:
    """The charset the Content-Type declares (it outranks the page's ``<meta>``)."""
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value.strip("\"' "):
            return value.strip("\"' ")
    return None
