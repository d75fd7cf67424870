"""Raw input -> the text that is fingerprinted: the one way every surface reads it.

Readers (files, folders, JSONL, CSV, stdin), ``query``, ``fingerprint``, ``dedup``,
``--file`` and the library all call :func:`to_text`, so a page that was ingested
is found again when the same page is queried.
"""

from __future__ import annotations

from simhash_hbase.errors import InvalidInput, InvalidQuery
from simhash_hbase.text.charset import decode_bytes
from simhash_hbase.text.html import (
    DEFAULT_HTML_MODE,
    check_mode,
    declared_charset,
    html_to_text,
    looks_like_html,
)

#: ``auto``: HTML when the input is a whole HTML document (:func:`looks_like_html`),
#: else text; ``text``: as it is; ``html``: always parsed as a page.
TEXT_FORMATS = ("auto", "text", "html")


def check_format(fmt: str) -> None:
    if fmt not in TEXT_FORMATS:
        raise InvalidInput(f"unknown text format {fmt!r}; one of: {', '.join(TEXT_FORMATS)}")


def is_html(text: str, fmt: str = "auto") -> bool:
    """Whether :func:`to_text` reads ``text`` as a page in format ``fmt``."""
    check_format(fmt)
    return fmt == "html" or (fmt == "auto" and looks_like_html(text))


def to_text(raw: str | bytes, fmt: str = "auto", *, html: str = DEFAULT_HTML_MODE) -> str:
    """The fingerprint text of ``raw``: a page's article (``html="main"``) or its
    visible text (``"raw"``), or the text as it is.

    Bytes are UTF-8 (a BOM is dropped), or the charset that a page's ``<meta>`` and
    a detector agree on (:func:`decode`). :class:`InvalidInput` says what is wrong.
    """
    check_format(fmt)
    check_mode(html)
    text = decode(raw, fmt) if isinstance(raw, bytes) else raw
    return html_to_text(text, html) if is_html(text, fmt) else text


def decode(raw: bytes, fmt: str = "auto", declared: str | None = None) -> str:
    """``raw`` as text, by evidence (:func:`~simhash_hbase.text.charset.decode_bytes`):
    UTF-8, or a charset that ``declared`` (a Content-Type's) or else a page's
    ``<meta>`` (``fmt`` not ``text``) and a detector agree on."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InvalidInput(f"binary content (NUL byte at offset {nul}); only text is indexed")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if declared is None and fmt != "text":
        declared = declared_charset(raw)
    return decode_bytes(raw, declared)


def check_query_text(text: object) -> None:
    """:class:`InvalidQuery` unless ``text`` is a string (None, bytes: a caller's slip)
    of Unicode characters."""
    if not isinstance(text, str):
        raise InvalidQuery(
            f"a query text must be a str, not {type(text).__name__} ({text!r:.40}); "
            "decode bytes first, or query a fingerprint with query_fingerprint()"
        )
    try:
        check_text(text, "the query text")
    except InvalidInput as exc:
        raise InvalidQuery(str(exc)) from None


def check_text(text: object, what: str) -> str:
    """``text`` if it is a string the fingerprint can read: a lone surrogate (from
    ``errors="surrogateescape"``, or a JSON escape) is not a character, and would fail
    deep in the segmenter (OpenCC) as a UnicodeEncodeError."""
    if not isinstance(text, str):
        raise InvalidInput(f"{what} is a {type(text).__name__}, not a string")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(
                f"{what} holds a lone surrogate ({text[exc.start]!r} at character "
                f"{exc.start}), not Unicode text: decode its source with errors='replace'"
            ) from None
    return text
