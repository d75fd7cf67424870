"""The per-user cache of parsed tables: hits, damaged entries, unwritable folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from simhash_hbase.fingerprint.cache import cached
from simhash_hbase.fingerprint.simhash import register_idf


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHDB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_built_once_then_read(cache_home: Path) -> None:
    calls: list[int] = []

    def build() -> dict[str, float]:
        calls.append(1)
        return {"词": 1.5}

    assert cached("t.marshal", build) == {"词": 1.5}
    assert cached("t.marshal", build) == {"词": 1.5}
    assert len(calls) == 1
    assert [p.name for p in cache_home.iterdir()] == ["t.marshal"]  # no temp files left
    assert cache_home.stat().st_mode & 0o777 == 0o700


def test_damaged_entry_is_rebuilt(cache_home: Path) -> None:
    cached("t.marshal", lambda: {"a": 1.0})
    path = cache_home / "t.marshal"
    path.write_bytes(path.read_bytes()[:5])  # truncated
    assert cached("t.marshal", lambda: {"a": 2.0}) == {"a": 2.0}
    path.write_bytes(b"\xff\x00garbage")
    assert cached("t.marshal", lambda: {"a": 3.0}) == {"a": 3.0}


def test_unwritable_cache_only_costs_the_rebuild(cache_home: Path) -> None:
    cache_home.write_text("not a folder")  # mkdir fails (even for root): value still returned
    assert cached("t.marshal", lambda: (1, 2.5)) == (1, 2.5)


def test_idf_table_from_cache_equals_parsed(cache_home: Path) -> None:
    raw = "词 3.5\n分词 7.25\n结巴 1.0\n".encode()
    first = register_idf(raw, "t.idf")
    second = register_idf(raw, "t.idf")  # from the cache this time
    assert (cache_home / f"idf-{first.digest}.marshal").exists()
    assert second.idf == first.idf == {"词": 3.5, "分词": 7.25, "结巴": 1.0}
    assert second.median == first.median == 3.5


def test_sparse_idf_gives_the_tables_own_values(cache_home: Path) -> None:
    """jieba's table read term by term equals the parsed table, for present, absent,
    too-long and NUL-bearing terms; built once, then read from the cache."""
    from simhash_hbase.fingerprint.idf import sparse_idf
    from simhash_hbase.fingerprint.simhash import builtin_idf, builtin_idf_digest

    full = builtin_idf()
    assert builtin_idf_digest() == full.digest
    present = [*list(full.idf)[::997], max(full.idf, key=len), min(full.idf), max(full.idf)]
    absent = ["不在表里的词语", "x" * 40, present[0] + "\0", "\0", "", "zzzz"]
    for attempt in range(2):  # built, then from the cache
        table = sparse_idf(full.digest, lambda: (full.idf, full.median))
        assert table.median == full.median
        table.resolve([*present, *absent])
        table.resolve(present[:3])  # again: already resolved
        assert table.idf == {t: full.idf[t] for t in present}, attempt
        assert len(list(cache_home.glob("idf-*.npy"))) == 2
        assert len(list(cache_home.glob("idf-*.sha256"))) == 1


def test_sparse_idf_fingerprints_equal_the_full_table(cache_home: Path) -> None:
    from simhash_hbase import Fingerprinter
    from simhash_hbase.fingerprint.simhash import IdfTable, builtin_idf

    sparse = Fingerprinter()
    full = Fingerprinter()
    full._idf = builtin_idf()
    assert isinstance(full._idf, IdfTable) and not isinstance(sparse._idf, IdfTable)
    texts = [
        "结巴分词支持加载IDF词典并且提供了一个默认的词典，它包含了大量的词组。",
        "SimHash 是 Google 提出的海量文本去重算法，适合长文本。",
        "今天天气很好，我们去公园散步吧。" * 3 + "未登录词例如饕餮龘靐",
    ]
    for text in texts:
        assert sparse.weighted_terms(text) == full.weighted_terms(text)
        assert sparse.fingerprint(text) == full.fingerprint(text)


def test_cache_dir_without_a_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """No home: nothing is cached (never a shared temp folder), values still right."""
    from simhash_hbase.fingerprint.cache import cache_dir, private_dir

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("SHDB_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", no_home)
    assert cache_dir() is None and private_dir() is None
    assert cached("t.marshal", lambda: {"a": 1.0}) == {"a": 1.0}


def test_builtin_idf_digest_follows_the_installed_file(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cached digest is the file's SHA-256: read from the cache while the file
    stays, hashed again when it changes (a reinstall: same size, a new mtime)."""
    import hashlib
    import os

    from simhash_hbase.fingerprint import simhash

    table = tmp_path / "idf.txt"
    monkeypatch.setattr(simhash, "_jieba_idf_path", lambda: table)

    def digest() -> str:
        simhash.builtin_idf_digest.cache_clear()
        return simhash.builtin_idf_digest()

    for version, raw in enumerate([b"a 1.0\n", b"b 2.0\n"], 1):
        table.write_bytes(raw)
        os.utime(table, ns=(version * 10**9, version * 10**9))
        assert digest() == digest() == hashlib.sha256(raw).hexdigest()
        assert len(list(cache_home.glob("idf-digest-*"))) == version  # one entry a file
    simhash.builtin_idf_digest.cache_clear()


def test_median_is_the_upper_median() -> None:
    import numpy as np

    from simhash_hbase.fingerprint.idf import _median

    for n in (1, 2, 3, 4, 1001):
        values = np.random.default_rng(n).random(n)
        assert _median(values) == sorted(values.tolist())[n // 2]
