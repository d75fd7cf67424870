"""The service in a window: ?within=, ?since=, ?until= on check and check-and-add,
`shdb serve --within` for requests that ask none, and RemoteIndex.within."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from simhash_hbase import RemoteIndex
from simhash_hbase.layout.window import Window
from simhash_hbase.records import now_ms
from simhash_hbase.serve.app import create_app
from simhash_hbase.serve.settings import ServeSettings

from .serve_server import live_server
from .test_serve import TEXT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

DAY = 86_400
NOW = now_ms() // 1000


def _client(tmp_path: Path, within: str | None = None) -> TestClient:
    settings = ServeSettings(index=str(tmp_path / "ix"), within=within, fingerprint_workers=0)
    return TestClient(create_app(settings))


def _ids(answer: dict[str, object]) -> list[str]:
    return sorted(m["id"] for m in answer["matches"])  # type: ignore[attr-defined]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path) as c:
        items = [
            {"id": "old", "text": TEXT, "time": NOW - 40 * DAY},
            {"id": "recent", "text": TEXT, "time": NOW - 10 * DAY},
        ]
        assert c.post("/v1/add", json=items).status_code == 200
        yield c


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ("", ["old", "recent"]),
        ("within=30d", ["recent"]),
        ("within=1w", []),
        (f"since={NOW - 20 * DAY}", ["recent"]),
        (f"until={NOW - 20 * DAY}", ["old"]),
        (f"since={NOW - 50 * DAY}&until=2099-01-01T00:00:00Z", ["old", "recent"]),
    ],
)
def test_check_in_a_window(client: TestClient, query: str, ids: list[str]) -> None:
    answer = client.post(f"/v1/check?{query}", json={"text": TEXT}).json()
    assert _ids(answer) == ids and answer["total"] == len(ids)


def test_check_and_add_in_a_window_says_new_for_older_copies(client: TestClient) -> None:
    first = client.post("/v1/check-and-add?within=1w", json={"id": "today", "text": TEXT}).json()
    assert first["new"] is True and client.get("/v1/docs/today").status_code == 200
    again = client.post("/v1/check-and-add?within=1w", json={"id": "again", "text": TEXT}).json()
    assert again["new"] is False and _ids(again) == ["today"]


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("within=30", "within '30': give a duration"),
        ("within=1d&since=0", "give within or since, not both"),
        ("since=yesterday", "since: time 'yesterday'"),
        ("since=2000&until=1000", "is not before until"),
    ],
)
def test_bad_windows_are_400(client: TestClient, query: str, said: str) -> None:
    for endpoint in ("check", "check-and-add"):
        response = client.post(f"/v1/{endpoint}?{query}", json={"id": "x", "text": TEXT})
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "invalid_parameter" and said in error["message"]


def test_serve_within_is_the_default_of_requests_that_ask_none(tmp_path: Path) -> None:
    with _client(tmp_path, within="30d") as c:
        c.post("/v1/add", json={"id": "old", "text": TEXT, "time": NOW - 40 * DAY})
        assert c.post("/v1/check", json={"text": TEXT}).json()["total"] == 0
        assert c.post("/v1/check?within=60d", json={"text": TEXT}).json()["total"] == 1
        assert c.post("/v1/check?since=0", json={"text": TEXT}).json()["total"] == 1
        assert c.get("/v1/status").json()["settings"]["within"] == "30d"
    with pytest.raises(Exception, match="--within"):
        ServeSettings(within="30 days").check()


def test_remote_index_asks_its_window(tmp_path: Path) -> None:
    with (
        live_server(
            str(tmp_path / "ix"),
            tmp_path / "serve.log",
            "--within",
            "60d",
            "--fingerprint-workers",
            "0",
        ) as server,  # fmt: skip
        RemoteIndex(server.url) as remote,
    ):
        remote.add("old", TEXT, time=NOW - 40 * DAY)
        assert [m.doc_id for m in remote.query(TEXT)] == ["old"]  # the service's 60d
        recent = remote.within(Window.last(30 * DAY * 1000))
        assert recent.query(TEXT).total == 0
        (found,) = recent.check_and_add_texts([("new", TEXT)], always=False)
        assert found.total == 0 and remote.get("new") is not None
        assert remote.within(None) is remote


def test_shdb_serve_within_is_checked_before_anything_starts(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simhash_hbase.cli.app import app

    out = CliRunner().invoke(app, ["serve", "-i", str(tmp_path / "ix"), "--within", "30"])
    assert out.exit_code == 2 and "--within '30': give a duration" in out.stderr
    assert not (tmp_path / "ix").exists()
