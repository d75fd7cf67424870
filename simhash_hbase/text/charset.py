"""Bytes to text by evidence: the one decoding every surface that reads bytes uses.

Valid UTF-8 is trusted as it is (the readers know UTF-16/32 by a byte order mark):
it costs nothing more. Bytes that are not UTF-8 prove the guess wrong, and only then is the evidence
weighed (issue 39.6): a charset the input declares (a page's ``<meta>``, a
Content-Type) and the candidates of a maintained detector (charset-normalizer). A
declared multi-byte charset (GBK, Big5, Shift_JIS, EUC-KR) that no other such family
decodes at all is taken as it is, if its reading is not odd: the detector (~2 ms a
page) runs only when the evidence is not that plain. Then a decoding is taken only
when the two agree (or, with no usable declaration, when one candidate alone reads as
likely text); otherwise :class:`Undecodable` names what was tried. A wrong guess is
never indexed: mojibake is a fingerprint that matches nothing.

"Likely text" is charset-normalizer's mess ratio and :func:`odd_share`: the share of
words that no real text writes but mojibake does (half-width katakana, a lower-case
letter followed by a capital in a non-ASCII word, a CJK character alone inside a Latin
or Cyrillic word, Hangul glued to Han or kana, a symbol inside a word, a private-use
or C1 control character, a closing quote glued to a word's start, two scripts in one
word). With no usable declaration, the clear best of one-byte readings (:func:`_best`)
is taken too: Windows-1251 read as Mac Cyrillic is odd, Hebrew read as CP1251 is no
language's letters. tests/test_charset.py checks the whole class: texts of many
scripts in many encodings, declared right, wrong or not at all.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from simhash_hbase.errors import InvalidInput

if TYPE_CHECKING:
    import regex

#: How many bytes the detector reads (cut at a space or a newline, which no legacy
#: multi-byte charset uses inside a character); the chosen charset decodes the whole.
DETECT_BYTES = 256 * 1024
#: The legacy multi-byte charsets (as Python names them), each to its family's widest
#: member. A declared one whose reading is likely text, and that no other family
#: decodes at all, is taken without the detector (a GBK page costs four strict decodes,
#: not a detection: benchmarks/html_pages.py); one-byte charsets decode any bytes, so
#: their readings are always weighed.
MULTIBYTE = {
    "gb18030": "gb18030", "gbk": "gb18030", "gb2312": "gb18030", "big5": "big5hkscs",
    "big5hkscs": "big5hkscs", "cp932": "cp932", "shift_jis": "cp932", "euc_jp": "euc_jp",
    "cp949": "cp949", "euc_kr": "cp949",
}  # fmt: skip
#: How much of a decoded text is judged likely or not.
JUDGE_CHARS = 4096
#: The most mess (charset-normalizer's ratio, 0..1) a likely text holds.
MAX_MESS = 0.2
#: How much more mess than the best likely reading the next one must have for a
#: declaration that agrees with the best to be taken.
MARGIN = 0.05
#: How much more like a language (coherence, 0..1) the best of near readings must be.
LANGUAGE_MARGIN = 0.04
#: The most letters (a share of the non-ASCII ones) that sibling readings differ in.
SIBLING_SHARE = 0.5
#: The largest share of odd words (:func:`odd_share`) in a likely text.
MAX_ODD = 0.05


class Undecodable(InvalidInput):
    """Bytes that are not UTF-8 and that no charset reads as likely text for sure."""


def decode_bytes(raw: bytes, declared: str | None = None) -> str:
    """``raw`` as text: UTF-8 (a BOM dropped); else the charset the evidence names
    (module docstring). ``declared``: the charset the input says it is in.
    :class:`Undecodable` says what was tried; its message starts with where the
    UTF-8 breaks (byte and line)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problem = exc
    line = raw.count(b"\n", 0, problem.start) + 1
    where = f"invalid UTF-8 at byte {problem.start} (line {line})"
    codec = _text_codec(declared)
    head = _head(raw)
    said, text = _declared_reading(head, codec, declared)
    # a multi-byte charset that no other family decodes at all: its reading, unless odd
    if codec and text and _unrivalled(head, codec) and odd_share(_sample(text)) <= MAX_ODD:
        return text if head is raw else _whole(raw, codec, where)
    sure = text is not None and likely(text)
    good = [reading for reading in _named(head) if likely(reading[1])]
    if codec and sure and _agrees(text or "", good):
        return _whole(raw, codec, where)
    if text is not None:
        why = "other text than the detector's best" if sure else "unlikely text (mojibake)"
        said = f"its declared charset {declared} reads it as {why}"
    # a likely declared reading that is not the detector's clear best: two readings;
    # else the clear best of one-byte readings (a short CJK text ranks by chance)
    best = _best(good, ties=False) if len(good) == 1 or _one_byte(head, good) else None
    if best is not None and not sure:
        return _whole(raw, best[0], where)
    names = ", ".join(reading[0] for reading in good)
    if not good:
        found = "no other charset reads it as likely text"
    elif len(good) == 1:
        found = f"the detector reads it as {names}: which is meant is unknown"
    else:
        found = f"more than one charset reads it as likely text ({names}): which is unknown"
    raise Undecodable(f"{where}; {said}, and {found}")


def _declared_reading(
    head: bytes, codec: str | None, declared: str | None
) -> tuple[str, str | None]:
    """What the declaration says (for the reason), and its reading if it decodes."""
    if codec is None:
        return (f"its declared charset {declared!r} is none that shdb knows" if declared
                else "it declares no charset"), None  # fmt: skip
    try:
        return "", head.decode(codec)
    except UnicodeDecodeError as exc:
        return f"its declared charset {declared} does not decode byte {exc.start}", None


def _unrivalled(head: bytes, codec: str) -> bool:
    """Whether ``codec`` is multi-byte and no other family of :data:`MULTIBYTE`
    decodes ``head`` at all."""
    family = MULTIBYTE.get(codec)
    if family is None:
        return False
    for rival in set(MULTIBYTE.values()) - {family}:
        try:
            head.decode(rival)
        except UnicodeDecodeError:
            continue
        return False
    return True


def likely(text: str) -> bool:
    """Whether ``text`` reads as text rather than mojibake (module docstring), judged
    on :data:`JUDGE_CHARS` of it, long runs of ASCII (a page's markup) left out: the
    same in every charset, they are no evidence."""
    from charset_normalizer.md import mess_ratio

    sample = _sample(text)
    return odd_share(sample) <= MAX_ODD and mess_ratio(sample, MAX_MESS) <= MAX_MESS


def _sample(text: str) -> str:
    return _ASCII_RUN(" ", text[: 8 * JUDGE_CHARS])[:JUDGE_CHARS]


def odd_share(text: str) -> float:
    """The share of ``text``'s words outside ASCII (an ASCII word reads alike in every
    charset: no evidence) that no real text writes (module docstring); a word with
    two odd places counts twice."""
    if _MAYBE_ODD(text) is None:
        return 0.0  # Han, kana and ASCII alone (a Chinese page): no odd word possible
    patterns = _patterns()
    words = sum(not word.isascii() for word in patterns.word.findall(text))
    return min(len(patterns.odd.findall(text)) / words, 1.0) if words else 0.0


#: What an odd word needs one of (C1 controls, cased letters beyond ASCII, Hangul,
#: symbols, private use, half-width kana; or CJK inside an ASCII word), in ``re``: a
#: text without any is judged in microseconds, not in the ~0.2 ms a KB of ``regex``'s
#: scripts cost.
_MAYBE_ODD = re.compile(
    "[\x80-\x9f\u00c0-\u052f\u1100-\u11ff\u2100-\u2bff\u3130-\u318f\u3200-\u33ff"
    "\ua960-\ua97f\uac00-\ud7ff\ue000-\uf8ff\uff61-\uff9f\U0001f000-\U0001ffff]"
    "|[a-zA-Z][\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff][a-zA-Z]"
).search


_ASCII_RUN = re.compile(r"[\x00-\x7f]{64,}").sub


class _Patterns(NamedTuple):
    word: regex.Pattern[str]
    odd: regex.Pattern[str]
    other: regex.Pattern[str]  # what is not a letter, mark or digit


@cache
def _patterns() -> _Patterns:
    import regex

    cased = r"[\p{Latin}\p{Cyrillic}\p{Greek}]"
    cjk = r"[\p{Han}\p{Hangul}\p{Hiragana}\p{Katakana}]"
    beyond = r"[\p{L}--\p{ASCII}]"
    return _Patterns(
        regex.compile(r"[\p{L}\p{M}\p{N}\p{So}\p{Co}]+", regex.V1),
        regex.compile(
            r"[\uff61-\uff9f\p{Co}\p{Cn}\x80-\x9f]"  # half-width kana, private, unassigned, C1
            r"|(?<=\p{Ll})\p{Lu}(?<=[^\x00-\x7f].|.[^\x00-\x7f])"  # oDD case, not ASCII
            rf"|(?<={cased}){cjk}(?={cased})"  # one CJK character inside a Latin word
            r"|(?<=\p{Hangul})[\p{Han}\p{Hiragana}\p{Katakana}]"  # Hangul glued to Han, kana
            r"|(?<=[\p{Han}\p{Hiragana}\p{Katakana}])\p{Hangul}"
            r"|(?<=\p{L})\p{So}|\p{So}(?=\p{L})"  # a symbol inside a word
            # a currency, math or modifier symbol (``€``: CP1251's ``я`` read as Mac
            # Cyrillic) or a pilcrow touching a letter beyond ASCII (``US$`` is text)
            rf"|(?<={beyond})[\p{{S}}¶--\p{{ASCII}}]|[\p{{S}}¶--\p{{ASCII}}](?={beyond})"
            # a closing quote, dash or ellipsis glued to the start of a word beyond ASCII
            # (``”кажите``, ``—имволические``: CP1251's capitals read as Mac Cyrillic)
            rf"|(?<![\p{{L}}\p{{N}}])[”’»…–—](?={beyond})"
            # letters of two cased scripts in one word (``ƒом``: CP1251's ``Д``)
            r"|(?<=\p{Latin})[\p{Cyrillic}\p{Greek}]|(?<=[\p{Cyrillic}\p{Greek}])\p{Latin}"
            r"|(?<=\p{Cyrillic})\p{Greek}|(?<=\p{Greek})\p{Cyrillic}",
            regex.V1,
        ),
        regex.compile(r"[^\p{L}\p{M}\p{N}]+", regex.V1),
    )


def _text_codec(name: str | None) -> str | None:
    """The codec a declared charset names, if it is one that decodes text."""
    if not name:
        return None
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    return info.name if info._is_text_encoding else None  # type: ignore[attr-defined]


def _head(raw: bytes) -> bytes:
    """What the detector reads: the first :data:`DETECT_BYTES`, cut after a space
    or newline so that no character is cut in two."""
    if len(raw) <= DETECT_BYTES:
        return raw
    cut = max(raw.rfind(b"\n", 0, DETECT_BYTES), raw.rfind(b" ", 0, DETECT_BYTES))
    return raw[: cut + 1] if cut > 0 else raw[:DETECT_BYTES]


def _agrees(text: str, good: list[tuple[str, str, float, float]]) -> bool:
    """Whether the detector clearly agrees with a declared reading ``text``: it is
    (or only a sibling's reading of the same letters: CP1252 and CP1250, CP1251 and
    KZ-1048) the reading :func:`_best` names. Shift_JIS read as GBK ranks above
    Shift_JIS in a short line: without a clear agreement nothing is taken."""
    best = _best(good, ties=True)
    return best is not None and _siblings(_letters(text), _letters(best[1]))


def _best(
    good: list[tuple[str, str, float, float]], ties: bool
) -> tuple[str, str, float, float] | None:
    """The detector's clear best likely reading, if one is: no other comes within
    :data:`MARGIN` of its mess unless it is less like a language by
    :data:`LANGUAGE_MARGIN` (charset-normalizer's coherence: Hebrew read as CP1251 is
    plain Cyrillic letters, but no language's), has more odd words, or is only a
    sibling's reading."""
    if not good:
        return None
    near = [g for g in good if g[2] < good[0][2] + MARGIN]
    odd = [odd_share(_sample(g[1])) for g in near]
    # fewer odd words is evidence too: ``”кажите`` is CP1251's ``Укажите`` as Mac Cyrillic
    near = sorted((g for g, o in zip(near, odd) if o == min(odd)), key=lambda g: -g[3])
    if len(near) == 1 or near[1][3] <= near[0][3] - LANGUAGE_MARGIN:
        return near[0]
    top = _letters(near[0][1])
    if not all(_siblings(top, _letters(g[1])) for g in near[1:]):
        return None
    return near[0] if ties or near[0][3] > near[1][3] else None


def _siblings(a: str, b: str) -> bool:
    """Two readings of one text by sibling charsets: the same letters but for a few
    of the same script and case (``è``/``č``), not a case flip (CP1251 and KOI8-R)."""
    if len(a) != len(b):
        return False
    differ = [(x, y) for x, y in zip(a, b) if x != y]
    return len(differ) <= SIBLING_SHARE * sum(not c.isascii() for c in a) and all(
        x.isupper() == y.isupper() and _script(x) == _script(y) for x, y in differ
    )


def _script(char: str) -> str:
    """The script a letter's Unicode name starts with (LATIN, CYRILLIC, GREEK, ...)."""
    return unicodedata.name(char, "?").split(" ", 1)[0]


def _named(head: bytes) -> list[tuple[str, str, float, float]]:
    """The detector's candidates with little mess, best first, one a reading: two
    charsets that differ only in punctuation (GB2312's and GB18030's dash) read
    alike, and the fingerprint ignores punctuation. A one-byte charset reads any
    bytes as some letters: its reading counts only when they are a language's
    (charset-normalizer's coherence; ``КЃСПџў`` is GBK read as ISO-8859-5)."""
    from charset_normalizer import from_bytes

    out: list[tuple[str, str, float, float]] = []
    seen: set[str] = set()
    # not preemptive: the declaration is the other witness, weighed apart
    for match in from_bytes(head, preemptive_behaviour=False, cp_exclusion=_WIDE):
        text = str(match)
        key = _letters(text)
        wide = len(text) < len(head)  # characters of more than one byte
        if match.chaos <= MAX_MESS and (wide or match.coherence > 0) and key not in seen:
            seen.add(key)
            out.append((match.encoding, text, match.chaos, match.coherence))
    return out


#: UTF-16/32 without a byte order mark: any even run of bytes reads as some characters.
_WIDE = ["utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le"]


def _one_byte(head: bytes, good: list[tuple[str, str, float, float]]) -> bool:
    """Whether every reading is of a one-byte charset (one character a byte)."""
    return all(len(reading[1]) == len(head) for reading in good)


def _letters(text: str) -> str:
    """``text``'s letters, marks and digits: what tells two readings apart."""
    return _patterns().other.sub("", text)


def _whole(raw: bytes, codec: str, where: str) -> str:
    """``raw`` in ``codec``; the detector read only its head."""
    try:
        return raw.decode(codec)
    except UnicodeDecodeError as exc:
        raise Undecodable(
            f"{where}; it reads as {codec} up to byte {exc.start}, which that does not decode"
        ) from None
