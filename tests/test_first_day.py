"""docs/first-day.md says what its commands do: its runnable blocks, run in order on a
copy of examples/ (as tests/test_docs.py runs every page's), print the query table the
page shows, write the report line it shows, and read the compressed feed as the plain
one. (test_docs.py checks each command exits 0; test_docs_python.py runs its Python.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .test_docs import BLOCK, INSTALL

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs/first-day.md"


def _untimed(path: Path) -> list[dict[str, object]]:
    """A report's lines without the matches' arrival times (each run's own; the page
    leaves them out)."""
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    for line in lines:
        for match in line["matches"]:
            match.pop("time", None)
    return lines


def test_the_first_day_page_shows_what_its_commands_print(tmp_path: Path) -> None:
    text = PAGE.read_text("utf-8")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SHDB_INDEX", None)
    shdb = f"{sys.executable} -m simhash_hbase"
    printed: dict[str, str] = {}
    for block in BLOCK.findall(text):
        for line in block.splitlines():
            command = INSTALL.sub("", line.strip())
            if not command or command.startswith("#"):
                continue
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", re.sub(r"^shdb\b", shdb, command)],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            printed[command] = done.stdout
    query = next(c for c in printed if c.startswith("shdb query"))
    table = re.search(r"```\n(distance\tsimilarity.*?)\n```", text, re.S)
    assert table is not None and printed[query].splitlines() == table[1].splitlines()
    shown = re.search(r"```\n(\{\"id\": .*?)\n```", text, re.S)
    assert shown is not None
    report = _untimed(tmp_path / "crawl-dups.jsonl")
    assert json.loads(shown[1]) in report and len(report) == 4
    assert _untimed(tmp_path / "feed-dups.jsonl") == report
    assert len((tmp_path / "warc-dups.jsonl").read_text("utf-8").splitlines()) == 3
