"""The documentation's Python runs: every ```python block of README.md and docs/*.md is
executed, a page's blocks in page order in one namespace, in a fresh folder holding a
copy of examples/, as a reader pasting them would. A doc example that breaks (a renamed
function, a changed result) fails here, not in a reader's hands.

- A block that cannot run here is skipped only with `<!-- not-run: WHY -->` on the line
  before it, and the skipped set is pinned (``EXPECTED_NOT_RUN``): none slips in silently.
- A comment `# prints: TEXT` in a block claims TEXT is a line that block prints; the
  claim is checked, so a result shown in the docs is what the code prints.
- serve.md's `RemoteIndex` example talks to a real `shdb serve` on an ephemeral port,
  its URL put in place of the one the page shows a user.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shutil
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: A fenced python block, possibly indented (inside a list item).
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)\n(?P=indent)```[ \t]*$", re.M | re.S
)
#: Any opening fence that looks like Python, so a block tagged oddly is not missed.
ANY_PYTHON_FENCE = re.compile(r"^[ \t]*```[ \t]*py", re.M)
NOT_RUN = re.compile(r"<!-- not-run: (?P<why>[^>]*?) -->[ \t]*\n[ \t]*\Z")
PRINTS = re.compile(r"#[ \t]*prints:[ \t]*(?P<line>.+?)[ \t]*$", re.M)

#: (page, block number) of every block skipped by a not-run marker: exactly these.
EXPECTED_NOT_RUN: frozenset[tuple[str, int]] = frozenset()
#: The fewest blocks a page holds: a page does not lose its examples unnoticed (a new
#: block, or a new page with blocks, is found and run without changing this).
MIN_BLOCKS = {
    "docs/first-day.md": 1,
    "docs/library.md": 2,
    "docs/nets.md": 2,
    "docs/scrapy.md": 5,
    "docs/serve.md": 1,
}
#: The service URL the serve page shows a user; the test's server takes its place.
SERVE_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Block:
    page: str
    number: int  # 1-based, in page order
    line: int  # the page's line of the block's first code line
    code: str
    not_run: str | None  # why, when marked not-run

    def compiled(self, substitutions: dict[str, str]) -> Any:
        """The block's code, compiled so that a traceback names the page and its line."""
        code = self.code
        for shown, actual in substitutions.items():
            code = code.replace(shown, actual)
        return compile("\n" * (self.line - 1) + code, f"{self.page}", "exec")


def python_blocks(page: str, text: str) -> list[Block]:
    """Every ```python block of a page's text, in order."""
    blocks = []
    for number, m in enumerate(FENCE.finditer(text), 1):
        marker = NOT_RUN.search(text, 0, m.start())
        line = text.count("\n", 0, m.start("body")) + 1
        code = textwrap.dedent(m["body"])
        blocks.append(Block(page, number, line, code, marker["why"] if marker else None))
    return blocks


def page_blocks() -> dict[str, list[Block]]:
    found = {}
    for path in PAGES:
        page = path.relative_to(ROOT).as_posix()
        blocks = python_blocks(page, path.read_text("utf-8"))
        if blocks:
            found[page] = blocks
    return found


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """``contextlib.chdir`` (Python 3.11) for 3.10."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_blocks(
    blocks: list[Block], folder: Path, substitutions: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a page's blocks in order, in one namespace, in ``folder``; check each
    block's ``# prints:`` claims against what it printed; return the namespace."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    with _inside(folder):
        for block in blocks:
            if block.not_run is not None:
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(block.compiled(substitutions or {}), namespace)
            printed = [line.strip() for line in out.getvalue().splitlines()]
            for claim in PRINTS.findall(block.code):
                assert claim in printed, (
                    f"{block.page}, block {block.number} (line {block.line}) claims it "
                    f"prints\n  {claim}\nbut printed\n  " + "\n  ".join(printed)
                )
    return namespace


@pytest.fixture
def examples_folder(tmp_path: Path) -> Path:
    """A fresh folder holding a copy of examples/, as on a fresh clone."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


@pytest.fixture
def serve_url(tmp_path: Path) -> Iterator[str]:
    """A real `shdb serve` on an ephemeral port (never a fixed one) over a new index."""
    pytest.importorskip("uvicorn", reason="the serve extra: pip install -e '.[serve]'")
    from tests.serve_server import live_server

    with live_server(
        str(tmp_path / "served-index"), tmp_path / "serve.log", "--fingerprint-workers", "1"
    ) as server:
        yield server.url


def check_scrapy_settings(namespace: dict[str, Any]) -> None:
    """The settings fragments name real settings and classes that import."""
    from scrapy.settings import default_settings

    from simhash_hbase.integrations.scrapy import SETTINGS

    for name, value in namespace.items():
        if not name.isupper():
            continue
        if name.startswith("SHDB_"):
            assert name in SETTINGS, f"scrapy.md: {name} is no setting of the pipeline"
        else:
            assert hasattr(default_settings, name), f"scrapy.md: {name} is no Scrapy setting"
        if isinstance(value, dict):
            for dotted in value:
                module, _, attr = dotted.rpartition(".")
                assert hasattr(importlib.import_module(module), attr), f"scrapy.md: {dotted}"


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {"docs/scrapy.md": check_scrapy_settings}


def test_every_python_block_is_found_and_the_skipped_ones_are_pinned() -> None:
    """No oddly fenced block escapes the runner, and no not-run marker comes silently."""
    found = page_blocks()
    for path in PAGES:
        page = path.relative_to(ROOT).as_posix()
        text = path.read_text("utf-8")
        blocks = found.get(page, [])
        assert len(ANY_PYTHON_FENCE.findall(text)) == len(blocks), f"{page}: a block missed"
        markers = text.count("<!-- not-run:")
        assert markers == sum(b.not_run is not None for b in blocks), (
            f"{page}: a not-run marker that is not on the line before a python block"
        )
    for page, fewest in MIN_BLOCKS.items():
        assert len(found.get(page, [])) >= fewest, f"{page} lost python examples"
    not_run = {(b.page, b.number) for blocks in found.values() for b in blocks if b.not_run}
    assert not_run == EXPECTED_NOT_RUN
    assert all(b.not_run.strip() for blocks in found.values() for b in blocks if b.not_run)


@pytest.mark.parametrize("page", sorted(page_blocks()))
def test_the_python_of_each_page_runs(
    page: str, examples_folder: Path, request: pytest.FixtureRequest
) -> None:
    blocks = page_blocks()[page]
    substitutions = {}
    if any(SERVE_URL in b.code for b in blocks):
        substitutions[SERVE_URL] = request.getfixturevalue("serve_url")
    if page == "docs/scrapy.md":
        pytest.importorskip("scrapy", reason="the scrapy extra: pip install -e '.[scrapy]'")
    namespace = run_blocks(blocks, examples_folder, substitutions)
    if page in CHECKS:
        CHECKS[page](namespace)


def test_serve_page_shows_a_users_url_and_runs_on_the_tests_server() -> None:
    """The URL substituted is the one the page shows (port 8080, serve's default)."""
    assert any(SERVE_URL in b.code for b in page_blocks()["docs/serve.md"])


def test_a_broken_example_fails(examples_folder: Path) -> None:
    """A renamed function, and a result that is not what the page claims, both fail."""
    text = (ROOT / "docs/library.md").read_text("utf-8")
    renamed = text.replace("IngestOptions, index_records", "IngestOptions, index_recs")
    assert renamed != text
    with pytest.raises(ImportError):
        run_blocks(python_blocks("docs/library.md", renamed), examples_folder)
    wrong = python_blocks("t.md", '```python\nprint("a")   # prints: b\n```\n')
    with pytest.raises(AssertionError, match="claims it prints"):
        run_blocks(wrong, examples_folder)
    marked = python_blocks("t.md", "<!-- not-run: needs HBase -->\n```python\n1 / 0\n```\n")
    assert marked[0].not_run == "needs HBase"
    run_blocks(marked, examples_folder)
