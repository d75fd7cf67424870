"""Reports and checkpoints are part of the commit protocol (issue 22.2).

A run is stopped at every commit boundary of every batch: killed (SIGKILL, through
the ``SHDB_FAULT`` crash points of :mod:`simhash_hbase.jobs.checkpoint`), interrupted
(Ctrl-C), its report's disk full (ENOSPC, half a write done) or its pipe closed.
At the stop, every report line names documents the index holds; after a re-run,
the report is exactly the one an uninterrupted run writes, and a further re-run
keeps it whole. The checks read ids from any JSON shape, so they hold whatever
a report line looks like.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from simhash_hbase import SimhashIndex
from simhash_hbase.cli.ingest import JsonlReport
from simhash_hbase.jobs import checkpoint as checkpoint_mod
from simhash_hbase.jobs.ingest import IngestOptions, SourceOptions, ingest

from .conftest import fresh_hbase_url
from .test_cli import shdb

ROOT = Path(__file__).resolve().parents[1]
POINTS = ("prepared", "written", "reported", "saved")
BATCH = 10
BATCHES = 4


def _ids(value: Any) -> Iterator[str]:
    """Every id a report line names (keys ``id``/``near_id``, at any depth)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("id", "near_id") and isinstance(item, str):
                yield item
            else:
                yield from _ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _ids(item)


def _corpus(path: Path, seed: int = 7) -> list[str]:
    """Fingerprint lines: groups of near-copies spread over all batches, so pairs
    fall inside batches and across them."""
    rng = random.Random(seed)
    bases = [rng.getrandbits(64) for _ in range(8)]
    lines, ids = [], []
    for i in range(BATCH * BATCHES):
        fp = bases[i % len(bases)] ^ (1 << rng.randrange(64) if i >= len(bases) else 0)
        ids.append(f"d{i:03d}")
        lines.append(f"{ids[-1]}\t{fp:016x}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ids


def _run(corpus: Path, index: Path | str, report: Path, fault: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SHDB_FAULT", None)
    if fault is not None:
        env["SHDB_FAULT"] = fault
    args = [sys.executable, "-m", "simhash_hbase", "ingest", "--fingerprints", str(corpus)]
    args += ["-i", str(index), "--create", "--report", str(report), "--batch-size", str(BATCH)]
    return subprocess.run(args, env=env, capture_output=True, timeout=120, cwd=ROOT).returncode


def _lines(report: Path) -> list[str]:
    """The report's lines, each match's arrival time left out: a run and its
    resumption store the same documents at different moments."""
    lines = report.read_text(encoding="utf-8").splitlines() if report.exists() else []
    return [_TIME.sub("", line) for line in lines]


_TIME = re.compile(r', "time": (null|"[^"]*")')


def _assert_committed(index: Path | str, lines: Sequence[str]) -> None:
    named = {i for line in lines for i in _ids(json.loads(line))}
    if not named:
        return
    with SimhashIndex.open(str(index), create=False, readonly=True) as ix:
        held = set(ix.get_many(sorted(named)))
    assert named <= held, f"report names uncommitted documents: {sorted(named - held)}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("reference")
    corpus = root / "fps.tsv"
    _corpus(corpus)
    report = root / "report.jsonl"
    assert _run(corpus, root / "ix", report, None) == 0
    lines = _lines(report)
    assert len(lines) > BATCHES  # pairs in every batch, and across batches
    return corpus, lines


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_every_commit_boundary_loses_and_repeats_nothing(
    point: str, reference: tuple[Path, list[str]], tmp_path: Path
) -> None:
    corpus, expected = reference
    for nth in range(1, BATCHES + 1):
        index, report = tmp_path / f"ix{nth}", tmp_path / f"r{nth}.jsonl"
        code = _run(corpus, index, report, f"{point}:{nth}")
        assert code == -9, (point, nth, code)  # killed there: every batch has pairs
        _assert_committed(index, _lines(report))
        assert _run(corpus, index, report, None) == 0
        assert _lines(report) == expected, (point, nth)
        assert _run(corpus, index, report, None) == 0  # a finished ingest again: kept whole
        assert _lines(report) == expected


@pytest.mark.hbase
@pytest.mark.parametrize("point", POINTS)
def test_kill_at_a_commit_boundary_on_hbase(
    point: str, reference: tuple[Path, list[str]], tmp_path: Path, hbase_api: str
) -> None:
    """HBase is atomic per row only: a batch killed anywhere is written again whole."""
    corpus, expected = reference
    with fresh_hbase_url(hbase_api) as url:
        report = tmp_path / "r.jsonl"
        assert _run(corpus, url, report, f"{point}:2") == -9
        _assert_committed(url, _lines(report))
        assert _run(corpus, url, report, None) == 0
        assert _lines(report) == expected


def test_kill_twice_in_a_row_then_resume(reference: tuple[Path, list[str]], tmp_path: Path) -> None:
    corpus, expected = reference
    index, report = tmp_path / "ix", tmp_path / "r.jsonl"
    assert _run(corpus, index, report, "written:2") == -9
    assert _run(corpus, index, report, "reported:1") == -9  # dies re-emitting the pending batch
    _assert_committed(index, _lines(report))
    assert _run(corpus, index, report, None) == 0
    assert _lines(report) == expected


class _Stop(BaseException):
    """What Ctrl-C does to a run: an exception that unwinds it anywhere."""


class _FailingReport(JsonlReport):
    """A report whose disk fills up on the ``nth`` append, after half its bytes."""

    def __init__(self, path: str, nth: int) -> None:
        super().__init__(path)
        self.nth = nth

    def append(self, lines: Sequence[str]) -> int:
        if lines:
            self.nth -= 1
            if self.nth == 0:
                half = "".join(f"{line}\n" for line in lines).encode()[: len(lines) * 20]
                self._file.write(half)
                self._file.flush()
                raise OSError(errno.ENOSPC, "No space left on device")
        return super().append(lines)


def _ingest(corpus: Path, index: Path, report: JsonlReport) -> None:
    try:
        with SimhashIndex.open(str(index)) as ix:
            ingest(
                ix,
                [str(corpus)],
                SourceOptions(),
                IngestOptions(batch_size=BATCH),
                fingerprints=True,
                report=report,
            )
    finally:
        report.close()


@pytest.mark.parametrize("point", POINTS)
def test_ctrl_c_at_every_commit_boundary(
    point: str,
    reference: tuple[Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus, expected = reference
    for nth in range(1, BATCHES + 1):
        index, report = tmp_path / f"ix{nth}", tmp_path / f"r{nth}.jsonl"
        hits = iter(range(1, 10_000))

        def stop(name: str, nth: int = nth, hits: Iterator[int] = hits) -> None:
            if name == point and next(hits) == nth:
                raise _Stop

        monkeypatch.setattr(checkpoint_mod, "fault", stop)
        with pytest.raises(_Stop):
            _ingest(corpus, index, JsonlReport(str(report)))
        _assert_committed(index, _lines(report))
        monkeypatch.setattr(checkpoint_mod, "fault", lambda name: None)
        _ingest(corpus, index, JsonlReport(str(report)))
        assert _lines(report) == expected, (point, nth)


@pytest.mark.parametrize("nth", range(1, BATCHES + 1))
def test_full_disk_while_reporting(
    nth: int, reference: tuple[Path, list[str]], tmp_path: Path
) -> None:
    corpus, expected = reference
    index, report = tmp_path / "ix", tmp_path / "r.jsonl"
    with pytest.raises(OSError, match="No space left"):
        _ingest(corpus, index, _FailingReport(str(report), nth))
    _ingest(corpus, index, JsonlReport(str(report)))
    assert _lines(report) == expected


def test_closed_pipe_prints_only_committed_pairs(
    reference: tuple[Path, list[str]], tmp_path: Path
) -> None:
    corpus, expected = reference
    index = tmp_path / "ix"
    shell = (
        f"{sys.executable} -m simhash_hbase ingest --fingerprints {corpus} -i {index} "
        f"--batch-size {BATCH} --report - | head -1"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        shell, shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120, env=env
    )
    assert [_TIME.sub("", line) for line in proc.stdout.splitlines()] == expected[:1]
    _assert_committed(index, proc.stdout.splitlines())
    report = tmp_path / "r.jsonl"
    assert _run(corpus, index, report, None) == 0  # resumes; the rest of the pairs follow
    assert set(_lines(report)) <= set(expected)


def test_text_ingest_killed_after_a_commit_resumes_its_report(tmp_path: Path) -> None:
    corpus = tmp_path / "in.jsonl"
    rows = [
        {"id": f"t{i}", "text": f"第{i % 5}篇 海量文本去重 指纹编号{(i % 5) * 7919} 抽屉原理"}
        for i in range(30)
    ]
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    clean, clean_report = tmp_path / "clean", tmp_path / "clean.jsonl"
    assert (
        shdb(
            "ingest",
            str(corpus),
            "-i",
            str(clean),
            "--report",
            str(clean_report),
            "--batch-size",
            "10",
        ).exit_code
        == 0
    )
    index, report = tmp_path / "ix", tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHDB_FAULT": "written:2"}
    args = [sys.executable, "-m", "simhash_hbase", "ingest", str(corpus), "-i", str(index)]
    args += ["--report", str(report), "--batch-size", "10"]
    assert subprocess.run(args, env=env, capture_output=True, timeout=120).returncode == -9
    _assert_committed(index, _lines(report))
    env.pop("SHDB_FAULT")
    assert subprocess.run(args, env=env, capture_output=True, timeout=120).returncode == 0
    assert _lines(report) == _lines(clean_report)


@pytest.mark.parametrize(
    "target",
    ["{ix}/data.mdb", "{ix}/lock.mdb", "{ix}/new.jsonl", "{ix}/../ix/data.mdb", "link", "input"],
)
@pytest.mark.parametrize("url", ["{ix}", "file://{ix}"])
def test_report_into_the_index_or_an_input_is_refused(
    target: str, url: str, reference: tuple[Path, list[str]], tmp_path: Path
) -> None:
    corpus, _ = reference
    ix = tmp_path / "ix"
    assert _run(corpus, ix, tmp_path / "first.jsonl", None) == 0
    before = (ix / "data.mdb").read_bytes()
    (tmp_path / "link").symlink_to(ix / "data.mdb")
    path = {"link": str(tmp_path / "link"), "input": str(corpus)}.get(target) or target.format(
        ix=ix
    )
    result = shdb(
        "ingest",
        "--create",
        "--fingerprints",
        str(corpus),
        "-i",
        url.format(ix=ix),
        "--report",
        path,
    )
    assert result.exit_code == 2, result.output
    assert "index folder" in result.stderr or "is also an input" in result.stderr
    assert (ix / "data.mdb").read_bytes() == before
    with SimhashIndex.open(str(ix), create=False, readonly=True) as index:
        assert index.stats()["documents"] == BATCH * BATCHES
