"""The C fast path (``_native``) gives what the pure-Python path gives, bit for bit.

Tokens (``fast_cut`` vs ``segment._fast_py``), weighted terms, fingerprints and
margins, on arbitrary text and on the real seeds, for every term recipe. Where a C
compiler is installed the extension must have been built (CI); elsewhere the C side
of these tests skips and the pure-Python path is what runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import mmh3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import EmptyDocument, FingerprintParams
from simhash_hbase import _native as native
from simhash_hbase.fingerprint import opencc_cache, segment, simhash
from simhash_hbase.fingerprint.simhash import Fingerprinter, register_idf
from tests.test_segment import _REPEAT_TEXTS, _TEXTS, SEEDS, _real_texts

#: Anything at all, and the edge families of the segmenter (CJK outside jieba's
#: range, emoji, kana, full-width forms, CRLF, zero-width spaces), mixed.
_ANY = st.one_of(_TEXTS, _REPEAT_TEXTS, st.text(max_size=60))
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def compiled() -> ModuleType:
    module = native.module()
    if module is None:
        if os.environ.get("CI") and (shutil.which("cc") or shutil.which("gcc")):
            pytest.fail("a C compiler is installed but the extension was not built (setup.py)")
        pytest.skip("the C extension is not built (no C compiler at install)")
    return module


@pytest.fixture(scope="module")
def native_cut() -> Callable[[str, bool], list[str]]:
    if segment.resolve() != "rjieba":
        pytest.skip("rjieba is not installed")
    return segment._dictionaries.whole()


def _pair(params: FingerprintParams, compiled: ModuleType) -> tuple[Fingerprinter, Fingerprinter]:
    """The C path and the pure-Python path of ``params`` (same segmenter)."""
    fast, slow = Fingerprinter(params), Fingerprinter(params)
    assert fast._native is not None
    slow._native = None
    return fast, slow


def _outputs(fp: Fingerprinter, text: str) -> object:
    try:
        fingerprint, margins = fp.fingerprint_margins(text)
    except EmptyDocument:
        return None
    return fp.weighted_terms(text), fingerprint, margins.tobytes()


_RECIPES = [
    FingerprintParams(),
    FingerprintParams(version=1),
    FingerprintParams(version=3),
    FingerprintParams(version=2, terms="word", fold="none"),
    FingerprintParams(top_n=100),  # the sorted branch (N > 64)
    FingerprintParams(top_n=1),
]


@pytest.mark.parametrize("params", _RECIPES, ids=lambda p: f"v{p.version}-{p.terms}-{p.top_n}")
@_SETTINGS
@given(text=_ANY)
def test_same_terms_fingerprints_and_margins_on_random_text(
    compiled: ModuleType, params: FingerprintParams, text: str
) -> None:
    fast, slow = _pair(params, compiled)
    assert _outputs(fast, text) == _outputs(slow, text)


@_SETTINGS
@given(text=_ANY)
def test_same_tokens_as_the_python_corrections(
    compiled: ModuleType, native_cut: Callable[[str, bool], list[str]], text: str
) -> None:
    assert compiled.fast_cut(native_cut, text) == segment._fast_py(native_cut, text)
    slow = segment._rjieba_cut(native_cut, text, segment._fast_py)
    assert segment._rjieba_cut(native_cut, text, compiled.fast_cut) == slow


@pytest.mark.skipif(not SEEDS, reason="../shared/seeds not present")
@_SETTINGS
@given(text=_ANY, pos=st.integers(0, 80))
def test_same_repeats_found(compiled: ModuleType, text: str, pos: int) -> None:
    assert compiled.find_square(text, pos) == segment._square_py(text, pos)
    at = min(pos, len(text))
    assert compiled.block_around(text, at, at) == segment._block_around_py(text, at, at)
    square = segment._square_py(text, pos)
    if square is not None:
        assert compiled.block_around(text, *square) == segment._block_around_py(text, *square)


_WIDE = [chr(c) for c in (*range(0xFF01, 0xFF5F), 0x3000, 0xA0, 0x2026)]


def test_unwiden_maps_each_form_to_its_compatibility_decomposition(compiled: ModuleType) -> None:
    for c in _WIDE:
        assert unicodedata.decomposition(c).startswith(("<wide>", "<noBreak>", "<compat>"))
        assert compiled.unwiden(c) == unicodedata.normalize("NFKD", c)
        assert (
            compiled.unwiden(f"中{c}\U0001f600")
            == f"中{unicodedata.normalize('NFKD', c)}\U0001f600"
        )


@_SETTINGS
@given(
    text=st.one_of(
        _ANY, st.lists(st.sampled_from([*_WIDE, "\u0301", "\u3099", "a", "中"])).map("".join)
    )
)
def test_normalise_is_nfkc(compiled: ModuleType, text: str) -> None:
    """Full-width forms next to combining marks too (they compose after NFKD)."""
    assert simhash.normalise(text) == unicodedata.normalize("NFKC", text)


@pytest.mark.skipif(not SEEDS, reason="../shared/seeds not present")
def test_same_on_real_text(compiled: ModuleType) -> None:
    texts = list(_real_texts())
    assert len(texts) > 20
    for params in _RECIPES[:4]:
        fast, slow = _pair(params, compiled)
        for text in texts:
            assert _outputs(fast, text) == _outputs(slow, text), text[:80]


def test_same_on_real_text_of_every_script(compiled: ModuleType) -> None:
    """Real translated text (tests/data/multilingual.json), where version 4 caps to its
    fixed point, and version 3 as before."""
    sample = json.loads((Path(__file__).parent / "data" / "multilingual.json").read_text("utf-8"))
    for params in (FingerprintParams(), FingerprintParams(version=3)):
        fast, slow = _pair(params, compiled)
        for docs in sample.values():
            for text in docs:
                assert _outputs(fast, text) == _outputs(slow, text), text[:80]


def test_a_custom_idf_table_and_zero_weights(compiled: ModuleType) -> None:
    """A dict table (not the sorted arrays), with terms weighing 0 and below."""
    table = register_idf("中文 0\n文本 -1\n去重 2.5\nhello 3\n".encode())
    fast, slow = _pair(FingerprintParams(idf=table.digest), compiled)
    for text in ["中文文本", "中文文本去重", "hello 中文", "去重去重 hello hello 文本"]:
        assert _outputs(fast, text) == _outputs(slow, text), text


def test_the_token_memory_is_bounded_and_starts_afresh(compiled: ModuleType) -> None:
    params = FingerprintParams()
    fast, slow = _pair(params, compiled)
    small = compiled.Terms(
        simhash._stopwords()[0], simhash.has_letter, None,
        *simhash._builtin_sparse().arrays(), simhash._builtin_sparse().median,
        True, True, 8,
    )  # fmt: skip
    fast._native = small
    for text in ["海量文本去重与指纹，抽屉原理", "汉明距离 and near-duplicate 网页", "中文 " * 20]:
        assert _outputs(fast, text) == _outputs(slow, text)
        assert small.size() < 8 + 40


def test_idf_lookup_finds_every_entry_of_the_sorted_table(compiled: ModuleType) -> None:
    """The C binary search over the memory-mapped table against numpy's own."""
    sparse = simhash._builtin_sparse()
    terms, values, _ = sparse.arrays()
    picked = [str(t) for t in terms[:: max(len(terms) // 3000, 1)]]
    table = simhash._terms_table(1, False, None)  # v1: no filters, weight = count x IDF
    for term in picked:
        if simhash._term_of()[term] != term:
            continue  # a stop word, or not a term as it stands
        top = table.top([term], 1)
        want = float(values[np.searchsorted(terms, term)])
        assert top == ([(term, want)] if want > 0 else []), term


def test_version_names_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "simhash_hbase", "--version"],
        capture_output=True, text=True, check=True, env={**os.environ, native.ENV: "0"},
    ).stdout  # fmt: skip
    assert "fingerprinting: pure Python ($SHDB_NATIVE=0)" in out
    monkeypatch.setenv(native.ENV, "0")
    assert native.module() is None
    assert Fingerprinter()._native is None


@pytest.fixture(scope="module")
def screen() -> opencc_cache.Screen:
    found = opencc_cache.screen("t2s")
    if found is None:
        pytest.fail("OpenCC's t2s dictionaries could not be read (opencc_dict)")
    return found


def test_every_character_t2s_changes_is_in_its_screen(screen: opencc_cache.Screen) -> None:
    """Each character of the BMP and of the CJK extension planes alone (one line each:
    OpenCC converts lines independently); each "certain" character is changed."""
    chars = [chr(c) for c in [*range(0x20, 0xD800), *range(0xE000, 0x10000),
                              *range(0x20000, 0x323B0)] if chr(c) != "\n"]  # fmt: skip
    converted = opencc_cache.converter("t2s")("\n".join(chars)).split("\n")
    assert len(converted) == len(chars)
    changed = {c for c, to in zip(chars, converted) if c != to}
    assert changed and changed <= set(screen.chars)
    assert screen.certain and set(screen.certain) <= changed


_PLAIN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_PHRASES = st.sampled_from(["\n", "乾隆", "後來", "軟體", "著作", "於是", "頭髮", "皇后"])


@_SETTINGS
@given(text=st.one_of(_ANY, st.lists(st.one_of(_PLAIN, _PHRASES)).map("".join)))
def test_the_screen_tells_which_lines_t2s_changes(screen: opencc_cache.Screen, text: str) -> None:
    """Unmarked lines stay, certain ones change; C and Python mark the same lines."""
    lines = text.split("\n")
    maybe, sure = simhash._suspect_lines(screen)(text)
    t2s = opencc_cache.converter("t2s")
    for i, line in enumerate(lines):
        if i not in maybe:
            assert t2s(line) == line
        if i in sure:
            assert t2s(line) != line
    may = re.compile(f"[{re.escape(screen.chars)}]")
    must = re.compile(f"[{re.escape(screen.certain)}]")
    assert maybe == [i for i, line in enumerate(lines) if may.search(line)]
    assert sure == [i for i in maybe if must.search(lines[i])]


def test_without_the_extension_the_screen_is_a_regular_expression(
    screen: opencc_cache.Screen, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(native.ENV, "0")
    simhash._suspect_lines.cache_clear()
    lines = ["abc", "軟體", "中文", "乾隆\r"]
    assert simhash._suspect_lines(screen)("\n".join(lines)) == ([1, 3], [1])
    assert simhash._suspect_lines(None)("\n".join(lines)) == ([0, 1, 2, 3], [])
    simhash._suspect_lines.cache_clear()  # the next folders take the C screen again


_TERMS = st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=40), max_size=20)


@_SETTINGS
@given(terms=_TERMS, seed=st.integers(0, (1 << 32) - 1))
def test_sign_rows_are_mmh3s_bits(compiled: ModuleType, terms: list[str], seed: int) -> None:
    """murmur3 x64_128 in C against mmh3, on arbitrary Unicode (every tail length)."""
    rows = np.frombuffer(compiled.sign_rows(terms, seed), dtype=np.float64)
    assert rows.reshape(len(terms), 64).tolist() == simhash._sign_rows(terms, seed).tolist()
    for term in terms:  # mmh3 hashes a str as its UTF-8 bytes
        assert mmh3.hash64(term, seed, signed=False) == mmh3.hash64(
            term.encode(), seed, signed=False
        )


def test_a_lone_surrogate_is_an_encoding_error_on_both_paths(compiled: ModuleType) -> None:
    """(mmh3 5.3.1 crashes the process on such a str: both paths hash bytes.)"""
    with pytest.raises(UnicodeEncodeError):
        compiled.sign_rows(["a\ud800"], 0)
    with pytest.raises(UnicodeEncodeError):
        simhash._sign_rows(["a\ud800"], 0)


def _yielding_has_letter(term: str) -> bool:
    """simhash.has_letter, letting another thread run first (as Python may, there)."""
    time.sleep(0)
    return simhash.has_letter(term)


def test_threads_sharing_a_table_get_the_sequential_answers(compiled: ModuleType) -> None:
    """The server fingerprints in threads with one table: counts are local to a call,
    one Entry a term even when Python runs mid-call (has_letter on "〇", "〡": another
    thread may take over there), and the caches are never cleared under a call."""
    import threading

    base = ["海量文本去重〇与指纹〡计算", "抽屉原理 〢 and near-duplicate 网页", "〣号 中文 " * 30]
    texts = [f"{t} {i}{'〤' * (i % 5)}号 {chr(0x3021 + i % 9)}" for i in range(40) for t in base]
    fast, slow = _pair(FingerprintParams(), compiled)
    fast._native = compiled.Terms(
        simhash._stopwords()[0], _yielding_has_letter, None,
        *simhash._builtin_sparse().arrays(), simhash._builtin_sparse().median,
        True, True, 50,
    )  # fmt: skip
    want = [_outputs(slow, t) for t in texts]
    got: dict[int, list[object]] = {}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    try:

        def run(k: int) -> None:
            got[k] = [_outputs(fast, t) for t in texts]

        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert all(got[k] == want for k in range(4))


def test_the_build_is_of_these_sources(compiled: ModuleType) -> None:
    assert len(compiled.SOURCE_SHA256) == 64
    assert not native.is_stale(compiled)


def test_a_build_of_other_sources_is_not_used(
    compiled: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An editable install's extension left over from before a ``git pull`` lacks
    the functions the new code calls: it is set aside, not called."""
    monkeypatch.setattr(compiled, "SOURCE_SHA256", "0" * 64)
    native._load.cache_clear()
    try:
        assert native.module() is None
        assert "out of date with the sources" in native.status()
        assert "pip install -e ." in caplog.text
    finally:
        monkeypatch.undo()
        native._load.cache_clear()
    assert native.module() is compiled
