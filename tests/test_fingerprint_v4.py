"""Fingerprint version 4: no term sets the bits alone (issue 39.1's last floor).

Version 3 capped each weight at a fifth of a total that held the heavy term's own
uncapped weight, so a term far heavier than the rest kept most of the capped total:
unrelated documents sharing it (a Hebrew 'הרפובליקה', a Korean '수') landed within 3
bits. Version 4 caps to a fixed point (0.08 of the capped total) where a top term
holds another script than Han and ASCII; a text of Han and ASCII alone keeps version
3's fingerprint.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase import Fingerprinter, FingerprintParams, SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.fingerprint.weights import V4_WEIGHT_CAP, fixed_cap

SAMPLE: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "data" / "multilingual.json").read_text("utf-8")
)
V3 = FingerprintParams(version=3)
V4 = FingerprintParams(version=4)
#: Letters of a script, to make words of: words unknown to jieba's IDF table, so every
#: one weighs the median IDF and only counts tell them apart.
ALPHABETS = {
    "Cyrillic": "абвгдежзиклмнопрстуфхцчшщыэюя",
    "Greek": "αβγδεζηθικλμνξοπρστυφχψω",
    "Hebrew": "אבגדהוזחטיכלמנסעפצקרשת",
    "Arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "Hangul": "가나다라마바사아자차카타파하거너더러머버서어저처커터퍼허",
    "Devanagari": "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "Latin": "abcdeéfghiíjklmnoóprstuúüvyzçğış",
}


def _words(alphabet: str, rnd: random.Random, count: int) -> list[str]:
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rnd.choices(alphabet, k=rnd.randint(5, 9))))
    return sorted(words)


def _dominated(script: str, seed: int) -> tuple[str, str, str]:
    """Two unrelated documents of ``script`` that share one heavy term (20 times, as a
    program's name recurs in its messages), and a copy of the first."""
    rnd = random.Random(seed)
    alphabet = ALPHABETS[script]
    heavy, *rest = _words(alphabet, rnd, 31)
    if heavy.isascii():  # a Latin word of ASCII alone is jieba's, as in English text
        heavy += "ş"
    a, b = rest[:15], rest[15:]
    return (
        " ".join([heavy] * 20 + a),
        " ".join([heavy] * 20 + b),
        " ".join([*a, *[heavy] * 20]),
    )


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(ALPHABETS)), st.integers(0, 2**32 - 1))
def test_one_shared_heavy_term_does_not_make_unrelated_texts_near(script: str, seed: int) -> None:
    first, second, copy = _dominated(script, seed)
    v3, v4 = Fingerprinter(V3), Fingerprinter(V4)
    # version 3: the shared term decides every bit (the defect)
    assert (v3.fingerprint(first) ^ v3.fingerprint(second)).bit_count() <= 3
    assert (v4.fingerprint(first) ^ v4.fingerprint(second)).bit_count() > 3
    assert v4.fingerprint(copy) == v4.fingerprint(first)  # the rest agrees: the same


def _shares(terms: list[tuple[str, float]]) -> list[float]:
    total = math.fsum(w for _, w in terms)
    return [w / total for _, w in terms]


_WEIGHTS = st.lists(
    st.floats(min_value=0.01, max_value=1e6, allow_nan=False), min_size=1, max_size=40
)


@settings(max_examples=500)
@given(_WEIGHTS, st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.5]))
def test_the_fixed_point_cap(weights: list[float], share: float) -> None:
    terms = [(f"t{i}", w) for i, w in enumerate(weights)]
    capped = fixed_cap(terms, share)
    assert [t for t, _ in capped] == [t for t, _ in terms]  # order and terms kept
    limit = max(w for _, w in capped)
    for (_, before), (_, after) in zip(terms, capped):
        assert after == min(before, limit)  # only the heaviest change, to one level
    if len(terms) * share > 1:
        assert max(_shares(capped)) <= share * (1 + 1e-9)
        if limit < max(weights):  # capped: the capped terms hold the share exactly
            assert max(_shares(capped)) == pytest.approx(share, rel=1e-9)
    else:  # too few terms for the share: all weigh the same, the nearest to it
        assert len({w for _, w in capped}) == 1


def test_the_fixed_point_cap_leaves_light_weights_as_they_are() -> None:
    terms = [("a", 1.0), ("b", 1.0), ("c", 0.5)] + [(f"t{i}", 0.9) for i in range(20)]
    assert fixed_cap(terms, V4_WEIGHT_CAP) is terms
    assert fixed_cap([], V4_WEIGHT_CAP) == []


# Recurring words too: a dominant term, which version 4 would cap otherwise.
_HAN_ASCII = st.lists(
    st.one_of(
        st.sampled_from([*"今天天气很好我们去公园散步文件软件内存網路資訊的了是在"]),
        st.sampled_from([*"abcXYZ019 +#&._%-\n，。！？、（）“”《》：；…—·×©°"]),
        st.sampled_from(["gzip ", "gzip gzip gzip ", "文件文件文件文件"]),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    ),
    max_size=80,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(_HAN_ASCII)
def test_chinese_and_english_keep_version_3s_fingerprints(text: str) -> None:
    assert Fingerprinter(V4).weighted_terms(text) == Fingerprinter(V3).weighted_terms(text)


@pytest.mark.parametrize(
    "text",
    [
        *SAMPLE["zh_CN"],
        "gzip 压缩文件。gzip 解压文件时保留原文件；gzip 的选项 -k 保留输入文件，-d 解压缩。",
        "ls ls ls ls ls lists files; ls -l lists them long, ls -a lists hidden files too.",
    ],
)
def test_real_chinese_and_english_keep_version_3s_fingerprints(text: str) -> None:
    assert Fingerprinter(V4).fingerprint(text) == Fingerprinter(V3).fingerprint(text)


#: Pinned: a change here makes every v3 or v4 index incomparable with its documents.
PINNED = {
    "ru": (SAMPLE["ru"][0], 0xA32D9D90414D0DC6, 0xF36995B050F507CE),
    "he": (SAMPLE["he"][0], 0x1E1900F565AD5A4E, 0x1E156CDD64B97B46),
    "ko": (SAMPLE["ko"][0], 0xF96CCDEA0B311374, 0xF96CCDE21BB1F374),
    "th": (SAMPLE["th"][0], 0x2B56E465420DDD96, 0x2B56E4654205DDD6),
}


@pytest.mark.parametrize("lang", sorted(PINNED))
def test_pinned_v3_and_v4_fingerprints(lang: str) -> None:
    text, v3, v4 = PINNED[lang]
    assert Fingerprinter(V3).fingerprint(text) == v3
    assert Fingerprinter(V4).fingerprint(text) == v4


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(ALPHABETS)), st.integers(0, 2**32 - 1))
def test_the_c_path_gives_the_python_paths_weights(script: str, seed: int) -> None:
    native = Fingerprinter(V4)
    if native._native is None:
        pytest.skip("the C extension is not built")
    plain = Fingerprinter(V4)
    plain._native = None  # the pure-Python path, the reference
    for text in _dominated(script, seed):
        assert native.weighted_terms(text) == plain.weighted_terms(text)
        assert native.fingerprint_margins(text)[1].tobytes() == (
            plain.fingerprint_margins(text)[1].tobytes()
        )


def test_new_indexes_take_version_4_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    text = SAMPLE["he"][0]
    with SimhashIndex.open(str(tmp_path / "new")) as ix:
        assert ix.params.version == 4
        new_fp = ix.add("a", text)
    with SimhashIndex.open(str(tmp_path / "v3"), params=V3) as ix:
        v3_fp = ix.add("a", text)
    with SimhashIndex.open(str(tmp_path / "v3"), create=False) as ix:
        assert ix.params.version == 3 and ix.fingerprint(text) == v3_fp
    with SimhashIndex.open(str(tmp_path / "new"), create=False) as ix:
        assert ix.params.version == 4 and ix.fingerprint(text) == new_fp
    entry = V4.to_manifest()
    assert entry["version"] == 4 and FingerprintParams.from_manifest(entry) == V4
    assert entry["stopwords_digest"] == V3.to_manifest()["stopwords_digest"]  # same words


def test_the_cli_takes_version_4(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(SAMPLE["ko"][0], "utf-8")
    for version in ("3", "4"):
        index = str(tmp_path / f"v{version}")
        args = ["ingest", "-i", index, "--fingerprint-version", version, str(doc)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        with SimhashIndex.open(index, create=False) as ix:
            assert ix.params.version == int(version)
