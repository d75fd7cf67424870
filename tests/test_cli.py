"""`shdb` through typer's CliRunner, on every store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase.cli.app import app

from .test_index import ARTICLE, OTHER

runner = CliRunner()


def shdb(*args: str, stdin: str | None = None):
    return runner.invoke(app, list(args), input=stdin, catch_exceptions=False)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": "a", "text": ARTICLE, "url": "http://a"},
        {"id": "b", "text": OTHER},
        {"id": "a-copy", "text": ARTICLE + "！"},
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def test_ingest_then_query(store_url: str, corpus: Path, tmp_path: Path) -> None:
    report = tmp_path / "dups.jsonl"
    result = shdb("ingest", "--create", str(corpus), "--index", store_url, "--report", str(report))
    assert result.exit_code == 0, result.output
    assert "added 3 documents, replaced 0, unchanged 0 (already held); skipped 0" in result.stderr
    assert (
        "1 of the new or changed documents have near-copies (a match: similarity >= 0.5 "
        "(without a sketch: distance <= 3 bits))" in result.stderr
    )
    (line,) = [json.loads(x) for x in report.read_text().splitlines()]
    assert (line["id"], line["total"], line["total_exact"]) == ("a-copy", 1, True)
    assert [(m["id"], m["distance"]) for m in line["matches"]] == [("a", 0)]
    result = shdb("query", ARTICLE, "--index", store_url, "--json")
    assert result.exit_code == 0
    assert [m["id"] for m in json.loads(result.stdout)["matches"]] == ["a", "a-copy"]
    result = shdb("query", "一段与索引中任何内容都无关的话，讲做饭。", "-i", store_url)
    assert result.exit_code == 1 and result.stdout == ""


def test_query_by_fingerprint_and_file(store_url: str, corpus: Path, tmp_path: Path) -> None:
    shdb("ingest", "--create", str(corpus), "-i", store_url)
    text_file = tmp_path / "q.txt"
    text_file.write_text(OTHER, encoding="utf-8")
    by_file = shdb("query", "--file", str(text_file), "-i", store_url)
    assert by_file.exit_code == 0 and by_file.stdout.endswith("\tb\n")
    header, row = by_file.stdout.splitlines()
    assert header == "distance\tsimilarity\tfingerprint\tid"
    fp = row.split("\t")[2]
    by_fp = shdb("query", "--fingerprint", fp, "-i", store_url, "-k", "0")
    # a fingerprint has no sketch: the same match, its similarity unknown
    assert by_fp.stdout == by_file.stdout.replace("\t1.0\t", "\t-\t")
    assert shdb("fingerprint", OTHER).stdout.strip() == fp


def test_skipped_records_exit_3_and_are_listed(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"id": "ok", "text": ARTICLE}, ensure_ascii=False)
        + "\n{oops\n"
        + json.dumps({"id": "e", "text": "   "})
        + "\n",
        encoding="utf-8",
    )
    result = shdb("ingest", "--create", str(path), "-i", store_url)
    assert result.exit_code == 3
    assert f"skipped {path}:2: malformed JSON" in result.stderr
    assert f"skipped {path}:3: document 'e' has no usable terms" in result.stderr
    assert shdb("get", "ok", "-i", store_url).exit_code == 0


def test_on_error_fail_stops_with_exit_2_after_writing_earlier_records(
    store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"id": "ok", "text": ARTICLE}, ensure_ascii=False)
        + "\n{oops\n"
        + json.dumps({"id": "later", "text": OTHER}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    result = shdb("ingest", "--create", str(path), "-i", store_url, "--on-error", "fail")
    assert result.exit_code == 2
    assert f"shdb: error: {path}:2: malformed JSON" in result.stderr
    assert shdb("get", "ok", "-i", store_url).exit_code == 0
    assert shdb("get", "later", "-i", store_url).exit_code == 1


def test_stats_remove_get(store_url: str, corpus: Path) -> None:
    shdb("ingest", "--create", str(corpus), "-i", store_url, "--store-text")
    stats = json.loads(shdb("stats", "-i", store_url, "--json").stdout)
    assert stats["documents"] == 3 and stats["index_cells"] == 3 * (10 + 25)
    got = json.loads(shdb("get", "a", "-i", store_url, "--json").stdout)
    assert got["text"] == ARTICLE and got["meta"] == {"url": "http://a"}
    assert shdb("remove", "a", "-i", store_url).exit_code == 0
    result = shdb("remove", "a", "nope", "-i", store_url)
    assert result.exit_code == 1 and "not found: a" in result.stderr


def test_stdin_ingest(store_url: str) -> None:
    line = json.dumps({"id": "s", "text": ARTICLE}, ensure_ascii=False)
    assert shdb("ingest", "--create", "-", "-i", store_url, stdin=line + "\n").exit_code == 0
    assert shdb("get", "s", "-i", store_url).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "x", "-k", "4"], "k=4 is out of range"),
        (["query", "--fingerprint", "xyz"], "not a 64-bit hex fingerprint"),
        (["ingest", "/no/such/file.txt"], "/no/such/file.txt: no such file"),
        (["ingest", "--format", "xml", "."], "unknown format 'xml'"),
        (["query", "x", "-i", "ftp://host/x"], "unknown scheme 'ftp'"),
        (["stats", "-i", "/no/such/index"], "no index at /no/such/index"),
    ],
)
def test_errors_exit_2_with_a_message(
    args: list[str], message: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shdb("ingest", "-", stdin=json.dumps({"id": "a", "text": ARTICLE}, ensure_ascii=False))
    result = shdb(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_index_defaults_to_env_then_local_folder(tmp_path: Path, corpus: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHDB_INDEX", raising=False)
    assert shdb("ingest", str(corpus)).exit_code == 0
    assert (tmp_path / "shdb-index" / "data.mdb").exists()
    monkeypatch.setenv("SHDB_INDEX", str(tmp_path / "other"))
    assert shdb("ingest", str(corpus)).exit_code == 0
    assert (tmp_path / "other" / "data.mdb").exists()


def test_manifest_mismatch_from_the_cli(tmp_path: Path, corpus: Path) -> None:
    index = str(tmp_path / "ix")
    assert shdb("ingest", str(corpus), "-i", index, "--scheme", "4x4").exit_code == 0
    result = shdb("ingest", str(corpus), "-i", index, "--top-n", "10")
    assert result.exit_code == 2 and "top_n: the index has 16, asked for 10" in result.stderr


def test_no_dedup_bulk_load_skips_the_lookups(tmp_path: Path, corpus: Path) -> None:
    report = tmp_path / "dups.jsonl"
    index = str(tmp_path / "ix")
    result = shdb("ingest", str(corpus), "-i", index, "--no-dedup", "--report", str(report))
    assert result.exit_code == 0
    assert "added 3 documents, replaced 0, unchanged 0 (already held); skipped 0" in result.stderr
    assert "near-copies" not in result.stderr
    assert report.read_text() == ""
    assert shdb("query", ARTICLE, "-i", index).stdout.count("\n") == 3  # header, both copies


def test_query_help_describes_every_column_of_its_table() -> None:
    text = " ".join(shdb("query", "--help").stdout.split())
    for column in ("distance (", "similarity (", "fingerprint and id"):
        assert column in text, text
