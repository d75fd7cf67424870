"""Words of every script: fingerprint version 3's segmentation around jieba's.

jieba cuts Han text (and ASCII words) well, but splits every other script into single
characters: a SimHash of those is one of letter frequencies, nearly the same for any
two texts of one alphabet (issue 39.1). Version 3 takes out of the text, before jieba
sees it, the runs that jieba cannot cut, and segments them by script:

- **Words** (:func:`_patterns`): a maximal run of letters, combining marks (Devanagari's
  virama and vowel signs, Arabic and Hebrew points), digits and the joiners ZWNJ/ZWJ
  (Persian, Indic) that holds a character outside ASCII, Han, kana and the scripts
  written without spaces. That is every space-delimited script: Cyrillic, Greek,
  Arabic, Hebrew, Armenian, Georgian, the Indic scripts, Hangul and Latin with
  diacritics (``Türkçe``, ``tiếng``, ``café``). Case is folded (``str.casefold``).
- **Kana** (Japanese between kanji, which go to jieba): a run of katakana is a word
  (loanwords: ``ファイル``, ``テーブル``); so is a run of hiragana (inflections and
  function words: ``ません``, ``して``, which the stop words and IDF-less counts treat as
  any other word), but a lone hiragana is a particle (の, は, を) and no term. Bigrams of
  kana were measured worse (docs/segmenters.md): the pieces of inflections (``ませ``,
  ``せん``) were the heaviest terms of every Japanese text.
- **Thai, Lao, Khmer, Myanmar** (written without spaces): trigrams of grapheme
  clusters (a consonant with its marks; a spacing vowel is a cluster of its own), about
  a syllable and a half, as Chinese character bigrams are. Bigrams were measured
  (docs/segmenters.md): pieces of a syllable (``าร``, ``อง``) common to every Thai text.

In a text that holds such runs, the ASCII stop words of other Latin-script languages
(``de``, ``la``, ``und``: :data:`LATIN_STOPWORDS`) are dropped from jieba's tokens too; a
French or Spanish text is no bag of its function words, and English text keeps its
terms (``die``, ``son``, ``come``). The stop words of the other scripts are terms' own
(``data/stopwords-scripts.txt``; both lists: ``benchmarks/stopword_lists.py``).

What is left (Han, ASCII words, digits, punctuation) goes to jieba as one text, with a
newline where each run was: jieba cuts its blocks (runs of Han and ASCII characters)
independently of each other, and a newline ends a block, so the rest is cut as in the
whole text, but for the ASCII letters of the words taken out (``abc`` of ``abcé``). A
text with no such run (Chinese, English) is cut by jieba alone, as in version 2: its
fingerprint is version 2's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache
from importlib import resources
from itertools import filterfalse
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import regex

# ``regex`` (Unicode scripts, marks, grapheme clusters) costs ~40 ms to import: it is
# imported with the first text that the cheap check (:data:`_CANDIDATE`) lets through.

#: The file (in ``simhash_hbase/data``) of the ASCII stop words of Latin-script
#: languages other than English, dropped in texts that hold another script.
LATIN_STOPWORDS = "stopwords-latin.txt"

# Scripts that jieba cuts (Han) or that are cut here otherwise than as words.
_KANA_CHARS = r"\p{Hiragana}\p{Katakana}\u30fc"
_UNSPACED_CHARS = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
# A character of a word: letter, mark, digit or joiner (ZWNJ, ZWJ), of a spaced script.
_W = rf"[[\p{{L}}\p{{M}}\p{{N}}\u200c\u200d]--[\p{{Han}}{_KANA_CHARS}{_UNSPACED_CHARS}]]"
_GROUPS = 5  # what _Patterns.pieces.split() gives a piece: the text before it, 4 groups


class _Patterns(NamedTuple):
    #: Runs of letters, marks, digits and joiners, Han excepted (a simple class: the
    #: regex module's cost grows with alternatives and look-arounds, not with classes).
    run: regex.Pattern[str]
    #: A character of kana or an unspaced script (runs are then cut in pieces).
    unworded: regex.Pattern[str]
    #: The pieces of such a text: 1 a word, 2 katakana, 3 hiragana, 4 an unspaced script.
    pieces: regex.Pattern[str]
    grapheme: regex.Pattern[str]


@cache
def _patterns() -> _Patterns:
    import regex

    return _Patterns(
        regex.compile(r"([[\p{L}\p{M}\p{N}\u200c\u200d]--\p{Han}]+)", regex.V1),
        regex.compile(rf"[{_KANA_CHARS}{_UNSPACED_CHARS}]", regex.V1),
        regex.compile(
            rf"({_W}+)|([\p{{Katakana}}\u30fc]+)|(\p{{Hiragana}}+)|([{_UNSPACED_CHARS}]+)",
            regex.V1,
        ),
        regex.compile(r"\X"),
    )


#: The cheap check, in ``re`` (several times faster than ``regex`` on Chinese text): a
#: character outside ASCII, Han and the punctuation blocks that Chinese text uses (their
#: letters and marks left out: tests/test_scripts.py). A text without one has no run
#: outside ASCII, and is jieba's alone.
_CANDIDATE = re.compile(
    "[^\x00-\x7f\u2000-\u200b\u200e-\u206f\u2e80-\u2fdf\u3000-\u3005\u3007-\u3029\u3030"
    "\u3036-\u303b\u303d-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f"
    "\uff00-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\U00020000-\U0003ffff]"
).search

Cut = Callable[[str], Iterable[str]]


def other_script(text: str) -> bool:
    """Whether ``text`` may hold a script other than Han and ASCII (the cheap check: a
    text for which it is False is cut by jieba alone)."""
    return _CANDIDATE(text) is not None


def ngrams(units: list[str], n: int) -> list[str]:
    """Each ``n`` adjacent ``units`` joined (fewer units: all of them joined)."""
    if len(units) <= n:
        return ["".join(units)]
    return list(map("".join, zip(*(units[i:] for i in range(n)))))


def _piece_tokens(text: str) -> tuple[list[str], str]:
    """:func:`script_tokens` of a text holding kana or an unspaced script."""
    tokens: list[str] = []
    grapheme = _patterns().grapheme.findall
    parts = _patterns().pieces.split(text)
    rest = parts[0::_GROUPS]
    pieces = zip(*(parts[i::_GROUPS] for i in range(1, _GROUPS)))
    for i, (word, katakana, hiragana, unspaced) in enumerate(pieces, 1):
        if word:
            if word.isascii():  # an ASCII word beside kana: jieba's, in its place
                rest[i - 1] += word
                continue
            tokens.append(word.casefold())
        elif katakana or len(hiragana or "") > 1:
            tokens.append(katakana or hiragana)
        elif unspaced:
            tokens += ngrams(grapheme(unspaced), 3)
        rest[i - 1] += "\n"
    return tokens, "".join(rest)


def script_tokens(text: str) -> tuple[list[str], str]:
    """The tokens of the runs that jieba cannot cut (module docstring), and the text
    that is left for jieba, with a newline where each such run was (a block boundary:
    ASCII runs stay in place, so that jieba sees ``C++`` as it did)."""
    patterns = _patterns()
    if patterns.unworded.search(text) is not None:
        return _piece_tokens(text)
    parts = patterns.run.split(text)
    runs = parts[1::2]
    wide = [not run.isascii() for run in runs]
    parts[1::2] = ["\n" if w else run for run, w in zip(runs, wide)]
    return [run.casefold() for run, w in zip(runs, wide) if w], "".join(parts)


@cache
def _latin_stopwords() -> frozenset[str]:
    """The Latin stop words as jieba's tokens may spell them (``de``, ``De``, ``DE``):
    a set lookup a token, no Python call."""
    raw = resources.files("simhash_hbase").joinpath("data", LATIN_STOPWORDS).read_text("utf-8")
    words = raw.split()
    return frozenset([*words, *map(str.title, words), *map(str.upper, words)])


def script_cut(cut: Cut) -> Cut:
    """``cut`` (jieba's family) with the runs of other scripts segmented by script."""

    def by_script(text: str) -> Iterable[str]:
        if not other_script(text):
            return cut(text)
        tokens, rest = script_tokens(text)
        if rest == text:  # nothing taken out (a symbol the check let by): jieba's alone
            return cut(text)
        return [*filterfalse(_latin_stopwords().__contains__, cut(rest)), *tokens]

    return by_script
