"""jieba's dictionary for a few texts: only their own words, found in a sorted file.

rjieba builds its whole dictionary (349,046 words, a double-array trie) when it is
imported: ~0.1 s of CPU, a third of a one-shot ``shdb query``. The tokens of a
text depend on the dictionary only through the words found inside the text and the
total of all frequencies: a word weighs ``ln(freq) - ln(total)`` in the route
(jieba-rs ``Jieba::calc``; jieba's ``calc`` alike), the HMM asks only whether a run of
the text is a word. So an empty ``rjieba.Jieba`` given the text's words, plus one
word that cannot occur in the text (a character it lacks) carrying the rest of the
total, cuts the text exactly as the whole dictionary does (tests/test_segment.py).

The text's words are looked up in jieba's ``dict.txt`` (the dictionary jieba-rs
embeds), kept in the per-user cache as sorted fixed-width records and memory-mapped:
a few bisections per character. Past :data:`BUDGET` characters a process loads the
whole dictionary, which is then cheaper per text.
"""

from __future__ import annotations

import importlib.util
import mmap
import sys
from bisect import bisect_left
from collections.abc import Callable
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

from simhash_hbase.fingerprint.cache import (
    checked_files,
    private_dir,
    read_entry,
    save_file,
    write_entry,
)

NativeCut = Callable[[str, bool], list[str]]

#: Characters cut with per-text dictionaries before a process loads the whole one
#: (~0.1 s, about what looking up the words of 4,000 characters costs).
BUDGET = 4000
#: Fillers are taken from the Private Use Area: more characters than BUDGET.
_FILLERS = range(0xE000, 0xF900)
_LONGEST = 16  # characters of the longest word of jieba 0.42.1's dict.txt
_KEY = 4 * _LONGEST  # UTF-32-BE, NUL-padded: byte order is code-point order
_RECORD = _KEY + 8  # then the frequency, 8 bytes big-endian


def native() -> ModuleType:
    """rjieba's extension module, loaded without ``rjieba/__init__.py``, which builds
    the whole dictionary at import. Registered under its own name, so that a later
    ``import rjieba`` uses this module (a native module initialises once)."""
    loaded = sys.modules.get("rjieba.rjieba")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("rjieba")
    if spec is not None and spec.submodule_search_locations:
        for suffix in EXTENSION_SUFFIXES:
            path = Path(spec.submodule_search_locations[0]) / f"rjieba{suffix}"
            if path.is_file():
                loader = ExtensionFileLoader("rjieba.rjieba", str(path))
                found = importlib.util.spec_from_file_location("rjieba.rjieba", path, loader=loader)
                assert found is not None, "a file location always makes a spec"
                module = importlib.util.module_from_spec(found)
                loader.exec_module(module)
                sys.modules["rjieba.rjieba"] = module
                return module
    import rjieba  # another layout: through the package (and its whole dictionary)

    return rjieba


class _Keys:
    """The records' keys as a sequence, for :func:`bisect.bisect_left`."""

    def __init__(self, data: mmap.mmap | bytes) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data) // _RECORD

    def __getitem__(self, i: int) -> bytes:
        at = i * _RECORD
        return self._data[at : at + _KEY]


class SortedWords:
    """jieba's dictionary as sorted records: :meth:`words_in` a text, and the totals
    of its frequencies: jieba-rs's (``total``: each word once) and jieba's own
    (``jieba_total``: each line of ``dict.txt``, a word listed twice counted twice)."""

    def __init__(self, data: mmap.mmap | bytes, total: int, jieba_total: int) -> None:
        self._data = data
        self._keys = _Keys(data)
        self._count = len(self._keys)
        self.total = total
        self.jieba_total = jieba_total

    def words_in(self, text: str) -> dict[str, int]:
        """Every dictionary word that occurs in ``text``, with its frequency."""
        found: dict[str, int] = {}
        keys, data, count = self._keys, self._data, self._count
        n = len(text)
        for i in range(n):
            for j in range(i + 1, min(i + _LONGEST, n) + 1):
                key = text[i:j].encode("utf-32-be", "surrogatepass")
                at = bisect_left(keys, key, 0, count)  # the first record with this prefix
                if at == count:
                    break
                record = keys[at]
                if not record.startswith(key):
                    break  # no word starts with text[i:j], nor with any longer run
                if not any(record[len(key) :]):
                    start = at * _RECORD + _KEY
                    found[text[i:j]] = int.from_bytes(data[start : start + 8], "big")
        return found

    def jieba_for(self, text: str) -> Any:
        """An ``rjieba.Jieba`` that cuts ``text`` (and its parts) as the whole dictionary
        does: the text's words, and a filler word holding the rest of the total."""
        words = self.words_in(text)
        jieba = native().Jieba.empty()
        for word, freq in words.items():
            jieba.add_word(word, freq, None)
        filler = next(chr(c) for c in _FILLERS if chr(c) not in text)
        jieba.add_word(filler, self.total - sum(words.values()), None)
        return jieba

    def prefix_dict_for(self, text: str) -> dict[str, int]:
        """jieba's prefix dictionary (``Tokenizer.FREQ``) as far as ``text`` can see it:
        the text's words, and each prefix of them that is not a word at 0. jieba's DAG
        walks a run of the text only while it is in ``FREQ``, so a prefix of no word
        of the text stops it where the whole dictionary's would find no word either."""
        words = self.words_in(text)
        freq = dict.fromkeys((w[:i] for w in words for i in range(1, len(w))), 0)
        freq.update(words)
        return freq


def _dict_path() -> Path | None:
    spec = importlib.util.find_spec("jieba")  # its location, without importing it (~0.2 s)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "dict.txt"


def _records(raw: bytes) -> tuple[bytes, int, int] | None:
    """``dict.txt`` ('word freq [tag]' lines) as sorted records, and the two totals of
    its frequencies (:class:`SortedWords`): each word counted once with its last
    frequency (jieba-rs ``load_dict``), and each line (jieba ``gen_pfdict``); None if
    a word is longer than the records hold."""
    freqs: dict[str, int] = {}
    lines_total = 0
    for line in raw.decode("utf-8").splitlines():
        parts = line.split()
        if parts:
            freqs[parts[0]] = int(parts[1])
            lines_total += int(parts[1])
    if max(map(len, freqs)) > _LONGEST:
        return None
    keys = sorted(w.encode("utf-32-be").ljust(_KEY, b"\0") for w in freqs)
    body = b"".join(k + freqs[k.decode("utf-32-be").rstrip("\0")].to_bytes(8, "big") for k in keys)
    return body, sum(freqs.values()), lines_total


@cache
def sorted_words() -> SortedWords | None:
    """jieba's dictionary from the per-user cache (built once per ``dict.txt``); None
    without a private cache folder or a usable ``dict.txt`` (the whole one is used)."""
    source, folder = _dict_path(), private_dir()
    if source is None or folder is None or not source.is_file():
        return None
    st = source.stat()
    name = f"dict-{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}"
    path = folder / f"{name}.records"
    try:
        totals = read_entry(f"{name}.totals")  # "<total> <jieba_total>", or "-"
        if totals is None or (totals != b"-" and not checked_files(name, (path,))):
            built = _records(source.read_bytes())
            totals = b"-" if built is None else b"%d %d" % built[1:]
            if built is not None:
                write_entry(f"{name}.sha256", save_file(path, built[0]))
            write_entry(f"{name}.totals", totals)
        if totals == b"-":
            return None  # a word too long for the records: the whole dictionary it is
        total, jieba_total = map(int, totals.split())
        with path.open("rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    return SortedWords(data, total, jieba_total)


class Dictionaries:
    """Which ``rjieba`` cut a text gets: a per-text dictionary for the first
    :data:`BUDGET` characters of a process, then the whole dictionary."""

    def __init__(self, budget: int = BUDGET) -> None:
        self._left = budget
        self._whole: NativeCut | None = None

    @property
    def per_text(self) -> bool:
        """Whether texts are still cut with dictionaries of their own words."""
        return self._whole is None

    def cut_for(self, text: str) -> NativeCut:
        if self._whole is None and len(text) <= self._left:
            words = sorted_words()
            if words is not None:
                self._left -= len(text)
                cut: NativeCut = words.jieba_for(text).cut
                return cut
        return self.whole()

    def whole(self) -> NativeCut:
        """The whole dictionary's cut (loaded now: before forking workers that share it)."""
        if self._whole is None:
            native()  # rjieba's package then finds its native module already loaded
            import rjieba

            self._whole = rjieba.cut
            self._left = 0
        return self._whole
