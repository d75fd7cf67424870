"""The documentation runs: every command in a block marked ``<!-- runnable -->`` in the
README or docs/ runs on the shipped examples/ corpus, the option reference is what
the CLI prints, and the site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable -->"
BLOCK = re.compile(re.escape(MARK) + r"\n```[a-z]*\n(.*?)\n```", re.S)
#: The one step a test cannot take: installing the project (it is installed already).
INSTALL = re.compile(r"^pip install [^&]*&& ")


def runnable_commands() -> list[tuple[str, str]]:
    """(page, command) for every line of every runnable block, in page order."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in BLOCK.findall(page.read_text("utf-8")):
            for line in block.splitlines():
                command = INSTALL.sub("", line.strip())
                if command and not command.startswith("#"):
                    found.append((page.relative_to(ROOT).as_posix(), command))
    return found


def test_the_quick_start_is_marked_runnable() -> None:
    readme = [c for page, c in runnable_commands() if page == "README.md"]
    assert any(c.startswith("shdb ingest examples/corpus") for c in readme), readme
    assert len(readme) >= 5, readme


def test_every_runnable_command_runs_on_the_examples(tmp_path: Path) -> None:
    """In a fresh folder holding a copy of examples/, as a user on a fresh clone would;
    `shdb` is this tree's (a shim on PATH), each command in page order, exit 0."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "shdb"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m simhash_hbase "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("SHDB_INDEX", None)
    for page, command in runnable_commands():
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{page}: {command}\n{result.stdout}\n{result.stderr}"


def test_the_option_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts/cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs/cli-reference.md").read_text("utf-8")
    assert committed == module.reference(), (
        "regenerate: python scripts/cli_reference.py > docs/cli-reference.md"
    )


def test_the_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


def test_everyday_use_after_the_quick_start_reports_or_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README in order: the quick start's ingest, then "Everyday use"'s ingest
    with --report dups.jsonl. The documents are all held by then, unchanged: the
    report is empty, and the summary says why and where the near-copies are."""
    from typer.testing import CliRunner

    from simhash_hbase.cli.app import app

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHDB_INDEX", raising=False)
    readme = [c for page, c in runnable_commands() if page == "README.md"]
    first = readme[0].split(" && ")[0]
    everyday = next(c for c in readme if "--report dups.jsonl" in c)
    for command in (first, everyday):
        args = shlex.split(command, comments=True)
        assert args[0] == "shdb", command
        result = CliRunner().invoke(app, args[1:], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    held = len(list((tmp_path / "examples" / "corpus").iterdir()))
    if not (tmp_path / "dups.jsonl").read_text("utf-8"):
        assert f"unchanged {held} (already held)" in result.stderr, result.stderr
        assert "are not reported again" in result.stderr
        assert "`shdb dedup examples/corpus` lists every near-copy pair" in result.stderr
