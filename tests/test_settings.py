"""Index settings round-trip: an index reopens with what it was built with."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import FingerprintParams, InvalidSetting, SimhashIndex
from simhash_hbase.fingerprint.simhash import FEATURES, register_idf
from simhash_hbase.store import open_store

from .test_cli import shdb
from .test_index import ARTICLE, OTHER

SHORT = "今天天气很好，我们去公园散步吧"

_TABLES = [register_idf(f"天气 {i}.5\n公园 2.0\n散步 {i}\n".encode(), "t").digest for i in range(3)]

_FIELDS = dict(
    top_n=st.integers(1, 1 << 20),
    seed=st.integers(0, (1 << 32) - 1),
    idf=st.sampled_from([None, *_TABLES]),
    features=st.sampled_from(FEATURES),
    ngram=st.integers(1, 64),
    tokenizer=st.text(min_size=1, max_size=10),
    hash=st.text(min_size=1, max_size=20),
)
_RECIPES = [(1, "none", "word")] + [
    (2, fold, terms) for fold in ("none", "t2s", "tw2sp") for terms in ("word", "letter")
]
PARAMS = st.sampled_from(_RECIPES).flatmap(
    lambda vft: st.builds(
        FingerprintParams,
        version=st.just(vft[0]),
        fold=st.just(vft[1]),
        terms=st.just(vft[2]),
        html=st.sampled_from(["main", "raw"]),
        **_FIELDS,
    )
)


@settings(max_examples=200, deadline=None)
@given(PARAMS)
def test_params_round_trip_through_the_manifest(params: FingerprintParams) -> None:
    entry = json.loads(json.dumps(params.to_manifest()))  # as stored
    assert FingerprintParams.from_manifest(entry) == params


def test_the_strategy_covers_every_field() -> None:
    """A new FingerprintParams field must be added to PARAMS above."""
    covered = {"top_n", "seed", "idf", "features", "ngram", "tokenizer", "hash", "bits"}
    covered |= {"version", "fold", "terms", "html"}
    assert {f.name for f in fields(FingerprintParams)} == covered


def test_the_first_manifest_spelling_still_reads() -> None:
    old = FingerprintParams().to_manifest()
    old["idf_name"] = old.pop("idf")
    assert FingerprintParams.from_manifest(old) == FingerprintParams()


@pytest.mark.parametrize(
    ("setting", "value"),
    [("top_n", 0), ("top_n", -3), ("ngram", 0), ("seed", -1), ("features", "bytes"), ("bits", 32)],
)
def test_invalid_settings_are_refused_by_name(setting: str, value: object) -> None:
    with pytest.raises(InvalidSetting) as caught:
        FingerprintParams(**{setting: value})  # type: ignore[arg-type]
    assert caught.value.setting == setting


def test_creation_is_check_and_put(store_url: str) -> None:
    """Two processes creating one index agree on the first manifest written."""
    with open_store(store_url) as store:
        assert store.put_meta_if_absent("manifest", {"v": 1}) == {"v": 1}
        assert store.put_meta_if_absent("manifest", {"v": 2}) == {"v": 1}
        assert store.get_meta("manifest") == {"v": 1}


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    rows = [{"id": "a", "text": SHORT}, {"id": "b", "text": ARTICLE}, {"id": "c", "text": OTHER}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def test_chars_index_is_queried_by_text_without_options(store_url: str, tmp_path: Path) -> None:
    """#9: `ingest --features chars` then `query` used to exit 2 (words vs chars)."""
    corpus = _corpus(tmp_path)
    assert (
        shdb("ingest", "--create", str(corpus), "-i", store_url, "--features", "chars").exit_code
        == 0
    )
    result = shdb("query", SHORT, "-i", store_url, "-k", "0")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith("\ta")
    assert shdb("query", SHORT, "-i", store_url, "--features", "chars").exit_code == 0
    wrong = shdb("query", SHORT, "-i", store_url, "--features", "words")
    assert wrong.exit_code == 2
    assert "features: the index has 'chars', asked for 'words'" in wrong.stderr
    assert "hint: leave out --features" in wrong.stderr


def test_second_ingest_adopts_top_n(store_url: str, tmp_path: Path) -> None:
    """#9: `ingest --top-n 32`, then `ingest` without the flag used to be refused."""
    corpus = _corpus(tmp_path)
    assert shdb("ingest", "--create", str(corpus), "-i", store_url, "--top-n", "32").exit_code == 0
    again = shdb("ingest", "--create", str(corpus), "-i", store_url, "--no-resume")
    assert again.exit_code == 0, again.stderr
    assert shdb("ingest", "--create", str(corpus), "-i", store_url, "--top-n", "32").exit_code == 0
    wrong = shdb("ingest", "--create", str(corpus), "-i", store_url, "--top-n", "16")
    assert wrong.exit_code == 2 and "top_n: the index has 32, asked for 16" in wrong.stderr
    assert "leave out --top-n" in wrong.stderr
    with SimhashIndex.open(store_url, create=False) as index:
        assert index.params.top_n == 32


def test_custom_idf_travels_with_the_index(store_url: str, tmp_path: Path) -> None:
    """#9: `ingest --idf t.txt` then any query without --idf used to be refused,
    and so was a byte-identical copy of the table under another name."""
    corpus = _corpus(tmp_path)
    table = tmp_path / "lo-idf.txt"
    table.write_text("天气 1.0\n公园 9.0\n散步 5.0\n股市 3.0\n", encoding="utf-8")
    copy = tmp_path / "same-table-other-name.txt"
    copy.write_bytes(table.read_bytes())
    assert (
        shdb("ingest", "--create", str(corpus), "-i", store_url, "--idf", str(table)).exit_code == 0
    )
    os.remove(table)  # the index holds its own copy
    result = shdb("query", SHORT, "-i", store_url, "-k", "0")
    assert result.exit_code == 0, result.stderr
    assert shdb("query", SHORT, "-i", store_url, "--idf", str(copy)).exit_code == 0
    other = tmp_path / "other.txt"
    other.write_text("天气 2.0\n", encoding="utf-8")
    wrong = shdb("query", SHORT, "-i", store_url, "--idf", str(other))
    assert wrong.exit_code == 2 and "idf: the index has" in wrong.stderr
    assert "leave out --idf" in wrong.stderr


def test_invalid_setting_writes_nothing(tmp_path: Path, store_url: str) -> None:
    """`--top-n 0` used to leave an index that refused every later run."""
    corpus = _corpus(tmp_path)
    bad = shdb("ingest", "--create", str(corpus), "-i", store_url, "--top-n", "0")
    assert bad.exit_code == 2 and "--top-n: top_n must be an integer in 1.." in bad.stderr
    assert shdb("stats", "-i", store_url).exit_code == 2  # no index was created
    assert shdb("ingest", "--create", str(corpus), "-i", store_url).exit_code == 0
