"""Caches are checked by content hash and live in a private folder (issue 22.6).

A damaged or planted entry (any byte changed, any length) is never used: the
value is rebuilt. A cache folder that another user owns, or that is a link, is
neither read nor written; one of ours open to others is closed (0700).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase.fingerprint.cache import cached, private_dir
from simhash_hbase.fingerprint.idf import sparse_idf

TABLE = {"词": 3.5, "分词": 7.25, "结巴": 1.0, "去重": 2.0}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder (not yet made); examples of one test share it, each
    starting from an empty folder."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SHDB_CACHE_DIR", str(folder))
    return folder


def _damage(path: Path, at: int, value: int, cut: bool) -> None:
    raw = bytearray(path.read_bytes())
    at %= len(raw)
    if cut:
        del raw[at:]
    else:
        raw[at] ^= value or 1
    path.write_bytes(bytes(raw))


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, 10**6), value=st.integers(0, 255), cut=st.booleans())
def test_a_changed_entry_is_never_used(home: Path, at: int, value: int, cut: bool) -> None:
    for entry in home.glob("*") if home.exists() else []:
        entry.unlink()
    assert cached("t.marshal", lambda: TABLE) == TABLE
    _damage(home / "t.marshal", at, value, cut)
    assert cached("t.marshal", lambda: {"rebuilt": 1.0}) == {"rebuilt": 1.0}


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["terms.npy", "values.npy", "sha256"]), at=st.integers(0, 10**6))
def test_a_changed_idf_array_is_never_used(home: Path, which: str, at: int) -> None:
    for entry in home.glob("*") if home.exists() else []:
        entry.unlink()
    sparse_idf("d", lambda: (TABLE, 2.0))
    (path,) = home.glob(f"idf-d.{which}")
    _damage(path, at, 0x20, cut=False)
    poisoned = {k: v + 100 for k, v in TABLE.items()}
    table = sparse_idf("d", lambda: (poisoned, 9.0))  # rebuilt: the damage is seen
    table.resolve(list(TABLE))
    assert table.idf == poisoned and table.median == 9.0


def test_a_folder_of_another_user_is_not_trusted(home: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give the folder to another user")
    cached("t.marshal", lambda: TABLE)
    os.chown(home, 65534, 65534)
    assert private_dir() is None
    assert cached("t.marshal", lambda: {"fresh": 1.0}) == {"fresh": 1.0}  # not read


def test_a_link_is_not_a_private_folder(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o777)
    home.parent.mkdir(parents=True, exist_ok=True)
    home.symlink_to(target)
    assert private_dir() is None
    cached("t.marshal", lambda: TABLE)
    assert list(target.iterdir()) == []


def test_an_open_folder_of_ours_is_closed(home: Path) -> None:
    home.mkdir(parents=True)
    home.chmod(0o777)
    cached("t.marshal", lambda: TABLE)
    assert home.stat().st_mode & 0o777 == 0o700
    assert (home / "t.marshal").stat().st_mode & 0o777 == 0o600


def test_checked_arrays_are_not_hashed_again_until_they_change(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check is remembered with the files' stamp (device, inode, size, times), and
    redone, finding the damage, once any of it changes, even with the old mtime."""
    import os

    from simhash_hbase.fingerprint import cache

    monkeypatch.setattr(cache, "_SETTLED_NS", 0)  # no clock-tick wait in a test
    hashed: list[Path] = []
    digest = cache._file_digest
    monkeypatch.setattr(cache, "_file_digest", lambda p: hashed.append(p) or digest(p))
    sparse_idf("d", lambda: (TABLE, 2.0))  # built
    for expected in (2, 2, 2):  # checked once, then by the stamp
        assert sparse_idf("d", lambda: ({}, 0.0)).median == 3.5  # the arrays' own
        assert len(hashed) == expected
    values = home / "idf-d.values.npy"
    before = values.stat()
    _damage(values, 200, 0x20, cut=False)
    os.utime(values, ns=(before.st_atime_ns, before.st_mtime_ns))  # the old mtime back
    table = sparse_idf("d", lambda: ({"x": 1.0}, 9.0))  # damage found: rebuilt
    assert table.median == 9.0
