"""The fuzz targets (fuzz/targets.py, issue 22.8): the seeds pass every check, and
each target runs briefly under atheris (coverage-guided) when it is installed.

The long runs are documented in docs/fuzzing.md.
"""

from __future__ import annotations

import codecs
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "fuzz" / "seeds"
# A fixed seed and number of runs: the same inputs on every CI run, whatever the
# machine's speed (a time bound would make a finding depend on the load).
RUNS = int(os.environ.get("SHDB_FUZZ_RUNS", "4000"))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_the_seeds_pass_every_check(name: str) -> None:
    seeds = sorted((SEEDS / name).iterdir())
    assert seeds, f"no seeds for {name}"
    if name == "segmenters" and importlib.util.find_spec("rjieba") is None:
        pytest.skip("rjieba (the fast extra) is not installed")
    for seed in seeds:
        TARGETS[name](seed.read_bytes())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_target_runs_under_atheris(name: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        if os.environ.get("CI"):
            pytest.fail("atheris is not installed: CI installs the fuzz extra (scripts/test)")
        pytest.skip("atheris (the fuzz extra) is not installed")
    if name == "segmenters" and importlib.util.find_spec("rjieba") is None:
        pytest.skip("rjieba (the fast extra) is not installed")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in (SEEDS / name).iterdir():
        (corpus / seed.name).write_bytes(seed.read_bytes())
    run = subprocess.run(
        [sys.executable, "-m", "fuzz.run", name, "-seed=1", f"-runs={RUNS}",
         "-timeout=10", "-rss_limit_mb=2048", str(corpus)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Done" in run.stderr


_BOMS = st.sampled_from(
    [codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE]
)


@settings(max_examples=200, deadline=None)
@given(_BOMS, st.binary(max_size=64), st.sampled_from(["text", "jsonl", "csv", "fingerprints"]))
def test_finding_truncated_utf16_or_32_is_a_bad_record_not_a_crash(
    bom: bytes, body: bytes, name: str
) -> None:
    """The fuzzers' first findings: a UTF-16/32 stream whose last unit is cut (or any
    undecodable unit) raised UnicodeDecodeError out of the CSV and fingerprint readers."""
    TARGETS[name](bom + body)
