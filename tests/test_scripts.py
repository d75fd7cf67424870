"""Fingerprint version 3: words in every script (issue 39.1).

Version 2 split every script but Han and ASCII into single letters, and the SimHash of
letter frequencies is nearly the same for any two texts of one alphabet. The sample in
tests/data/multilingual.json (real translated text: ``python -m benchmarks.multilingual
--fixture``) holds unrelated documents of 15 languages; version 3 must keep them apart
and still find their planted copies, and leave Chinese and English fingerprints as
version 2 made them.
"""

from __future__ import annotations

import json
import random
import statistics
import unicodedata
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase import Fingerprinter, FingerprintParams, SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.fingerprint import scripts
from simhash_hbase.fingerprint.scripts import script_tokens

SAMPLE: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "data" / "multilingual.json").read_text("utf-8")
)
V2 = FingerprintParams(version=2)
V3 = FingerprintParams(version=3)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Привет, МИР! Это тест", ["привет", "мир", "это", "тест"]),
        # Devanagari: vowel signs and the virama stay in their word
        ("नमस्ते दुनिया, परीक्षण", ["नमस्ते", "दुनिया", "परीक्षण"]),
        ("می‌شود سلام", ["می\u200cشود", "سلام"]),  # Persian: ZWNJ inside a word
        ("שלום עולם", ["שלום", "עולם"]),
        ("ΕΛΛΗΝΙΚΆ κείμενο", ["ελληνικά", "κείμενο"]),
        ("Türkçe café naïve İSTANBUL", ["türkçe", "café", "naïve", "i̇stanbul"]),
        ("tiếng Việt", ["tiếng", "việt"]),
        ("한국어 문장입니다", ["한국어", "문장입니다"]),
        # katakana words, hiragana runs; a lone hiragana (a particle) is no term
        ("ファイルを開くことができません", ["ファイル", "くことができません"]),
        ("ภาษาไทย", ["ภาษ", "าษา", "ษาไ", "าไท", "ไทย"]),  # grapheme trigrams
    ],
)
def test_words_by_script(text: str, tokens: list[str]) -> None:
    assert script_tokens(text)[0] == tokens


def test_ascii_and_han_stay_with_jieba_in_place() -> None:
    tokens, rest = script_tokens("Привет C++ мир, 中文测试 abc文件")
    assert tokens == ["привет", "мир"]
    assert rest == "\n C++ \n, 中文测试 abc文件"


_ALPHABETS = {
    "Cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЖЯ",
    "Greek": "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώΑΒΓΔΣΩ",
    "Arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي" + "\u064e\u064f\u0650\u0651\u0652",
    "Hebrew": "אבגדהוזחטיכלמנסעפצקרשת" + "\u05b0\u05b4\u05bc",
    "Devanagari": "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह" + "\u093e\u093f\u0940\u0941\u0947\u094d",
    "Latin": "abcdefghijklmnopqrstuvwxyzéèçüöäßşğıñãõâ",
}
_WORDS = st.sampled_from(sorted(_ALPHABETS)).flatmap(
    lambda script: st.text(st.sampled_from(_ALPHABETS[script]), min_size=1, max_size=12)
)
_GAPS = st.sampled_from([" ", ", ", ". ", "\n", " — ", " (", ") ", "; "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_WORDS, _GAPS), min_size=1, max_size=20))
def test_a_word_is_one_token_with_all_its_letters(pairs: list[tuple[str, str]]) -> None:
    """Words of alphabetic scripts come out whole: no letter or mark dropped, no word
    split into letters (a word that starts with a mark is still one token)."""
    words = [w for w, _ in pairs]
    text = "".join(w + gap for w, gap in pairs)
    wide = [w.casefold() for w in words if not w.isascii()]
    tokens, rest = script_tokens(text)
    assert tokens == wide
    assert all(len(t) > 1 for t, w in zip(tokens, wide) if len(w) > 1)
    assert "".join(tokens) == "".join(wide)  # every letter and mark kept
    assert rest == "".join((w if w.isascii() else "\n") + gap for w, gap in pairs)


def test_the_cheap_check_lets_no_word_through() -> None:
    """A text that the cheap check passes has no run outside ASCII: every character
    it lets through is ASCII, Han, or neither letter, mark, digit nor joiner."""
    passed = "".join(
        c
        for c in map(chr, range(0x110000))
        if unicodedata.category(c) != "Cs" and scripts._CANDIDATE(c) is None
    )
    runs = scripts._patterns().run.findall(passed)
    assert [run for run in runs if not run.isascii()] == []


_HAN_ASCII = st.text(
    st.one_of(
        st.sampled_from("今天天气很好我们去公园散步文件软件内存網路資訊的了是在"),
        st.sampled_from("abcXYZ019 +#&._%-\n，。！？、（）“”《》：；…—·×©°"),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_HAN_ASCII)
def test_chinese_and_english_keep_version_2s_fingerprints(text: str) -> None:
    v2, v3 = Fingerprinter(V2), Fingerprinter(V3)
    assert v3.weighted_terms(text) == v2.weighted_terms(text)


@pytest.mark.parametrize(
    "text",
    [
        *SAMPLE["zh_CN"],
        "The quick brown fox jumps over the lazy dog; die Hard, son of a gun, come on.",
        "gzip 压缩文件。gzip 解压文件时保留原文件；gzip 的选项 -k 保留输入文件，-d 解压缩。",
    ],
)
def test_real_chinese_and_english_keep_version_2s_fingerprints(text: str) -> None:
    assert Fingerprinter(V3).fingerprint(text) == Fingerprinter(V2).fingerprint(text)


def test_latin_stop_words_drop_only_beside_another_script() -> None:
    fp = Fingerprinter(V3)
    assert "de" in fp.features("le bureau de poste de la ville de Paris")  # all ASCII
    assert "de" not in fp.features("le bureau de poste de la ville de Paris, été")
    assert "die" in fp.features("die hard and the son of man")


_MIXED = st.text(
    st.one_of(
        st.sampled_from(sorted(set("".join(_ALPHABETS.values())))),
        st.sampled_from("ファイルをくことができませんภาษาไทยង្គ한국어中文文件 ,.\n-+#abcDE12"),
        st.characters(codec="utf-8"),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(_MIXED)
def test_the_c_path_gives_the_python_paths_terms(text: str) -> None:
    native = Fingerprinter(V3)
    if native._native is None:
        pytest.skip("the C extension is not built")
    plain = Fingerprinter(V3)
    plain._native = None  # the pure-Python path, the reference
    assert native.weighted_terms(text) == plain.weighted_terms(text)


@pytest.mark.parametrize("lang", sorted(SAMPLE))
def test_unrelated_documents_of_one_language_stay_apart(lang: str) -> None:
    """Version 2 failed this for every language of the sample but Chinese: mean
    distances of 5 to 15 bits, pairs within 3 bits in 8 of 15 languages."""
    fp = Fingerprinter()
    distances = [(a ^ b).bit_count() for a, b in combinations(map(fp.fingerprint, SAMPLE[lang]), 2)]
    assert min(distances) > 3
    assert statistics.mean(distances) >= 20  # random fingerprints: 32


def _planted(text: str, rnd: random.Random) -> str:
    """Three word edits: a word deleted, one doubled, one replaced by another (a
    word: a run between spaces of at most 20 characters; in Thai or Khmer a longer
    run is a phrase)."""
    for op in range(3):
        words = text.split(" ")
        at = rnd.choice([i for i, w in enumerate(words) if len(w) <= 20])
        words[at] = ("", f"{words[at]} {words[at]}", rnd.choice(words))[op]
        text = " ".join(words)
    return text


@pytest.mark.parametrize("lang", sorted(SAMPLE))
def test_planted_copies_are_found_and_nothing_else(lang: str, tmp_path: Path) -> None:
    docs = SAMPLE[lang]
    rnd = random.Random(lang)
    with SimhashIndex.open(str(tmp_path / "ix")) as ix:
        assert ix.params.version == 4
        for i, doc in enumerate(docs):
            ix.add(str(i), doc)
        for i, doc in enumerate(docs):
            assert [m.doc_id for m in ix.query(doc)] == [str(i)]
            assert str(i) in {m.doc_id for m in ix.query(_planted(doc, rnd))}


def test_an_index_keeps_its_version(tmp_path: Path) -> None:
    text = SAMPLE["ru"][0]
    with SimhashIndex.open(str(tmp_path / "v2"), params=V2) as ix:
        v2_fp = ix.add("a", text)
    with SimhashIndex.open(str(tmp_path / "v2"), create=False) as ix:
        assert ix.params.version == 2 and ix.fingerprint(text) == v2_fp
    assert Fingerprinter().fingerprint(text) != v2_fp
    entry = V3.to_manifest()
    assert entry["version"] == 3 and FingerprintParams.from_manifest(entry) == V3
    assert entry["stopwords_digest"] != V2.to_manifest()["stopwords_digest"]


def test_fingerprint_terms_lists_russian_words() -> None:
    text = "Президент подписал закон о защите персональных данных граждан России."
    result = CliRunner().invoke(app, ["fingerprint", "--terms", "--json", text])
    assert result.exit_code == 0, result.output
    terms = [t["term"] for t in json.loads(result.stdout)["terms"]]
    assert {"президент", "закон", "персональных", "россии"} <= set(terms)
    assert all(len(t) > 2 for t in terms)
