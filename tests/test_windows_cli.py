"""The window's doors: `shdb query`, `ingest --report` and `dedup` take --within,
--since and --until (parsed once: simhash_hbase.layout.window), and say a bad one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app
from simhash_hbase.records import now_ms, time_to_text

from .test_index import ARTICLE

runner = CliRunner()
DAY_S = 86_400
NOW_S = now_ms() // 1000
COPY = ARTICLE.replace("。", "！", 1)


def shdb(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), catch_exceptions=False)


def _jsonl(path: Path, rows: list[tuple[str, str, int]]) -> str:
    lines = [json.dumps({"id": i, "text": t, "at": at}, ensure_ascii=False) for i, t, at in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def feed(tmp_path: Path) -> str:
    """An index of one article that arrived 40 days ago and a copy 10 days ago."""
    url = str(tmp_path / "index")
    old = [("old", ARTICLE, NOW_S - 40 * DAY_S), ("recent", ARTICLE, NOW_S - 10 * DAY_S)]
    done = shdb("ingest", _jsonl(tmp_path / "feed.jsonl", old), "-i", url, "--time-field", "at")
    assert done.exit_code == 0, done.output
    return url


@pytest.mark.parametrize(
    ("flags", "ids"),
    [
        ([], ["old", "recent"]),
        (["--within", "30d"], ["recent"]),
        (["--within", "60d"], ["old", "recent"]),
        (["--within", "1w"], []),
        (["--since", str(NOW_S - 20 * DAY_S)], ["recent"]),
        (["--until", time_to_text((NOW_S - 20 * DAY_S) * 1000) or ""], ["old"]),
        (["--since", str(NOW_S - 50 * DAY_S), "--until", str(NOW_S - 20 * DAY_S)], ["old"]),
        (["--within", "30d", "--until", str(NOW_S - 20 * DAY_S)], []),
    ],
)
def test_query_in_a_window(feed: str, flags: list[str], ids: list[str]) -> None:
    out = shdb("query", COPY, "--json", "-i", feed, *flags)
    found = json.loads(out.stdout)
    assert sorted(m["id"] for m in found["matches"]) == ids and found["total"] == len(ids)
    assert out.exit_code == (0 if ids else 1)
    if ids:  # a fingerprint's lookup takes the window too
        fp = found["matches"][0]["fingerprint"]
        by_fp = json.loads(shdb("query", "--fingerprint", fp, "--json", "-i", feed, *flags).stdout)
        assert sorted(m["id"] for m in by_fp["matches"]) == ids


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--within", "30"], "--within '30': give a duration"),
        (["--within", "30y"], "e.g. 30d, 12h, 2w"),
        (["--within", "0d"], "a whole number over 0"),
        (["--within", "1d", "--since", "0"], "give --within or --since, not both"),
        (["--since", "yesterday"], "--since: time 'yesterday' is neither RFC 3339"),
        (["--until", "2026-11-29"], "--until: time '2026-11-29' is neither RFC 3339"),
        (["--since", "2000", "--until", "1000"], "is not before --until"),
    ],
)
def test_bad_windows_are_usage_errors(feed: str, flags: list[str], said: str) -> None:
    for command in (["query", COPY], ["ingest", "-", "--report", "-"], ["dedup", "-"]):
        out = (
            shdb(*command, "-i", feed, *flags) if command[0] != "dedup" else shdb(*command, *flags)
        )
        assert out.exit_code == 2, out.output
        assert said in " ".join(out.stderr.split()), out.stderr


def test_ingest_report_in_a_window(feed: str, tmp_path: Path) -> None:
    """The held copy from 40 days ago is outside --within 30d, the one from 10 days
    ago inside; a copy earlier in the run counts (it is now)."""
    rows = [("new-1", COPY, NOW_S), ("new-2", COPY + "！", NOW_S)]
    path = _jsonl(tmp_path / "today.jsonl", rows)
    report = tmp_path / "dups.jsonl"
    out = shdb("ingest", path, "-i", feed, "--report", str(report), "--within", "30d")
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in report.read_text("utf-8").splitlines()]
    assert [(r["id"], sorted(m["id"] for m in r["matches"])) for r in lines] == [
        ("new-1", ["recent"]),
        ("new-2", ["new-1", "recent"]),
    ]


def test_dedup_in_a_window_keeps_the_inputs_inside(tmp_path: Path) -> None:
    rows = [
        ("a", ARTICLE, NOW_S - 40 * DAY_S),
        ("b", ARTICLE, NOW_S - 10 * DAY_S),
        ("c", COPY, NOW_S - DAY_S),
    ]
    path = _jsonl(tmp_path / "in.jsonl", rows)
    every = shdb("dedup", path, "--time-field", "at")
    assert [json.loads(line)["id"] for line in every.stdout.splitlines()] == ["b", "c"]
    out = shdb("dedup", path, "--time-field", "at", "--within", "30d", "--json")
    assert out.exit_code == 0, out.output
    (line,) = out.stdout.splitlines()
    assert json.loads(line)["id"] == "c" and [m["id"] for m in json.loads(line)["matches"]] == ["b"]
    assert json.loads(out.stderr.splitlines()[0])["outside"] == 1
    plain = shdb("dedup", path, "--time-field", "at", "--since", str(NOW_S - 5 * DAY_S))
    assert plain.stdout == "" and "1 more outside the window" not in plain.stderr
    assert "2 more outside the window, left out" in plain.stderr
    untimed = shdb("dedup", path, "--within", "30d")
    assert untimed.exit_code == 2 and "--time-field" in untimed.stderr
