"""Concurrent `shdb ingest` runs into one index (issue 42, deliverable 3): runs of
other inputs write at once, each planted pair reported once across their
reports, as one run would; runs of one input (one checkpoint) or naming one
report file take turns or are refused (docs/cli.md, "Ingest runs at once")."""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.app import app
from simhash_hbase.errors import IndexNotFound

from .conftest import HBASE_APIS, fresh_hbase_url

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SHDB = [sys.executable, "-m", "simhash_hbase"]
PAIRS = 120  # planted pairs, each split between two runs' inputs
DOCS = 8_000  # the input read twice at once: long enough to overlap a second start
STORES = ["embedded", pytest.param("hbase", marks=pytest.mark.hbase)]


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh index URL of each store (the HBase one only with the hbase marker)."""
    if request.param == "embedded":
        yield str(tmp_path / "ix")
        return
    with fresh_hbase_url(HBASE_APIS[0]) as hbase:
        yield hbase


def _inputs(tmp_path: Path, runs: int) -> tuple[list[Path], set[frozenset[str]]]:
    """``runs`` fingerprint files; each planted pair's original is in one and its
    copy (one bit away) in another, at the same place (both in flight at once),
    among unrelated random fingerprints; the planted pairs."""
    rng = random.Random(runs)
    lines: list[list[str]] = [[] for _ in range(runs)]
    for p in range(PAIRS):
        fp = rng.getrandbits(64)
        a, b = rng.sample(range(runs), 2)
        lines[a].append(f"p{p}a\t{fp:016x}\n")
        lines[b].append(f"p{p}b\t{fp ^ 1 << rng.randrange(64):016x}\n")
        for w in set(range(runs)) - {a, b}:
            lines[w].append(f"p{p}u{w}\t{rng.getrandbits(64):016x}\n")
    paths = []
    for w, text in enumerate(lines):
        path = tmp_path / f"in{w}.tsv"
        path.write_text("".join(text), encoding="utf-8")
        paths.append(path)
    return paths, {frozenset((f"p{p}a", f"p{p}b")) for p in range(PAIRS)}


def _ingest(source: Path, url: str, report: Path, *more: str) -> list[str]:
    return [*SHDB, "ingest", "--fingerprints", str(source), "-i", url, "--create",
            "--report", str(report), "--batch-size", "10", *more]  # fmt: skip


def _reported(reports: list[Path]) -> Counter[frozenset[str]]:
    """Each reported pair (a new document and a match) with how often it was reported."""
    return Counter(
        frozenset((found["id"], match["id"]))
        for report in reports
        for found in map(json.loads, report.read_text(encoding="utf-8").splitlines())
        for match in found["matches"]
    )


@pytest.mark.parametrize("runs", [2, 4])
def test_concurrent_ingest_runs_report_every_planted_pair_once(
    url: str, tmp_path: Path, runs: int
) -> None:
    """2 and 4 `shdb ingest` processes of other inputs into one index at once (main
    refused all but one with IndexBusy): every planted pair is in exactly one
    report, nothing else is, and `shdb verify` finds the index clean."""
    sources, planted = _inputs(tmp_path, runs)
    reports = [tmp_path / f"report{w}.jsonl" for w in range(runs)]
    procs = [
        subprocess.Popen(_ingest(s, url, r), env=ENV, cwd=ROOT, stderr=subprocess.PIPE)
        for s, r in zip(sources, reports)
    ]
    outcomes = [(p.wait(timeout=600), p.communicate()[1].decode()) for p in procs]
    assert [code for code, _ in outcomes] == [0] * runs, outcomes
    assert _reported(reports) == Counter(planted)
    verify = subprocess.run(
        [*SHDB, "verify", "-i", url, "--json"], env=ENV, cwd=ROOT, capture_output=True, timeout=600
    )
    assert verify.returncode == 0, verify.stderr.decode()
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        assert index.stats()["documents"] == PAIRS * runs


def test_the_same_input_twice_at_once_is_refused_or_waits(url: str, tmp_path: Path) -> None:
    """A run of the input a running ingest reads (its checkpoint) is refused with
    IndexBusy (exit 2) naming the first's pid and start time; with --wait it runs
    after the first, resuming nothing and reporting what a second run reports."""
    source = tmp_path / "in.tsv"
    rng = random.Random(3)
    source.write_text("".join(f"d{i}\t{rng.getrandbits(64):016x}\n" for i in range(DOCS)))
    first = subprocess.Popen(
        _ingest(source, url, tmp_path / "first.jsonl"), env=ENV, cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not _holds(url, "d0"):
            assert first.poll() is None and time.monotonic() < deadline, "no first batch"
            time.sleep(0.05)
        second = subprocess.run(
            _ingest(source, url, tmp_path / "second.jsonl"), env=ENV, cwd=ROOT,
            capture_output=True, timeout=300,
        )  # fmt: skip
        message = second.stderr.decode()
        assert first.poll() is None, "the first run ended before the second was refused"
        assert second.returncode == 2, message
        assert f"pid {first.pid}" in message and "started" in message and "shdb ingest" in message
        waited = subprocess.run(
            _ingest(source, url, tmp_path / "waited.jsonl", "--wait", "600"),
            env=ENV, cwd=ROOT, capture_output=True, timeout=900,
        )  # fmt: skip
        assert first.wait(timeout=600) == 0
        assert waited.returncode == 0, waited.stderr.decode()
    finally:
        first.kill()
        first.wait()
    assert (tmp_path / "waited.jsonl").read_text() == ""  # every document held already
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        assert index.stats()["documents"] == DOCS


def _holds(url: str, doc_id: str) -> bool:
    try:
        with SimhashIndex.open(url, create=False, readonly=True) as index:
            return index.get(doc_id) is not None
    except IndexNotFound:  # not yet created
        return False


def test_two_runs_naming_one_report_file_the_second_is_refused(tmp_path: Path) -> None:
    """Runs of other inputs share an index but not a report: while another run
    appends to the file (its ``flock``), an ingest naming it is refused before it
    writes a line, and the file is left as it was."""
    sources, _ = _inputs(tmp_path, 2)
    report, index = tmp_path / "report.jsonl", str(tmp_path / "ix")
    runner = CliRunner()
    args = ["ingest", "--fingerprints", "-i", index, "--report", str(report)]
    assert runner.invoke(app, [*args, str(sources[0])]).exit_code == 0
    held = report.read_bytes()
    with open(report, "ab") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run appending
        refused = runner.invoke(app, [*args, str(sources[1])])
    assert refused.exit_code == 2, refused.output
    assert "another running ingest appends to it" in refused.output
    assert report.read_bytes() == held
    assert runner.invoke(app, [*args, str(sources[1])]).exit_code == 0  # once it is free
    assert len(report.read_bytes()) > len(held)


OTHER = """
import sys
from simhash_hbase import SimhashIndex
from simhash_hbase.errors import StoreError
with SimhashIndex.open(sys.argv[1], create=False) as index:
    print("open", flush=True)
    sys.stdin.readline()
    try:
        index.add_fingerprint(sys.argv[2], 0x0123456789ABCDEF)
        print("written", flush=True)
    except StoreError as exc:
        print(exc, flush=True)
"""


def _other_writer(url: str, doc_id: str) -> subprocess.Popen[str]:
    """Another process with the index open, writing ``doc_id`` when told (a line)."""
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER, url, doc_id], env=ENV, cwd=ROOT, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert other.stdout is not None and other.stdout.readline() == "open\n"
    return other


def _write(other: subprocess.Popen[str]) -> str:
    out, _ = other.communicate("go\n", timeout=120)
    return out


def test_a_new_index_left_empty_is_discarded_only_if_no_other_writer_wrote(url: str) -> None:
    """The run that created an index and added nothing removes it (its manifest),
    deciding in the write section: a document another process wrote keeps it; a
    process that opened it before the removal is stopped at its next write (main
    decided under the whole-index run lock, which no longer serialises runs)."""
    with SimhashIndex.open(url) as creator:
        other = _other_writer(url, "late")
        assert creator.created and creator.discard()
        assert "was discarded as this run wrote" in _write(other)
    with SimhashIndex.open(url) as creator:  # the same place, new again
        assert creator.created
        assert _write(_other_writer(url, "kept")) == "written\n"
        assert not creator.discard()
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        assert index.get("kept") is not None and index.get("late") is None
