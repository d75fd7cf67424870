"""The fingerprint: pinned values, determinism, edge cases, parallel == serial."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simhash_hbase import EmptyDocument, Fingerprinter, FingerprintParams, hamming
from simhash_hbase.errors import InvalidInput

SEEDS = sorted((Path(__file__).resolve().parents[2] / "shared" / "seeds").glob("*.txt"))

# Pinned: a change here means every stored index becomes incomparable. If the
# change is deliberate, it needs a new manifest parameter, not new pins.
V1 = FingerprintParams(version=1)  # the pins are version 1's: its indexes answer as ever
PINNED = {
    "今天天气很好，我们去公园散步吧。": 0x2EBE79A84B73A770,
    "SimHash 是 Google 提出的海量文本去重算法，适合长文本。": 0x57219B2419180550,
    "The quick brown fox jumps over the lazy dog.": 0x18BF869DF12AF7DC,
    (
        "结巴分词支持加载IDF词典并且提供了一个默认的词典，"
        "它包含了大量的词组以及基于海量文本统计出来的IDF词频。"
    ): 0x7452FD7D48194D56,
}


@pytest.fixture(scope="module")
def fp() -> Fingerprinter:
    return Fingerprinter(V1)


@pytest.mark.parametrize(("text", "expected"), PINNED.items())
def test_pinned_fingerprints(fp: Fingerprinter, text: str, expected: int) -> None:
    assert fp.fingerprint(text) == expected


def test_same_in_a_fresh_process(fp: Fingerprinter) -> None:
    code = (
        "from simhash_hbase import Fingerprinter, FingerprintParams; "
        "f = Fingerprinter(FingerprintParams(version=1)); "
        "import sys; [print(f.fingerprint(t)) for t in sys.stdin.read().split('\\x1e')]"
    )
    texts = list(PINNED)
    out = subprocess.run(
        [sys.executable, "-c", code],
        input="\x1e".join(texts),
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "random", "PATH": ""},
    ).stdout.split()
    assert [int(x) for x in out] == [fp.fingerprint(t) for t in texts]


@pytest.mark.parametrize(
    "text", ["", "   \n\t", "，。！？……", "的 了 是 the and of", "\u3000\u3000"]
)
def test_no_usable_terms_is_an_error_not_zero(fp: Fingerprinter, text: str) -> None:
    with pytest.raises(EmptyDocument, match="no usable terms"):
        fp.fingerprint(text)


def test_mixed_chinese_and_english_uses_both(fp: Fingerprinter) -> None:
    terms = dict(fp.weighted_terms("Python 编程语言 supports 多种 paradigms，Python 很流行"))
    assert "python" in terms and "编程语言" in terms and "paradigms" in terms
    assert terms["python"] > terms["paradigms"]  # counted twice


def test_case_and_punctuation_do_not_matter(fp: Fingerprinter) -> None:
    a = "SimHash 算法 用于 海量 文本 去重 Google"
    assert fp.fingerprint(a) == fp.fingerprint(a.lower().replace(" ", "，"))


def test_small_edit_moves_few_bits(fp: Fingerprinter) -> None:
    if not SEEDS:
        pytest.skip("../shared/seeds not present")
    text = SEEDS[1].read_text(encoding="utf-8")
    edited = text.replace("。", "！", 3) + "\n本文转载自网络，如有侵权请联系删除。"
    assert hamming(fp.fingerprint(text), fp.fingerprint(edited)) <= 3


def test_top_n_changes_the_fingerprint_and_is_validated() -> None:
    text = "".join(PINNED)
    assert Fingerprinter(FingerprintParams(top_n=3)).fingerprint(text) != Fingerprinter(
        V1
    ).fingerprint(text)
    assert len(Fingerprinter(FingerprintParams(top_n=3)).weighted_terms(text)) == 3
    with pytest.raises(InvalidInput, match="top_n must be an integer in 1"):
        Fingerprinter(FingerprintParams(top_n=0))


def test_workers_give_the_same_result_in_order(fp: Fingerprinter) -> None:
    texts = [f"{t} 第{i}号" for i in range(40) for t in PINNED] + ["  "]
    chunks = [texts[i : i + 7] for i in range(0, len(texts), 7)]
    serial = [x for chunk in fp.map(chunks, workers=1) for x in chunk]
    parallel = [x for chunk in fp.map(chunks, workers=2) for x in chunk]
    assert [x if isinstance(x, int) else "empty" for x in parallel] == [
        x if isinstance(x, int) else "empty" for x in serial
    ]
    assert isinstance(parallel[-1], EmptyDocument)


def test_manifest_names_every_parameter(fp: Fingerprinter) -> None:
    manifest = fp.params.to_manifest()
    for key in (
        "tokenizer",
        "tokenizer_version",
        "idf",
        "idf_digest",
        "top_n",
        "hash",
        "seed",
        "bits",
        "stopwords_digest",
    ):
        assert key in manifest
    assert "idf_path" not in manifest


def test_custom_idf_table(tmp_path: Path) -> None:
    table = tmp_path / "idf.txt"
    table.write_text("天气 1.0\n公园 20.0\n散步 5.0\n", encoding="utf-8")
    fp = Fingerprinter(FingerprintParams.with_idf_file(str(table), version=1))
    terms = dict(fp.weighted_terms("天气，公园，散步"))
    assert terms["公园"] == 20.0 and terms["天气"] == 1.0
    manifest = fp.params.to_manifest()
    assert manifest["idf"] == "custom" and manifest["idf_digest"] == fp.params.idf
    copy = tmp_path / "copy-under-another-name.txt"
    copy.write_bytes(table.read_bytes())
    assert FingerprintParams.with_idf_file(str(copy), version=1) == fp.params
    bad = tmp_path / "bad.txt"
    bad.write_text("天气 1.0\n公园 x\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"bad.txt:2"):
        FingerprintParams.with_idf_file(str(bad))


def test_terms_of_zero_weight_do_not_make_fingerprint_zero(tmp_path: Path) -> None:
    table = tmp_path / "idf.txt"
    table.write_text("天气 0.0\n公园 0.0\n散步 2.0\n", encoding="utf-8")
    fp = Fingerprinter(FingerprintParams.with_idf_file(str(table)))
    with pytest.raises(EmptyDocument):
        fp.fingerprint("天气，公园")
    assert [t for t, _ in fp.weighted_terms("天气，公园，散步")] == ["散步"]
