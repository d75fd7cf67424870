"""A ``--workers`` child that dies is an error naming the document it held; the
run stops cleanly (no hang) and a re-run resumes (issue 22.5).

Any death (SIGKILL as the OOM killer sends it, SIGSEGV, ``os._exit``, a
MemoryError), at any document of any batch, with any number of workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import WorkerDied
from simhash_hbase.jobs.ingest import IngestOptions, SourceOptions, ingest
from simhash_hbase.layout.prepare import Preparer, Prints

from .test_cli import shdb

POISON = "毒药"
DEATHS = ("sigkill", "sigsegv", "exit", "memory")


def _die(how: str) -> None:
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "sigsegv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif how == "exit":
        os._exit(3)
    else:
        raise MemoryError


@contextmanager
def _deadly(how: str) -> Iterator[None]:
    """Workers forked inside this die on a text holding POISON."""
    real = Preparer.prints

    def prints(self: Preparer, text: str) -> Prints:
        if os.getpid() != parent and POISON in text:
            _die(how)
        return real(self, text)

    parent = os.getpid()
    Preparer.prints = prints  # type: ignore[method-assign]
    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(120)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        Preparer.prints = real  # type: ignore[method-assign]


def _hang(*_: object) -> None:
    raise AssertionError("the run hung after a worker died")


def _corpus(path: Path, n: int, poison: int) -> list[str]:
    ids = [f"d{i}" for i in range(n)]
    rows = [
        {
            "id": d,
            "text": f"第{i}篇 海量文本去重 指纹编号{i * 7919}" + (POISON if i == poison else ""),
        }
        for i, d in enumerate(ids)
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return ids


@settings(max_examples=12)
@given(
    n=st.integers(5, 40),
    data=st.data(),
    how=st.sampled_from(DEATHS),
    workers=st.integers(2, 3),
    batch=st.integers(1, 7),
)
def test_a_dead_worker_names_its_document_and_a_rerun_resumes(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    data: st.DataObject,
    how: str,
    workers: int,
    batch: int,
) -> None:
    poison = data.draw(st.integers(0, n - 1))
    root = tmp_path_factory.mktemp("w")
    path = root / "in.jsonl"
    ids = _corpus(path, n, poison)
    options = IngestOptions(workers=workers, batch_size=batch)
    with SimhashIndex.open(str(root / "ix")) as index:
        with _deadly(how), pytest.raises(WorkerDied) as caught:
            ingest(index, [str(path)], SourceOptions(), options)
        message = str(caught.value)
        assert f"document 'd{poison}' ({path}:{poison + 1})" in message, message
        held = index.get_many(ids)
        assert set(held) == set(ids[: len(held)])  # whole batches before it, in order
        assert len(held) <= poison
        summary = ingest(index, [str(path)], SourceOptions(), options)  # the worker is healed
        assert summary.resumed_after == len(held)
        assert set(index.get_many(ids)) == set(ids)


def test_the_cli_says_which_document_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    _corpus(path, 30, 17)
    with _deadly("sigkill"):
        result = shdb(
            "ingest", str(path), "-i", str(tmp_path / "ix"), "--workers", "2", "--batch-size", "5"
        )
    assert result.exit_code == 2, result.output  # an error, after some batches were saved
    assert f"document 'd17' ({path}:18)" in result.stderr
    assert "was killed by SIGKILL" in result.stderr and "Traceback" not in result.stderr
    assert "hint: run the same command again to resume" in result.stderr
    assert "documents of the batches finished before it are saved" in result.stderr


_ORPHANS = """
import multiprocessing, sys, time
from simhash_hbase.fingerprint.workers import map_chunks

def nap(texts, seconds):
    time.sleep(seconds)
    return list(texts)

chunks = ((["x"], float(sys.argv[1])) for _ in range(10_000))
running = map_chunks(chunks, 3, lambda: None, nap)
next(running)
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("busy", [0.0, 1.0])
def test_workers_end_when_their_parent_is_killed(busy: float) -> None:
    """kill -9 of an ingest leaves no worker behind: every forked worker closes its
    copies of the parent's channel ends, so the parent's death ends each channel
    (before, each worker held the other end of its own channel and waited forever)."""
    import subprocess
    import sys
    import time

    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHANS, str(busy)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 3
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60  # a generous bound for a loaded machine
    try:
        while any(_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if _running(p)]
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
