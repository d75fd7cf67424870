"""The fingerprint's fast path against a plain reference kept here (bit for bit).

The package counts terms, weighs them and picks the top-N through caches and C-level
iteration (simhash_hbase/memo.py); this file keeps the recipe written the obvious
way, one Python step per token, and asserts the same top-N (terms and float
weights), fingerprints and margins for v1 to v4, words and chars, many top-N sizes,
seeds and IDF tables, on random and real texts. The same holds for the segmenter's
ASCII re-split against the plain loop it replaced.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import EmptyDocument, Fingerprinter, FingerprintParams
from simhash_hbase.fingerprint import scripts
from simhash_hbase.fingerprint.simhash import (
    _folder,
    builtin_idf,
    idf_table,
    normalise,
    register_idf,
    segment,
    v2_keeps,
)

SHARED = Path(os.environ.get("SHDB_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SEEDS = sorted((SHARED / "seeds").glob("*.txt"))


def _words(name: str) -> frozenset[str]:
    return frozenset(resources.files("simhash_hbase").joinpath("data", name).read_text().split())


STOP = _words("stopwords.txt")
#: Version 3 adds the stop words of other scripts (its cut drops the Latin ones).
STOP_V3 = STOP | _words("stopwords-scripts.txt")
# A custom table with weights of 0 and below, which the top-N must leave out.
CUSTOM = register_idf("天气 0.0\n公园 -1.5\n散步 2.0\n文件 3.5\n的 0.0\nls 7.25\n".encode())


def reference_terms(fp: Fingerprinter, text: str) -> list[tuple[str, float]]:
    """The top-N (term, weight) pairs, one Python step per token and per term."""
    p = fp.params
    if p.version >= 2:
        text = normalise(text, _folder(p.fold))
    stop = STOP_V3 if p.version >= 3 else STOP
    counts: Counter[str] = Counter()
    if p.features == "chars":
        chars = "".join(re.findall(r"\w+", text.lower()))
        for i in range(len(chars) - p.ngram + 1):
            counts[chars[i : i + p.ngram]] += 1
    else:
        for token in fp._cut(text):
            term = token.strip().lower()
            if term and term not in stop and re.search(r"\w", term):
                counts[term] += 1
    if p.version >= 2:
        counts = Counter({t: n for t, n in counts.items() if v2_keeps(t)})
    if p.terms == "letter":  # a letter or digit in every term: none of only P* or S*
        counts = Counter(
            {t: n for t, n in counts.items() if any(unicodedata.category(c)[0] in "LN" for c in t)}
        )
    table = builtin_idf() if p.idf is None else idf_table(p.idf)
    weighted = []
    for term, n in counts.items():
        factor = n * math.sqrt(n * math.sqrt(n)) if p.version >= 2 else n  # v2: n ** 1.75
        if p.features == "chars":
            weight = float(factor)
        else:
            weight = factor * table.idf.get(term, table.median)
        if weight > 0.0:
            weighted.append((term, weight))
    top = heapq.nlargest(p.top_n, weighted, key=lambda tw: (tw[1], tw[0]))
    if p.version >= 4 and any(scripts.other_script(term) for term, _ in top):
        top = [(term, min(w, reference_level(top))) for term, w in top]
    elif p.version >= 2:  # no term above a fifth of the top-N's total
        limit = 0.2 * math.fsum(w for _, w in top)
        top = [(term, min(w, limit)) for term, w in top]
    return top


def reference_level(top: list[tuple[str, float]]) -> float:
    """v4's cap: the level L at which the k heaviest weights, cut to L, are each 0.08
    of the cut total (L = 0.08 * (k * L + the rest)), tried for k = 0, 1, ...; too few
    terms for 0.08 each (12 or fewer): the lightest weight, all equal."""
    weights = sorted((w for _, w in top), reverse=True)
    if len(weights) <= 12:
        return weights[-1]
    for k, weight in enumerate(weights):
        level = 0.08 * sum(sorted(weights)[: len(weights) - k]) / (1 - 0.08 * k)
        if weight <= level:
            return level if k else weight
    raise AssertionError("a fixed point exists for more than 12 terms")


def reference_sums(fp: Fingerprinter, text: str) -> np.ndarray | None:
    terms = reference_terms(fp, text)
    if not terms:
        return None
    signs = []
    for term, _ in terms:
        h = mmh3.hash64(term, fp.params.seed, signed=False)[0]
        signs.append([1.0 if h >> (63 - bit) & 1 else -1.0 for bit in range(64)])
    sums: np.ndarray = np.array([w for _, w in terms]) @ np.array(signs)
    return sums


def assert_same_as_reference(fp: Fingerprinter, text: str) -> None:
    assert fp.weighted_terms(text) == reference_terms(fp, text)
    sums = reference_sums(fp, text)
    if sums is None:
        with pytest.raises(EmptyDocument):
            fp.fingerprint_margins(text)
        return
    value, margins = fp.fingerprint_margins(text)
    assert value == sum(1 << (63 - bit) for bit in range(64) if sums[bit] > 0.0)
    assert margins.tobytes() == np.abs(sums[::-1]).tobytes()


PARAMS = [
    FingerprintParams(version=1),
    FingerprintParams(version=1, top_n=1),
    FingerprintParams(version=1, top_n=3, seed=12345),
    FingerprintParams(version=1, top_n=64),
    FingerprintParams(),  # the default: v4, folded by phrase, terms with letters
    FingerprintParams(version=3),
    FingerprintParams(top_n=8),  # v4 with too few terms for 0.08 each: all equal
    FingerprintParams(version=2),  # v2's default
    FingerprintParams(version=2, fold="none", terms="word"),  # v2 as first built
    FingerprintParams(version=2, fold="t2s", top_n=2),
    FingerprintParams(version=1, idf=CUSTOM.digest, top_n=4),
    FingerprintParams(idf=CUSTOM.digest, version=2),
    FingerprintParams(version=1, features="chars", ngram=1),
    FingerprintParams(version=1, features="chars", top_n=64),
    FingerprintParams(features="chars", ngram=3, top_n=5, version=2),
]
FINGERPRINTERS = [Fingerprinter(p) for p in PARAMS]
_PIECES = st.one_of(
    st.sampled_from(["天气", "公园", "散步", "文件", "的", "LS", "ls", "Ls", "C++", "AT&T"]),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5),
    st.sampled_from([*"abcXYZ0129+#&._%-:, \t\n，。ａ１\u3000㐀鿖豈𠀀😀の한é", "3.14", "2024"]),
    st.sampled_from(["軟體", "檔案", "滑鼠", "這個", "__", "^_^", "++", "＿＿", "°□°", "c++"]),
    st.sampled_from(["привет ", "мир ", "тест ", "수 ", "없습니다 ", "แฟ้ม", "הרפובליקה "]),
    st.text(max_size=3),
)
_TEXTS = st.lists(_PIECES, max_size=60).map("".join)


@settings(max_examples=300)
@given(st.sampled_from(FINGERPRINTERS), _TEXTS)
def test_same_as_reference_on_random_text(fp: Fingerprinter, text: str) -> None:
    assert_same_as_reference(fp, text)


def _real_texts() -> Iterator[str]:
    for path in SEEDS:
        text = path.read_text("utf-8")
        yield text
        yield text.upper()  # tokens that differ only in case become one term
        yield from text.splitlines()[:20]


@pytest.mark.skipif(not SEEDS, reason="../shared/seeds not present")
@pytest.mark.parametrize("params", PARAMS, ids=str)
def test_same_as_reference_on_real_text(params: FingerprintParams) -> None:
    fp = Fingerprinter(params)
    for text in _real_texts():
        assert_same_as_reference(fp, text)


def reference_resplit(tokens: list[str]) -> list[str]:
    """The corrections' ASCII re-split, one Python step per token."""
    out: list[str] = []
    run: list[str] = []
    for token in [*tokens, "\u4e00"]:  # a last non-ASCII token ends the last run
        if re.fullmatch(r"[a-zA-Z0-9+#&._%\-]+", token) and token not in segment._ASCII_WORDS:
            run.append(token)
            continue
        if run:
            out += [x for x in re.split(r"([a-zA-Z0-9]+(?:\.\d+)?%?)", "".join(run)) if x]
            run = []
        out.append(token)
    return out[:-1]


_TOKENS = st.lists(
    st.one_of(
        st.text(alphabet="aZ09.%+#&_-", min_size=1, max_size=4),
        st.sampled_from(["C++", "c#", "AT&T", "3.14%", "--", "中文", "T恤", "", " ", "１", "é"]),
    ),
    max_size=30,
)


@settings(max_examples=500)
@given(_TOKENS)
def test_ascii_resplit_same_as_reference(tokens: list[str]) -> None:
    assert segment._resplit_ascii(list(tokens)) == reference_resplit(tokens)
