"""The per-user cache of parsed tables: hits, damaged entries, unwritable folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from simhash_hbase.cache import cached
from simhash_hbase.fingerprint import register_idf


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
