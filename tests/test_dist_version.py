"""``dist_version`` reads what ``importlib.metadata.version`` reads, without importing it."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from simhash_hbase.version import dist_version


@pytest.mark.parametrize(
    "name",
    [
        "opencc",
        "OpenCC",
        "jieba",
        "rjieba",
        "numpy",
        "lmdb",
        "mmh3",
        "typer",
        "pytest",
        "hypothesis",
        "markdown-it-py",
        "Markdown_IT.py",
        "typing-extensions",
    ],
)
def test_the_same_version_as_importlib_metadata(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        expected = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed")

    def refused(_name: str) -> str:
        raise AssertionError("read without importlib.metadata")

    monkeypatch.setattr(metadata, "version", refused)  # a plain dist-info: read directly
    assert dist_version(name) == expected


def test_our_own_version_whatever_the_install() -> None:
    """An editable install leaves an egg-info in the checkout, which is first on the
    path when tests run from it: then importlib.metadata is asked, and agrees."""
    assert dist_version("simhash-hbase") == metadata.version("simhash-hbase")


def test_a_missing_distribution_is_importlib_metadatas_error() -> None:
    with pytest.raises(metadata.PackageNotFoundError):
        dist_version("no-such-distribution-shdb")


def test_the_first_folder_on_the_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder, version in (("a", "1.0"), ("b", "2.0")):
        info = tmp_path / folder / "Some_Dist-9.9.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: some-dist\nVersion: {version}\n"
        )
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b"), *sys.path])
    assert dist_version("some.dist") == metadata.version("some.dist") == "1.0"


def test_two_copies_in_one_folder_are_left_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("1.0", "2.0"):
        info = tmp_path / f"twice-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: twice\nVersion: {version}\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert dist_version("twice") == metadata.version("twice")
