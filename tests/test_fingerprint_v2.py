"""Fingerprint version 2 and what it keeps of version 1: v1 indexes open and answer
as before (tests/test_fingerprint.py pins v1 values); v2 is recorded in the manifest."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import Fingerprinter, FingerprintParams, InvalidSetting, SimhashIndex
from simhash_hbase.errors import ManifestMismatch
from simhash_hbase.fingerprint.simhash import _folder, normalise, v2_keeps
from simhash_hbase.fingerprint.weights import V2_WEIGHT_CAP

V1 = FingerprintParams(version=1)
#: Version 2 as first built (no folding, the "word" term rule): what its pins hold.
V2 = FingerprintParams(version=2, fold="none", terms="word")
# Pinned like v1's: a change here makes every v2 index incomparable. (Re-pinned when
# v2 gained its count power and weight cap, before any release carried v2.)
PINNED_V2 = {
    "今天天气很好，我们去公园散步吧。": 0x2EBE7CA84B738770,  # capped: three terms share it
    "版本 2.6.1 于 2024-11-22 发布，修复了 3 个问题（ｖ２）。": 0x95A74E345C11BE42,
    # recurring terms: count ** 1.75, and gzip (5 times) capped at a fifth
    "gzip 压缩文件。gzip 解压文件时保留原文件；gzip 的选项 -k 保留输入文件，-d 解压缩。": (
        0x9227F6E30E3CEA1C
    ),
}


@pytest.mark.parametrize(("text", "expected"), PINNED_V2.items())
def test_pinned_v2_fingerprints(text: str, expected: int) -> None:
    assert Fingerprinter(V2).fingerprint(text) == expected


@pytest.mark.parametrize(
    ("term", "kept"),
    [
        ("2024", False), ("1.2.3", False), ("08:30", False), ("2024-11-22", False),
        ("1,000", False), ("v", False), ("3", False), ("-", False),
        ("v2", True), ("3d", True), ("ls", True), ("mp3", True), ("文件", True), ("好", True),
    ],
)  # fmt: skip
def test_v2_drops_numbers_and_single_ascii_characters(term: str, kept: bool) -> None:
    assert v2_keeps(term) is kept


# 17 words unknown to jieba's table: all weigh its median IDF, so only counts differ
# (the top 16 keeps the larger words on ties: zeta is always in).
WORDS = (
    "alpha beta gamma delta epsilon zeta theta iota kappa lambda omicron sigma tau "
    "upsilon omega psi rho"
)


def test_v2_weighs_counts_to_the_power_1_75() -> None:
    text = "alpha " + WORDS
    v1, v2 = (
        dict(Fingerprinter(V1).weighted_terms(text)),
        dict(Fingerprinter(V2).weighted_terms(text)),
    )
    assert v1["alpha"] == 2 * v1["zeta"]
    assert v2["alpha"] == pytest.approx(2**1.75 * v2["zeta"], rel=1e-12)  # not capped here
    assert v2["alpha"] < V2_WEIGHT_CAP * sum(v2.values())


def test_v2_caps_a_dominant_term_at_a_fifth_of_the_total() -> None:
    text = "alpha " * 9 + WORDS  # alpha 10 times
    uncapped = 10**1.75 + 15  # alpha and the other 15 of the top 16, in median IDFs
    v2 = Fingerprinter(V2).weighted_terms(text)
    weights = dict(v2)
    assert v2[0][0] == "alpha"  # still first: the cap keeps the order
    assert weights["alpha"] == pytest.approx(V2_WEIGHT_CAP * uncapped * weights["zeta"])
    v1 = dict(Fingerprinter(V1).weighted_terms(text))
    assert v1["alpha"] == 10 * v1["zeta"]  # v1 neither raises nor caps


def test_v2_normalises_full_width_latin_and_digits() -> None:
    fp = Fingerprinter(V2)
    assert fp.features("ＦＵＬＬ 宽度 ｗｉｄｔｈ") == fp.features("FULL 宽度 width")
    assert set(fp.features("ＦＵＬＬ 宽度")) == {"full", "宽度"}
    assert set(Fingerprinter(V1).features("ＦＵＬＬ 宽度")) >= {"ｆ", "ｕ", "ｌ"}  # v1 as it was
    assert normalise("ﬁle ①") == "file 1"


def test_a_changed_number_no_longer_moves_bits() -> None:
    text = "版本 {} 修复了内存泄漏，改进了网络设置与软件包管理的性能。"
    v1, v2 = Fingerprinter(V1), Fingerprinter(V2)
    assert v2.fingerprint(text.format("2.6.1")) == v2.fingerprint(text.format("3.0.7"))
    assert v1.weighted_terms(text.format("2.6.1")) != v1.weighted_terms(text.format("3.0.7"))


def test_folding_makes_traditional_and_simplified_one_text() -> None:
    fold = Fingerprinter(FingerprintParams(version=2, fold="t2s"))
    trad, simp = (
        "這個檔案的網路設定與軟體，請參閱說明文件",
        "这个档案的网路设定与软体，请参阅说明文件",
    )
    assert fold.fingerprint(trad) == fold.fingerprint(simp)
    assert Fingerprinter(V2).fingerprint(trad) != Fingerprinter(V2).fingerprint(simp)
    assert fold.features(simp) == Fingerprinter(V2).features(simp)  # simplified stays


def test_the_manifest_records_the_version_and_v1_stays_as_it_was() -> None:
    v1 = V1.to_manifest()
    assert not {"version", "fold", "terms", "html"} & set(v1)  # as v1 indexes were built
    assert FingerprintParams.from_manifest(v1).version == 1
    v2 = V2.to_manifest()
    assert v2["version"] == 2 and v2["fold"] == "none" and "fold_converter" not in v2
    assert FingerprintParams.from_manifest(v2) == V2
    folded = FingerprintParams(version=2, fold="t2s").to_manifest()
    assert folded["fold_converter"].startswith("opencc ")


@pytest.mark.parametrize(
    ("settings", "name"),
    [({"version": 5}, "version"), ({"version": True}, "version"), ({"fold": "x"}, "fold"),
     ({"fold": "t2s", "version": 1}, "fold"), ({"terms": "letter", "version": 1}, "terms"),
     ({"terms": "x"}, "terms"), ({"html": "x"}, "html")],
)  # fmt: skip
def test_bad_version_or_fold_is_refused_by_name(settings: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        FingerprintParams(**settings)  # type: ignore[arg-type]
    assert err.value.setting == name


def test_indexes_keep_their_version(tmp_path: Path) -> None:
    text = "版本 2.6.1 于 2024-11-22 发布，修复了 3 个问题，改进了网络设置与软件包管理。"
    with SimhashIndex.open(str(tmp_path / "v1"), params=V1) as ix:
        ix.add("a", text)
        v1_fp = ix.get("a").fingerprint  # type: ignore[union-attr]
    with SimhashIndex.open(str(tmp_path / "v2"), params=V2) as ix:
        ix.add("a", text)
    with SimhashIndex.open(str(tmp_path / "v1"), create=False) as ix:
        assert ix.params.version == 1 and ix.fingerprint(text) == v1_fp
        assert [m.doc_id for m in ix.query(text, 0)] == ["a"]
    with SimhashIndex.open(str(tmp_path / "v2"), create=False) as ix:
        assert ix.params == V2 and ix.manifest["fingerprint"]["version"] == 2
        assert [m.distance for m in ix.query(text.replace("2.6.1", "2.7.0"), 0)] == [0]
    with pytest.raises(ManifestMismatch, match="version"):
        SimhashIndex.open(str(tmp_path / "v1"), create=False, params={"version": 2})


# -- the defaults of new indexes (issue 29.3) -------------------------------------
def test_new_indexes_default_to_v4_folded_by_phrase_with_letter_terms() -> None:
    params = FingerprintParams()
    assert (params.version, params.fold, params.terms, params.html) == (
        4,
        "tw2sp",
        "letter",
        "main",
    )
    assert FingerprintParams(version=1).fold == "none"  # v1 takes none of them
    assert (FingerprintParams(version=2).fold, FingerprintParams(version=2).terms) == (
        "tw2sp",
        "letter",
    )


@pytest.mark.parametrize(
    ("traditional", "simplified"),
    [
        ("這個軟體的檔案存在記憶體裡，用滑鼠點選。", "这个软件的文件存在内存里，用鼠标点击。"),
        ("網路資訊與程式設計", "网络信息与编程"),
    ],
)
def test_taiwan_phrases_fold_to_mainland_phrases(traditional: str, simplified: str) -> None:
    fp = Fingerprinter()
    assert fp.features(traditional) == fp.features(simplified)
    by_char = Fingerprinter(FingerprintParams(fold="t2s"))
    assert by_char.features(traditional) != by_char.features(simplified)  # 软体, 档案 ...


def test_simplified_text_is_never_rewritten_by_the_phrase_table() -> None:
    text = "请把文件保存到软件的目录，并打开内存设置。"
    assert Fingerprinter().features(text) == Fingerprinter(V2).features(text)
    assert "文件" in Fingerprinter().features(text)  # not tw2sp's 文档


def _fold_line_by_line(text: str) -> str:
    """The tw2sp folding as defined: each line that t2s changes goes through tw2sp."""
    import opencc

    t2s, tw2sp = opencc.OpenCC("t2s").convert, opencc.OpenCC("tw2sp").convert
    return "\n".join(tw2sp(line) if t2s(line) != line else line for line in text.split("\n"))


_FOLD_PIECES = st.one_of(
    st.sampled_from(
        [
            "軟體",
            "檔案",
            "記憶體",
            "滑鼠",
            "網路",
            "資訊",
            "程式設計",
            "這個",
            "與",
            "裡",
            "點選",
            "文件",
            "软件",
            "内存",
            "鼠标",
            "乾隆",
            "頭髮",
            "皇后",
            "後來",
            "\n",
            "\r\n",
            "\n\n",
            " ",
            "，",
            "。",
            "abc",
            "C++",
            "😀",
            "\u3000",
        ]
    ),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x3400, max_codepoint=0x4DBF),
    st.text(max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_FOLD_PIECES, max_size=60).map("".join))
def test_batched_folding_is_the_line_by_line_folding(text: str) -> None:
    """tw2sp folding converts all Traditional lines in one OpenCC call: the same text as
    converting them one by one (no OpenCC dictionary entry holds a newline)."""
    fold = _folder("tw2sp")
    assert fold is not None
    assert fold(text) == _fold_line_by_line(text)


_SYMBOLS = st.characters(
    categories=["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(_SYMBOLS, min_size=1, max_size=6),
            st.sampled_from(["^_^", "__", "___init___", "(╯°□°）╯", "😀😀", "c++", "C#", "＿＿"]),
            st.sampled_from(["文件", "软件", "abc", "数学", "公式", " ", "\n"]),
        ),
        max_size=20,
    ).map("".join)
)
def test_no_term_is_only_punctuation_or_symbols(text: str) -> None:
    for term in Fingerprinter().features(text):
        assert any(unicodedata.category(c)[0] in "LN" for c in term), term


def test_a_line_of_emoticons_shares_no_term_with_a_math_page() -> None:
    emoticons = "^_^ (^_^) o_O T_T >_< ^_^ ___ ^_^"
    assert not Fingerprinter().features(emoticons)
    assert "_" in Fingerprinter(V2).features(emoticons) or "___" in Fingerprinter(V2).features(
        emoticons
    )  # version 2 as first built kept "_": its indexes still do


def test_an_index_whose_converter_is_missing_refuses_to_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_hbase.fingerprint import simhash

    text = "這個軟體的檔案存在記憶體裡"
    with SimhashIndex.open(str(tmp_path / "ix")) as ix:
        ix.add("a", text)
        fp = ix.get("a").fingerprint  # type: ignore[union-attr]
    monkeypatch.setitem(sys.modules, "opencc", None)  # as if it were not installed
    simhash._opencc.cache_clear()
    try:
        with SimhashIndex.open(str(tmp_path / "ix"), create=False) as ix:
            assert [m.doc_id for m in ix.query_fingerprint(fp, 0)] == ["a"]  # no text: fine
            with pytest.raises(InvalidSetting, match="pip install opencc"):
                ix.query(text)
    finally:
        simhash._opencc.cache_clear()
