"""No silent creation (issue 43.2): a mistyped index is an error, never an empty
index that calls every page new; a new index is said once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simhash_hbase.cli import serve as serve_cli
from simhash_hbase.cli.app import app
from simhash_hbase.errors import IndexNotFound
from simhash_hbase.jobs import ingest as ingest_job
from simhash_hbase.jobs.ingest import index_for_ingest

from .test_index import ARTICLE, OTHER

runner = CliRunner()
NEW = "created a new, empty index at"


def shdb(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    rows = [{"id": "a", "text": ARTICLE}, {"id": "b", "text": OTHER}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """`shdb serve` up to the point where it would start serving: the settings it got."""
    started: list[Any] = []
    real = serve_cli._service

    def service() -> tuple[Any, Any, str]:
        _, settings_class, token_env = real()
        return (
            lambda settings, sock, access_log=False: started.append(settings),
            settings_class,
            token_env,
        )

    monkeypatch.setattr(serve_cli, "_service", service)
    return started


def test_serve_refuses_an_index_that_is_not_there(tmp_path: Path, no_server: list[Any]) -> None:
    index = tmp_path / "nosuch-idx"
    result = shdb("serve", "--index", str(index))
    assert result.exit_code == 2 and no_server == []
    assert f"no index at {index}" in result.stderr and "--create" in result.stderr
    assert not index.exists()


def test_serve_create_makes_the_index_and_says_so_once(
    tmp_path: Path, no_server: list[Any], corpus: Path
) -> None:
    index = tmp_path / "new-idx"
    result = shdb("serve", "--index", str(index), "--create")
    assert result.exit_code == 0 and len(no_server) == 1
    assert result.stderr.count(NEW) == 1 and index.exists()
    again = shdb("serve", "--index", str(index), "--create")
    assert again.exit_code == 0 and NEW not in again.stderr


def test_serve_opens_an_existing_index_without_create(
    tmp_path: Path, no_server: list[Any], corpus: Path
) -> None:
    index = str(tmp_path / "ix")
    assert shdb("ingest", str(corpus), "-i", index).exit_code == 0
    result = shdb("serve", "--index", index)
    assert result.exit_code == 0 and len(no_server) == 1 and NEW not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["query", ARTICLE],
        ["get", "a"],
        ["stats"],
        ["verify"],
        ["verify", "--repair"],
        ["remove", "a"],
    ],
)
def test_commands_that_read_never_create_an_index(tmp_path: Path, command: list[str]) -> None:
    index = tmp_path / "nosuch-idx"
    result = shdb(*command, "-i", str(index))
    assert result.exit_code == 2, result.output
    assert f"no index at {index}" in result.stderr
    assert not index.exists()


def test_ingest_into_a_new_folder_creates_it_and_says_so_once(tmp_path: Path, corpus: Path) -> None:
    index = tmp_path / "ix"
    first = shdb("ingest", str(corpus), "-i", str(index))
    assert first.exit_code == 0 and first.stderr.count(NEW) == 1
    again = shdb("ingest", str(corpus), "-i", str(index))
    assert again.exit_code == 0 and NEW not in again.stderr


def test_ingest_into_hbase_opens_without_creating_unless_told(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The create flag the open gets: hbase:// only with --create (no HBase needed)."""
    asked: list[bool] = []

    def refuse(url: str, **kwargs: Any) -> Any:
        asked.append(kwargs["create"])
        raise IndexNotFound(url)

    monkeypatch.setattr(ingest_job.SimhashIndex, "open", refuse)
    url = "hbase://127.0.0.1:9091?prefix=typo"
    result = shdb("ingest", str(corpus), "-i", url)
    assert result.exit_code == 2 and f"no index at {url}" in result.stderr
    shdb("ingest", str(corpus), "-i", url, "--create")
    shdb("ingest", str(corpus), "-i", str(tmp_path / "folder"))
    assert asked == [False, True, True]


def test_index_for_ingest_without_create_refuses_a_missing_index(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFound), index_for_ingest(str(tmp_path / "x"), create=False):
        pass
    assert not (tmp_path / "x").exists()
