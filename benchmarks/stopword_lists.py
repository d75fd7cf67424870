"""Writes fingerprint version 3's stop words of other languages (run once; the files
are data of the package, recorded by digest in every version 3 manifest).

The source is stopwords-iso (MIT; the ``stopwordsiso`` package on PyPI, 0.7.1 here),
58 languages. Entries are NFKC-normalised and case-folded, as terms are; entries of
several words, without a letter, or holding Han (jieba's, with its own table) are left
out; English is the package's own list (``data/stopwords.txt``). Two files:

- ``stopwords-scripts.txt``: entries with a character outside ASCII (``и``, ``في``,
  ``için``, ``của``, kana pairs such as ``これ``). Such a term never occurs in a text
  of Han and ASCII alone, so those keep version 2's fingerprints.
- ``stopwords-latin.txt``: the ASCII entries of the other Latin-script languages (``de``,
  ``la``, ``und``), of two characters or more: dropped only in texts that hold another
  script (:mod:`simhash_hbase.fingerprint.scripts`), so that English keeps its terms.

    pip install stopwordsiso==0.7.1 && python -m benchmarks.stopword_lists
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import regex

DATA = Path(__file__).resolve().parent.parent / "simhash_hbase" / "data"
_LETTER = regex.compile(r"\p{L}").search
_HAN = regex.compile(r"\p{Han}").search


def lists() -> tuple[set[str], set[str]]:
    """(entries outside ASCII, ASCII entries of languages other than English)."""
    import stopwordsiso  # type: ignore[import-not-found]

    wide: set[str] = set()
    ascii_: set[str] = set()
    for lang in stopwordsiso.langs():
        if lang in ("en", "zh"):
            continue
        for entry in stopwordsiso.stopwords(lang):
            word = unicodedata.normalize("NFKC", entry).casefold().strip()
            if not word or " " in word or not _LETTER(word) or _HAN(word):
                continue
            if not word.isascii():
                wide.add(word)
            elif len(word) > 1:
                ascii_.add(word)
    return wide, ascii_


def main() -> None:
    wide, ascii_ = lists()
    for name, words in (("stopwords-scripts.txt", wide), ("stopwords-latin.txt", ascii_)):
        (DATA / name).write_text("".join(f"{w}\n" for w in sorted(words)), encoding="utf-8")
        print(f"{name}: {len(words)} words")


if __name__ == "__main__":
    main()
