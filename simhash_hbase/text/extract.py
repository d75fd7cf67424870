"""Raw input -> the text that is fingerprinted: the one way every surface reads it.

Readers (files, folders, JSONL, CSV, stdin), ``query``, ``fingerprint``, ``dedup``,
``--file`` and the library all call :func:`to_text`, so a page that was ingested
is found again when the same page is queried.
"""

from __future__ import annotations

import codecs

from simhash_hbase.errors import InvalidInput, InvalidQuery
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

    Bytes are UTF-8 (a BOM is dropped); a page that is not UTF-8 is read in the
    charset its ``<meta>`` declares. :class:`InvalidInput` says what is wrong.
    """
    check_format(fmt)
    check_mode(html)
    text = decode(raw, fmt) if isinstance(raw, bytes) else raw
    return html_to_text(text, html) if is_html(text, fmt) else text


def decode(raw: bytes, fmt: str = "auto") -> str:
    """``raw`` as text: UTF-8, or for a page the charset it declares."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InvalidInput(f"binary content (NUL byte at offset {nul}); only text is indexed")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problem = exc
    charset = declared_charset(raw) if fmt != "text" else None
    if charset is not None:
        try:
            codec = codecs.lookup(charset)
        except LookupError:
            codec = None
        if codec is not None and _is_text_codec(codec.name):
            return raw.decode(codec.name, "replace")
    line = raw.count(b"\n", 0, problem.start) + 1
    raise InvalidInput(
        f"invalid UTF-8 at byte {problem.start} (line {line}) and no usable charset declared; "
        "re-encode it as UTF-8 (from GBK: iconv -f GB18030 -t UTF-8)"
    )


def _is_text_codec(name: str) -> bool:
    """Codecs that decode text (not base64, rot13 or the like)."""
    return codecs.lookup(name)._is_text_encoding  # type: ignore[attr-defined,no-any-return]


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
