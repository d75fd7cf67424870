"""Word segmentation: jieba 0.42.1's tokens (HMM on), computed natively when possible.

The reference is ``jieba.Tokenizer().cut(text)``. With rjieba installed (a default dependency),
``rjieba`` (a binding of the Rust port jieba-rs, same dictionary and HMM) computes
the same tokens at native speed. jieba-rs groups two kinds of characters
differently from jieba, and :func:`_rjieba` corrects both:

- CJK characters outside jieba's U+4E00–U+9FD5 (extension A, compatibility
  ideographs, the supplementary planes) are single tokens in jieba and never enter
  its HMM; jieba-rs treats them as Chinese. Text is cut around them.
- Runs of ASCII letters, digits and ``+#&._%-`` are re-split the way jieba's HMM
  stage splits them (letters/digits with an optional decimal part and ``%``; what
  lies between stays one piece), except jieba's dictionary words among them.
- Periodic Chinese (``哈哈哈哈``, ``口孩快口孩快``): the HMM's Viterbi meets exact ties
  between paths, and the two implementations break them differently (issue 22.7:
  ~1.7 % of such contexts). A block of jieba's (a run of Chinese, letters and
  digits, cut independently of the rest) that holds a repeat of up to
  :data:`MAX_PERIOD` Chinese characters is cut by jieba itself (given the block's
  own words, as rjieba is, while texts get dictionaries of their own: below); the
  rest of the text stays on the fast path. tests/test_segment.py fuzzes this.

Both implementations belong to one *family* (:data:`FAMILY`), which is what the
index manifest records: an index built with one opens with the other. Identity
is measured on a 16 MB corpus in docs/segmenters.md and asserted by
tests/test_segment.py. ``$SHDB_SEGMENTER`` (``auto``, ``jieba``, ``rjieba``)
forces one; ``auto`` takes rjieba when it is installed next to jieba 0.42.1.

rjieba builds its whole dictionary when imported (~0.1 s): the first
:data:`~simhash_hbase.fingerprint.dictionary.BUDGET` characters a process cuts get a
dictionary of their own words instead (:mod:`simhash_hbase.fingerprint.dictionary`),
with the same tokens.

jieba's dictionary cache lives in the private per-user cache folder
(:func:`simhash_hbase.fingerprint.cache.private_dir`), not in the system temp
directory, where it is lost on reboot (~1 s to rebuild) and open to others.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from types import ModuleType

from simhash_hbase import _native as native
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.cache import private_dir
from simhash_hbase.fingerprint.dictionary import (
    Dictionaries,
    NativeCut,
    SortedWords,
    sorted_words,
)
from simhash_hbase.fingerprint.memo import Memo

Cut = Callable[[str], Iterable[str]]

FAMILY = "jieba"
#: The jieba release whose tokens rjieba reproduces (after the corrections above).
FAMILY_VERSION = "0.42.1"
SEGMENTERS = ("auto", "jieba", "rjieba")
ENV = "SHDB_SEGMENTER"

# Chinese to jieba-rs but not to jieba (whose range is U+4E00-U+9FD5).
_OUTSIDE_JIEBA = re.compile("[\u3400-\u4dbf\u9fd6-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_ASCII_TOKEN = re.compile(r"[a-zA-Z0-9+#&._%\-]+").fullmatch
_ASCII_RUN = re.compile(r"[a-zA-Z0-9+#&._%\-]{2,}").search
# jieba.finalseg's re_skip: how jieba splits the non-Chinese part of an HMM buffer.
_HMM_SKIP = re.compile(r"([a-zA-Z0-9]+(?:\.\d+)?%?)")
# What _HMM_SKIP.split leaves whole: one match of it, or no letter or digit at all.
_HMM_PIECE = re.compile(rf"{_HMM_SKIP.pattern}|[+#&._%\-]+").fullmatch
# The words of jieba's dictionary made only of the characters above: the DAG keeps them.
_ASCII_WORDS = frozenset(("AT&T", "c#", "C#", "c++", "C++"))
#: The longest period of a Chinese repeat that is sent to jieba (see the docstring).
MAX_PERIOD = 16
# A Chinese repeat (a "square" xx, x of 1..MAX_PERIOD characters of jieba's range).
_SQUARE = re.compile(f"([\u4e00-\u9fd5]{{1,{MAX_PERIOD}}})\\1").search
# jieba's re_han_default: the blocks that jieba cuts independently of each other.
_BLOCK_CHARS = r"[\u4e00-\u9fd5a-zA-Z0-9+#&\._%\-]"
_BLOCK_REST = re.compile(f"{_BLOCK_CHARS}*").match
_IN_BLOCK = re.compile(_BLOCK_CHARS).fullmatch


_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def _installed(module: str) -> str | None:
    """``module.__version__`` ("" if it has none), or None: read, not imported (jieba's
    import costs ~0.2 s, importlib.metadata's ~0.04 s of a query's start-up)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    try:
        found = _VERSION.search(Path(spec.origin).read_text("utf-8"))
    except (OSError, UnicodeDecodeError):
        return ""
    return found.group(1) if found else ""


def _run_kind(token: str) -> str:
    """The token's part in an ASCII run (see the module docstring): "0" none; "1" a
    piece that jieba's HMM stage would also give, on its own; "2" any other piece."""
    if not (token.isascii() and _ASCII_TOKEN(token)) or token in _ASCII_WORDS:
        return "0"
    return "1" if _HMM_PIECE(token) else "2"


_RUN_KINDS = Memo(_run_kind)
# The runs that the re-split changes: two pieces or more, or one that it splits.
_CHANGED_RUN = re.compile("[12]{2,}|2")


def _resplit_ascii(tokens: list[str]) -> list[str]:
    """Re-splits each run of ASCII pieces in ``tokens`` (in place) as jieba's HMM would.

    Each token's kind is one character of a string that a regular expression scans:
    no Python code runs for the tokens of the (many) runs that stay as they are.
    """
    kinds = "".join(map(_RUN_KINDS.__getitem__, tokens))
    for run in reversed(list(_CHANGED_RUN.finditer(kinds))):  # from the end: offsets hold
        start, end = run.span()
        tokens[start:end] = filter(None, _HMM_SKIP.split("".join(tokens[start:end])))
    return tokens


def _rjieba_span(cut: NativeCut, text: str) -> list[str]:
    tokens = cut(text, True)
    return tokens if _ASCII_RUN(text) is None else _resplit_ascii(tokens)


def _block_around_py(text: str, start: int, end: int) -> tuple[int, int]:
    """The jieba block holding ``text[start:end]`` (all block characters).

    Found from the repeat outwards, not by visiting every block of the text: a
    repeat is rare, blocks are many (one per clause).
    """
    while start and _IN_BLOCK(text[start - 1]):
        start -= 1
    rest = _BLOCK_REST(text, end)
    assert rest is not None, "a * pattern always matches"
    return start, rest.end()


def _hmm_meets_repeat(route: list[str]) -> bool:
    """Whether a repeat can meet a tie: ``route`` is a block's dictionary route
    (``rjieba.cut(block, False)``). jieba's HMM runs only on runs of two or more
    single characters of it (``jieba.Tokenizer.__cut_DAG``), where a repeat makes
    Viterbi ties; and the route itself ties where a repeating word sits next to a
    piece of its own characters (啊啊啊 + 啊 = 啊 + 啊啊啊: the same words, so the same
    probability; found by the ``segmenters`` fuzz target). Elsewhere a repeat that
    the route covers with words (今天天气, 谢谢你) is cut alike by both, and jieba
    (~1 s to load in a fresh process) is spared."""
    run: list[str] = []
    for i, piece in enumerate([*route, ""]):
        if len(piece) == 1:
            run.append(piece)
        else:
            if len(run) > 1 and _SQUARE("".join(run)) is not None:
                return True
            run = []
        if len(piece) > 1 and _SQUARE(piece) is not None:
            chars = set(piece)
            neighbours = route[max(i - 1, 0) : i] + route[i + 1 : i + 2]
            if any(set(n) <= chars for n in neighbours):
                return True
    return False


def _fast_py(native_cut: NativeCut, text: str) -> list[str]:
    """rjieba's tokens of ``text``, cut around CJK outside jieba's range and with ASCII
    runs re-split: the reference of ``_native.fast_cut`` (native.py)."""
    if _OUTSIDE_JIEBA.search(text) is None:
        return _rjieba_span(native_cut, text)
    out: list[str] = []
    last = 0
    for m in _OUTSIDE_JIEBA.finditer(text):
        out += _rjieba_span(native_cut, text[last : m.start()])
        out.append(m.group())
        last = m.end()
    out += _rjieba_span(native_cut, text[last:])
    return out


FastCut = Callable[[NativeCut, str], list[str]]


def _square_py(text: str, pos: int = 0) -> tuple[int, int] | None:
    """Where the first repeat (:data:`_SQUARE`) at or after ``pos`` starts and ends."""
    found = _SQUARE(text, pos)
    return None if found is None else found.span()


#: :func:`_square_py` and :func:`_block_around_py`, in C when the extension is built.
_COMPILED = native.module()
_find_square: Callable[..., tuple[int, int] | None] = (
    _square_py if _COMPILED is None else _COMPILED.find_square
)
_block_around: Callable[[str, int, int], tuple[int, int]] = (
    _block_around_py if _COMPILED is None else _COMPILED.block_around
)


def _fast_cut() -> FastCut:
    """The C ``fast_cut`` when the extension is built (native.py), else :func:`_fast_py`."""
    compiled = native.module()
    return _fast_py if compiled is None else compiled.fast_cut  # type: ignore[no-any-return]


def _rjieba_cut(native_cut: NativeCut, text: str, fast: FastCut = _fast_py) -> list[str]:
    """jieba's tokens of ``text`` from rjieba's ``native_cut`` (a dictionary holding at
    least the words of ``text``), corrected as the module docstring says; ``fast``
    cuts the text between the blocks that jieba cuts itself."""
    square = _find_square(text)
    if square is None:
        return fast(native_cut, text)
    out: list[str] = []
    last = 0
    while square is not None:  # from each repeat to the block that holds it
        start, end = _block_around(text, *square)
        if _hmm_meets_repeat(native_cut(text[start:end], False)):
            out += fast(native_cut, text[last:start])
            out += _jieba_block(text[start:end])
            last = end
        square = _find_square(text, end)
    out += fast(native_cut, text[last:])
    return out


#: The dictionaries rjieba cuts with: per text at first, then the whole one.
_dictionaries = Dictionaries()


def _jieba_block(block: str) -> list[str]:
    """jieba's own cut of one block (where its HMM meets a repeat). While texts get
    dictionaries of their own words, jieba gets one too (its prefix dictionary as far
    as the block sees it, and jieba's total), so a one-shot query does not load the
    whole one (~0.5 s, most of ``shdb query`` of such a text); then the whole one."""
    words = sorted_words() if _dictionaries.per_text else None
    if words is None:
        return list(segmenter("jieba")(block))
    return _jieba_with_own_words(words, block)


def _jieba_with_own_words(words: SortedWords, text: str) -> list[str]:
    """``jieba.Tokenizer().cut(text)``, the tokenizer given the text's part of its
    prefix dictionary and its total instead of loading them (same tokens, as for
    rjieba: :mod:`~simhash_hbase.fingerprint.dictionary`)."""
    tok = _import_jieba().Tokenizer()
    tok.FREQ, tok.total = words.prefix_dict_for(text), words.jieba_total
    tok.initialized = True  # its dictionary is given, not loaded
    return list(tok.cut(text))


def _import_jieba() -> ModuleType:
    """jieba, imported without ``pkg_resources`` where nothing has imported that yet:
    ``jieba._compat`` imports it (~0.09 s, most of jieba's import) only to open
    jieba's own files, and opens them by path without it."""
    if "jieba" in sys.modules or "pkg_resources" in sys.modules:
        import jieba
    else:
        sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # import fails
        try:
            import jieba
        finally:
            del sys.modules["pkg_resources"]
    return jieba


def _rjieba() -> Cut:
    fast = _fast_cut()

    def cut(text: str) -> list[str]:
        return _rjieba_cut(_dictionaries.cut_for(text), text, fast)

    return cut


def preload() -> None:
    """Load the whole dictionary now: before forking workers, which then share it."""
    if resolve() == "rjieba":
        _dictionaries.whole()


def _jieba() -> Cut:
    import logging

    jieba = _import_jieba()
    jieba.setLogLevel(logging.WARNING)  # it prints "Building prefix dict" otherwise
    tok = jieba.Tokenizer()
    # jieba writes its cache atomically (temp file + rename). Never in a shared
    # folder, where another user could plant one: without a private cache folder,
    # a private temporary one, removed at exit.
    where = private_dir()
    if where is None:
        where = Path(tempfile.mkdtemp(prefix="shdb-jieba-"))
        atexit.register(shutil.rmtree, where, True)
    tok.tmp_dir = str(where)
    tok.initialize()
    return tok.cut


def resolve(name: str | None = None) -> str:
    """The implementation ``name`` (default ``$SHDB_SEGMENTER``, else ``auto``) stands for."""
    name = name or os.environ.get(ENV) or "auto"
    if name not in SEGMENTERS:
        raise InvalidInput(f"unknown segmenter {name!r}; use one of: {', '.join(SEGMENTERS)}")
    if name != "auto":
        if name == "rjieba" and _installed("rjieba") is None:
            raise InvalidInput(
                "segmenter 'rjieba' is not installed: pip install 'rjieba>=0.2.2,<0.3'"
            )
        return name
    fast = _installed("rjieba") is not None and _installed("jieba") == FAMILY_VERSION
    return "rjieba" if fast else "jieba"


def family_version(name: str | None = None) -> str:
    """The jieba release whose tokens the segmenter gives (what the manifest records)."""
    if resolve(name) == "rjieba":
        return FAMILY_VERSION
    return _installed("jieba") or FAMILY_VERSION


@cache
def segmenter(name: str | None = None) -> Cut:
    """A function text -> tokens of jieba's family, loaded once per process."""
    return _rjieba() if resolve(name) == "rjieba" else _jieba()
