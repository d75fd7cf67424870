"""A similarity users set (issue 41): one rule (MinHashParams.at_similarity) on every
surface (library, CLI, serve, Scrapy), validated, and a new index's default kept in
its manifest."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.fingerprint.minhash import (
    DEFAULT_FLOOR,
    DEFAULT_THRESHOLD,
    MinHashParams,
    check_similarity,
)
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.remote import RemoteIndex
from simhash_hbase.integrations.scrapy import PipelineSettings
from simhash_hbase.serve.app import create_app
from simhash_hbase.serve.settings import ServeSettings

from .test_cli import shdb
from .test_index import ARTICLE

with warnings.catch_warnings():  # starlette asks for httpx2 on newer releases
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

#: ARTICLE's first 70 %: estimated similarity 0.69 to ARTICLE, 11 bits away (the LSH
#: net's match alone): a match at 0.5 and 0.6, not at 0.8.
PART = ARTICLE[: int(len(ARTICLE) * 0.7)]


@given(st.floats(0.0, 1.0, exclude_min=True))
def test_similarity_replaces_threshold_and_the_floor_follows(s: float) -> None:
    lsh = MinHashParams().at_similarity(s)
    assert lsh.threshold == s
    assert lsh.floor == round(max(0.0, s - (DEFAULT_THRESHOLD - DEFAULT_FLOOR)), 4)
    assert lsh.floor <= lsh.threshold  # a valid MinHashParams
    assert MinHashParams().at_similarity(DEFAULT_THRESHOLD) == MinHashParams()  # today's rule


@given(
    st.one_of(
        st.floats().filter(lambda x: math.isnan(x) or not 0.0 < x <= 1.0),
        st.integers().filter(lambda x: x != 1),
        st.booleans(),
        st.text(),
        st.none(),
    )
)
def test_a_similarity_outside_0_1_is_refused_by_name(value: object) -> None:
    with pytest.raises(InvalidSetting, match=r"SHDB_X must be a number in \(0, 1\]"):
        check_similarity(value, "SHDB_X")


def test_library_judges_at_the_similarity_asked(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "ix")) as ix:
        ix.add("a", ARTICLE)
        assert [m.doc_id for m in ix.query(PART)] == ["a"]
        assert [m.doc_id for m in ix.at_similarity(0.6).query(PART)] == ["a"]
        assert ix.at_similarity(0.8).query(PART) == []
        assert ix.lsh == MinHashParams()  # a view: the index itself is unchanged
        found = ix.at_similarity(0.8).check_and_add_texts([("p", PART)], always=False)
        assert found[0].total == 0 and ix.get("p") is not None  # new at 0.8: written


def test_manifest_records_a_new_index_s_similarity(tmp_path: Path) -> None:
    url = str(tmp_path / "ix")
    with SimhashIndex.open(url, similarity=0.8) as ix:
        assert (ix.manifest["lsh"]["threshold"], ix.manifest["lsh"]["floor"]) == (0.8, 0.7)
        ix.add("a", ARTICLE)
    with SimhashIndex.open(url) as ix:  # round trip: the recorded default
        assert ix.lsh == MinHashParams().at_similarity(0.8)
        assert ix.query(PART) == []
    with SimhashIndex.open(url, similarity=0.5) as ix:  # this handle's, not recorded
        assert [m.doc_id for m in ix.query(PART)] == ["a"]
        assert ix.manifest["lsh"]["threshold"] == 0.8
    with SimhashIndex.open(str(tmp_path / "old")) as ix:  # no similarity: today's default
        assert ix.manifest["lsh"]["threshold"] == DEFAULT_THRESHOLD


def test_an_index_without_sketches_refuses_a_similarity(tmp_path: Path) -> None:
    with pytest.raises(InvalidSetting, match="pigeonhole net only"):
        SimhashIndex.open(str(tmp_path / "a"), nets="simhash", similarity=0.6)
    SimhashIndex.open(str(tmp_path / "b"), nets="simhash").close()
    with pytest.raises(InvalidSetting, match="no sketches"):
        SimhashIndex.open(str(tmp_path / "b"), similarity=0.6)


def test_cli_similarity_flag(tmp_path: Path) -> None:
    ix = str(tmp_path / "ix")
    corpus = tmp_path / "c.jsonl"
    rows = [{"id": "a", "text": ARTICLE}, {"id": "p", "text": PART}]
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    report = tmp_path / "r.jsonl"
    result = shdb("ingest", str(corpus), "-i", ix, "--similarity", "0.8", "--report", str(report))
    assert result.exit_code == 0, result.output
    assert report.read_text() == ""  # p is not a near-copy of a at 0.8
    assert "similarity >= 0.8" in result.stderr
    with SimhashIndex.open(ix) as opened:
        assert opened.manifest["lsh"]["threshold"] == 0.8  # the new index's default
    at_default = shdb("query", ARTICLE, "-i", ix, "--json")  # the index's: 0.8
    assert [m["id"] for m in json.loads(at_default.stdout)["matches"]] == ["a"]
    found = shdb("query", ARTICLE, "-i", ix, "--json", "--similarity", "0.6")
    assert [m["id"] for m in json.loads(found.stdout)["matches"]] == ["a", "p"]
    assert shdb("dedup", str(corpus), "--clusters").stdout.splitlines() == ['["a", "p"]']
    assert shdb("dedup", str(corpus), "--clusters", "--similarity", "0.8").stdout == ""


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "nan", "abc"])
def test_cli_similarity_errors(tmp_path: Path, value: str) -> None:
    ix = str(tmp_path / "ix")
    for command in (["query", "x", "-i", ix], ["dedup", "-"], ["ingest", "-", "-i", ix]):
        result = shdb(*command, "--similarity", value, stdin="")
        assert result.exit_code == 2
        assert "--similarity" in result.stderr
        if value != "abc":
            assert "must be a number in (0, 1]" in result.stderr
    assert not (tmp_path / "ix").exists()


def test_serve_similarity_parameter(tmp_path: Path) -> None:
    with TestClient(create_app(ServeSettings(index=str(tmp_path / "ix")))) as c:
        c.post("/v1/add", json={"id": "a", "text": ARTICLE})
        ids = [m["id"] for m in c.post("/v1/check", json={"text": PART}).json()["matches"]]
        assert ids == ["a"]
        assert c.post("/v1/check?similarity=0.8", json={"text": PART}).json()["total"] == 0
        new = c.post("/v1/check-and-add?similarity=0.8", json={"id": "p", "text": PART}).json()
        assert new["new"] is True
        for bad in ("0", "1.01", "nan", "x"):
            r = c.post(f"/v1/check?similarity={bad}", json={"text": PART})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_parameter"
            assert "must be a number in (0, 1]" in r.json()["error"]["message"]
    settings = ServeSettings(index=str(tmp_path / "ix"), similarity=0.8)
    with TestClient(create_app(settings)) as c:
        assert c.post("/v1/check", json={"text": PART}).json()["matches"][0]["id"] == "p"
        assert c.post("/v1/check?similarity=0.6", json={"text": PART}).json()["total"] == 2
        assert c.get("/v1/status").json()["settings"]["similarity"] == 0.8
    with pytest.raises(InvalidSetting):
        ServeSettings(similarity=0.0).check()


def test_serve_refuses_a_similarity_without_sketches(tmp_path: Path) -> None:
    SimhashIndex.open(str(tmp_path / "ix"), nets="simhash").close()
    with TestClient(create_app(ServeSettings(index=str(tmp_path / "ix")))) as c:
        r = c.post("/v1/check?similarity=0.6", json={"text": PART})
        assert r.status_code == 400 and "no sketches" in r.json()["error"]["message"]


def test_remote_and_scrapy_take_a_similarity() -> None:
    remote = RemoteIndex("http://127.0.0.1:1")
    assert remote.at_similarity(None) is remote
    with pytest.raises(InvalidSetting):
        remote.at_similarity(1.5)
    read = PipelineSettings.from_scrapy(
        get_crawler(settings_dict={"SHDB_INDEX": "x", "SHDB_SIMILARITY": "0.7"}).settings
    )
    assert read.similarity == 0.7
    for bad in ("0", 2, "many"):
        values = {"SHDB_INDEX": "x", "SHDB_SIMILARITY": bad}
        with pytest.raises(InvalidSetting, match="SHDB_SIMILARITY must be a number"):
            PipelineSettings.from_scrapy(get_crawler(settings_dict=values).settings)
