"""The segmenters: rjieba (the ``fast`` extra) gives jieba's tokens and fingerprints.

The identity tests need rjieba. CI installs the ``fast`` extra (scripts/test), so
there a missing rjieba is a failure; elsewhere those tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import EmptyDocument, Fingerprinter
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint import dictionary, segment
from simhash_hbase.fingerprint.cache import cache_dir

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SHDB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SEEDS = sorted((SHARED / "seeds").glob("*.txt"))


def _require_rjieba() -> None:
    if segment._installed("rjieba") is None:
        if os.environ.get("CI"):
            pytest.fail("rjieba is not installed: CI installs the fast extra (scripts/test)")
        pytest.skip("rjieba (the fast extra) is not installed")


@pytest.fixture(scope="module")
def cuts() -> tuple[Callable[[str], list[str]], Callable[[str], list[str]]]:
    _require_rjieba()
    jieba_cut, rjieba_cut = segment.segmenter("jieba"), segment.segmenter("rjieba")
    return (lambda t: list(jieba_cut(t))), (lambda t: list(rjieba_cut(t)))


def _fingerprinter(name: str) -> Fingerprinter:
    fp = Fingerprinter()
    fp._cut = segment.segmenter(name)
    return fp


def _fingerprint(fp: Fingerprinter, text: str) -> int | None:
    try:
        return fp.fingerprint(text)
    except EmptyDocument:
        return None


@pytest.fixture(scope="module")
def fingerprinters() -> tuple[Fingerprinter, Fingerprinter]:
    _require_rjieba()
    return _fingerprinter("jieba"), _fingerprinter("rjieba")


def _dictionary_words() -> list[str]:
    """Every 50th word of jieba's dictionary, and all 71 with ASCII in them (C++, T恤)."""
    import jieba

    with jieba.get_dict_file() as f:
        words = [line.split()[0].decode("utf-8") for line in f]
    return words[::50] + [w for w in words if any(c.isascii() for c in w)]


_PIECES = st.one_of(
    st.sampled_from(_dictionary_words()),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5),  # jieba's Chinese range
    st.sampled_from(  # what jieba and jieba-rs group differently, and their neighbours
        [*"abcXYZ019+#&._%- \t\n，。ａ１\u3000㐀䶵鿖鿿豈𠀀𪚥\U00030000😀の한é\u200b", "\r\n"]
    ),
    st.text(max_size=3),  # anything at all
)
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)
#: Common characters: runs of them stay out of the dictionary and reach the HMM.
_COMMON = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会"
    "啊哈呵嘿嗯哦呀"  # interjections: dictionary words that repeat (啊啊啊)
)
#: Issue 22.7: repeated characters and periodic runs ("哈哈哈哈", "口孩快口孩快"), where
#: the HMM's Viterbi meets exact ties, next to mixed scripts and emoji.
_REPEATS = st.builds(
    lambda unit, times: unit * times,
    st.text(
        st.one_of(
            st.sampled_from(_COMMON),
            st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5),
        ),
        min_size=1,
        max_size=segment.MAX_PERIOD + 2,
    ),
    st.integers(2, 12),
)
_REPEAT_TEXTS = st.lists(st.one_of(_REPEATS, _PIECES), min_size=1, max_size=12).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXTS)
def test_same_tokens_as_jieba_on_random_text(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]], text: str
) -> None:
    jieba_cut, rjieba_cut = cuts
    assert rjieba_cut(text) == jieba_cut(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REPEAT_TEXTS)
def test_same_tokens_as_jieba_on_repeated_and_periodic_characters(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]], text: str
) -> None:
    jieba_cut, rjieba_cut = cuts
    assert rjieba_cut(text) == jieba_cut(text)


@pytest.mark.parametrize(
    "text",
    [
        "大大大大大大大大大大商商商商商商商商商商商通通通通通打酒b最江江江江江江江江江江",
        "口孩快口孩快口孩快口孩快口孩快",
        "太包太包太包太包太包太包太包太包",
        "哈哈哈哈哈哈😀😀嗯嗯嗯 abc 西西西西西西西西西西张至至至至至",
        "啊啊啊啊++++?++++啊",  # the route ties (啊啊啊+啊 = 啊+啊啊啊): the fuzzer's find
    ],
)
def test_the_reported_disagreements(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]], text: str
) -> None:
    jieba_cut, rjieba_cut = cuts
    assert rjieba_cut(text) == jieba_cut(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TEXTS, _REPEAT_TEXTS))
def test_same_fingerprint_as_jieba_on_random_text(
    fingerprinters: tuple[Fingerprinter, Fingerprinter], text: str
) -> None:
    with_jieba, with_rjieba = fingerprinters
    assert _fingerprint(with_rjieba, text) == _fingerprint(with_jieba, text)


def _real_texts() -> Iterable[str]:
    for path in SEEDS:
        text = path.read_text("utf-8")
        yield text
        yield text.replace("\n", "\r\n")
        # full-width ASCII and ideographic spaces
        yield text.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}).replace(" ", "\u3000")
        yield from (line for line in text.splitlines() if line.strip())  # short texts
    yield "C++和C#以及node.js，版本3.14.15发布，增长12.5%。AT&T的T恤、AA制与B超"
    yield "第3.5版 v2.0.1-rc1 100% 2003-04-29 --help daily-totals a_b-c+d#e&f%g.h"
    yield "㐀㐁中文𠀀𠀁𪚥字𠮷野家鿖鿫豈更，繁體中文與简体中文混排，emoji 😀 表情"


@pytest.mark.skipif(not SEEDS, reason="../shared/seeds not present")
def test_same_tokens_and_fingerprints_on_real_text(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]],
    fingerprinters: tuple[Fingerprinter, Fingerprinter],
) -> None:
    jieba_cut, rjieba_cut = cuts
    with_jieba, with_rjieba = fingerprinters
    texts = list(_real_texts())
    assert len(texts) > 20
    for text in texts:
        assert rjieba_cut(text) == jieba_cut(text), text[:80]
        assert _fingerprint(with_rjieba, text) == _fingerprint(with_jieba, text), text[:80]


def test_the_manifest_names_the_family_not_the_implementation() -> None:
    _require_rjieba()
    assert segment.family_version("jieba") == segment.family_version("rjieba")


def test_an_index_built_with_jieba_opens_with_rjieba(tmp_path: Path) -> None:
    """Built in one process with jieba, queried in another with rjieba: no mismatch."""
    _require_rjieba()
    index = str(tmp_path / "idx")
    doc = tmp_path / "doc.txt"
    doc.write_text(SEEDS[0].read_text("utf-8") if SEEDS else "今天天气很好，去公园散步吧。" * 9)

    def shdb(segmenter: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "simhash_hbase", *args, "--index", index],
            capture_output=True,
            text=True,
            env={**os.environ, segment.ENV: segmenter},
        )

    built = shdb("jieba", "ingest", str(doc))
    assert built.returncode == 0, built.stderr
    found = shdb("rjieba", "query", "--file", str(doc))
    assert found.returncode == 0, found.stderr  # 0: the document itself was found
    assert "doc.txt" in found.stdout


def test_unknown_segmenter_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="unknown segmenter 'nope'"):
        segment.resolve("nope")


def test_auto_falls_back_to_jieba_without_rjieba(monkeypatch: pytest.MonkeyPatch) -> None:
    real = segment._installed
    monkeypatch.setattr(segment, "_installed", lambda d: None if d == "rjieba" else real(d))
    monkeypatch.delenv(segment.ENV, raising=False)
    assert segment.resolve() == "jieba"
    with pytest.raises(InvalidInput, match=r"pip install 'rjieba"):  # a default dependency now
        segment.resolve("rjieba")


def test_auto_uses_rjieba_only_next_to_the_jieba_it_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = segment._installed
    monkeypatch.delenv(segment.ENV, raising=False)
    assert segment.resolve() == ("rjieba" if real("jieba") == segment.FAMILY_VERSION else "jieba")
    monkeypatch.setattr(segment, "_installed", lambda d: "0.43.0" if d == "jieba" else real(d))
    assert segment.resolve() == "jieba"
    monkeypatch.setenv(segment.ENV, "jieba")
    assert segment.resolve() == "jieba"


def test_jieba_dictionary_cache_is_persistent_per_user(tmp_path: Path) -> None:
    """jieba's ~1 s dictionary build is cached under $SHDB_CACHE_DIR (default ~/.cache/shdb)."""
    env = {**os.environ, segment.ENV: "jieba", "SHDB_CACHE_DIR": str(tmp_path / "cache")}
    code = "from simhash_hbase import Fingerprinter; Fingerprinter().fingerprint('结巴分词')"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    assert (tmp_path / "cache" / "jieba.cache").stat().st_size > 1_000_000


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHDB_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "shdb"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "shdb"


@pytest.fixture(scope="module")
def sorted_words() -> dictionary.SortedWords:
    _require_rjieba()
    words = dictionary.sorted_words()
    if words is None:
        pytest.skip("no private cache folder for the sorted dictionary")
    return words


def _whole_and_per_text(words: dictionary.SortedWords, text: str) -> tuple[list[str], list[str]]:
    import rjieba

    per_text = segment._rjieba_cut(words.jieba_for(text).cut, text)
    return segment._rjieba_cut(rjieba.cut, text), per_text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TEXTS, _REPEAT_TEXTS))
def test_a_per_text_dictionary_cuts_as_the_whole_one(
    sorted_words: dictionary.SortedWords, text: str
) -> None:
    """Only the words inside a text and the total decide its tokens (dictionary.py)."""
    whole, per_text = _whole_and_per_text(sorted_words, text)
    assert per_text == whole


@pytest.mark.skipif(not SEEDS, reason="../shared/seeds not present")
def test_a_per_text_dictionary_cuts_real_text_as_the_whole_one(
    sorted_words: dictionary.SortedWords,
) -> None:
    for text in _real_texts():
        whole, per_text = _whole_and_per_text(sorted_words, text)
        assert per_text == whole, text[:80]


def test_the_sorted_dictionary_finds_every_word_of_a_text(
    sorted_words: dictionary.SortedWords,
) -> None:
    """Found are the dictionary words inside the text, with dict.txt's frequencies,
    and nothing else (not a prefix, not a word that merely starts alike)."""
    import jieba

    with jieba.get_dict_file() as f:
        freqs = {w.decode(): int(n) for w, n, *_ in (line.split() for line in f)}
    text = "今天天气很好，我们去公园散步吧。C++和AT&T的T恤，B超"
    subs = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
    assert sorted_words.words_in(text) == {w: freqs[w] for w in subs if w in freqs}
    assert sorted_words.total == sum(freqs.values())
    with jieba.get_dict_file() as f:  # jieba's own total counts a word listed twice twice
        assert sorted_words.jieba_total == sum(int(line.split()[1]) for line in f)
    assert sorted_words.jieba_total != sorted_words.total  # dict.txt lists one word twice


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TEXTS, _REPEAT_TEXTS))
def test_jieba_given_a_texts_own_words_cuts_as_with_its_whole_dictionary(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]],
    sorted_words: dictionary.SortedWords,
    text: str,
) -> None:
    """The blocks where jieba's HMM meets a repeat are cut by jieba itself; a one-shot
    query gives it the text's part of its prefix dictionary instead of loading it."""
    jieba_cut, _ = cuts
    assert segment._jieba_with_own_words(sorted_words, text) == jieba_cut(text)


def test_a_one_shot_cut_of_a_repeat_does_not_load_jiebas_whole_dictionary(
    cuts: tuple[Callable[[str], list[str]], Callable[[str], list[str]]],
    sorted_words: dictionary.SortedWords,
) -> None:
    """The README's example query (a repeat that jieba itself must cut) took 0.8 s,
    0.5 s of it loading jieba's dictionary; pkg_resources (jieba's import) 0.09 s."""
    text = "口孩快口孩快口孩快口孩快，" + (ROOT / "examples" / "repost.txt").read_text("utf-8")
    code = (
        "import json, sys\n"
        "from simhash_hbase.fingerprint import segment\n"
        "segment._jieba = lambda: sys.exit('the whole dictionary was loaded')\n"
        "tokens = list(segment.segmenter('rjieba')(sys.stdin.read()))\n"
        "print(json.dumps([tokens, 'jieba' in sys.modules, 'pkg_resources' in sys.modules]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True
    )
    tokens, jieba_imported, pkg_resources_imported = json.loads(run.stdout)
    assert tokens == cuts[0](text)
    assert jieba_imported and not pkg_resources_imported  # jieba cut a block, by its own words


def test_dictionaries_switch_to_the_whole_one_past_the_budget() -> None:
    _require_rjieba()
    dictionaries = dictionary.Dictionaries(budget=10)
    first = dictionaries.cut_for("今天天气很好")
    assert first("今天天气很好", True) == ["今天天气", "很", "好"]
    whole = dictionaries.cut_for("我们去公园散步吧")  # 6 + 8 characters: past the budget
    assert whole is dictionaries.whole() and whole is not first
    assert dictionaries.cut_for("好") is whole  # and it stays
