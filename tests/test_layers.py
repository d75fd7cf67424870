"""The package reads one way: imports between layers only go down (CONTRIBUTING.md).

Every module's imports are read with ``ast`` (inside functions and ``TYPE_CHECKING``
blocks too: a lazy import is still a dependency), resolved to the module they name,
and each module is placed in a layer by its path.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "simhash_hbase"

#: Bottom to top. A module may import its own layer and the layers below it.
#: The surfaces (spark, serve, integrations) do not import each other; the CLI
#: mounts them all. ``schema`` is data and ``_native`` the C kernels: anything may
#: use them, they import nothing of the package (layer-neutral).
LAYERS: list[tuple[str, ...]] = [
    ("schema", "_native"),
    ("errors", "faults", "records", "version"),
    ("text",),
    ("fingerprint",),
    ("layout",),
    ("store",),
    ("index",),
    ("jobs",),
    ("",),  # simhash_hbase/__init__.py: the public API
    ("spark", "serve", "integrations"),
    ("cli", "__main__"),
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
#: Parts of one layer that may still not import each other.
PEERS = {"spark", "serve", "integrations"}
#: Parts that import nothing of the package but themselves.
NEUTRAL = {"schema", "_native"}


def part_of(module: str) -> str:
    """The layer part of a dotted module name: its first name below the package."""
    if module == f"{PACKAGE}.schema" or module.startswith(f"{PACKAGE}.schema."):
        return "schema"
    rest = module.split(".")[1:]
    return rest[0] if rest else ""


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for the package under ``root`` and its ``schema/``."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    for path in sorted((root / "schema").glob("*.py")):
        stem = "" if path.stem == "__init__" else f".{path.stem}"
        found[f"{PACKAGE}.schema{stem}"] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """The package modules ``name`` imports, with their line numbers."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:  # `from pkg import submodule` names the submodule
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
    return [(line, target) for line, target in found if target.split(".")[0] == PACKAGE]


def violations(root: Path) -> list[str]:
    """Every import that goes up a layer or across peers, as ``file:line: a -> b``."""
    known = modules(root)
    wrong = []
    for name, path in known.items():
        here = part_of(name)
        for line, target in imports(name, path, set(known)):
            there = part_of(target)
            up = RANK[there] > RANK[here]
            across = here != there and {here, there} <= PEERS
            if up or across or (here in NEUTRAL and there != here):
                wrong.append(
                    f"{path.relative_to(root)}:{line}: {here or PACKAGE} -> {there or PACKAGE}"
                )
    return wrong


def cycles(root: Path) -> list[list[str]]:
    """Cycles in the graph of imports between parts (subpackages and base modules)."""
    known = modules(root)
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        here = part_of(name)
        for _, target in imports(name, path, set(known)):
            if part_of(target) != here:
                edges.setdefault(here, set()).add(part_of(target))
    found: list[list[str]] = []

    def walk(node: str, trail: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in trail:
                found.append([*trail[trail.index(nxt) :], nxt])
            elif len(trail) < len(RANK):
                walk(nxt, [*trail, nxt])

    for start in sorted(edges):
        walk(start, [start])
    return found


def test_every_module_is_in_a_layer() -> None:
    unplaced = sorted({part_of(name) for name in modules(ROOT)} - set(RANK))
    assert not unplaced, f"add {unplaced} to LAYERS here and to CONTRIBUTING.md's layer list"


def test_imports_only_go_down() -> None:
    assert violations(ROOT) == []


def test_no_import_cycle_between_subpackages() -> None:
    assert cycles(ROOT) == []


def test_every_package_folder_is_in_pyprojects_packages() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / PACKAGE).rglob("__init__.py")
    }
    assert folders <= listed, f"add {sorted(folders - listed)} to [tool.setuptools] packages"
    assert config["package-dir"][f"{PACKAGE}.schema"] == "schema" and f"{PACKAGE}.schema" in listed


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package tree under ``tmp_path`` with these files (and every ``__init__.py``)."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = path.parent
        while folder != tmp_path:
            (folder / "__init__.py").touch()
            folder = folder.parent
        path.write_text(text, "utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "text",
    [
        "from simhash_hbase.index.client import SimhashIndex\n",
        "import simhash_hbase.index.client\n",
        "from ..index import client\n",
        "def late():\n    from simhash_hbase.index import client\n",
        "from simhash_hbase import SimhashIndex\n",  # the public API sits above
    ],
)
def test_a_lower_layer_importing_an_upper_one_fails(tmp_path: Path, text: str) -> None:
    root = _package(
        tmp_path,
        {f"{PACKAGE}/index/client.py": "", f"{PACKAGE}/text/bad.py": text},
    )
    (line,) = violations(root)
    assert line.startswith(f"{PACKAGE}/text/bad.py:")
    assert line.endswith(("text -> index", f"text -> {PACKAGE}"))


def test_peers_importing_each_other_and_a_cycle_fail(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            f"{PACKAGE}/serve/app.py": "from simhash_hbase.spark import jobs\n",
            f"{PACKAGE}/spark/jobs.py": "",
            f"{PACKAGE}/text/a.py": "from simhash_hbase.fingerprint import b\n",
            f"{PACKAGE}/fingerprint/b.py": "from simhash_hbase.text import a\n",
        },
    )
    assert sorted(violations(root)) == [
        f"{PACKAGE}/serve/app.py:1: serve -> spark",
        f"{PACKAGE}/text/a.py:1: text -> fingerprint",
    ]
    assert ["fingerprint", "text", "fingerprint"] in cycles(root)


def test_schema_imports_nothing(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"schema/__init__.py": "from simhash_hbase import errors\n", f"{PACKAGE}/errors.py": ""},
    )
    assert violations(root) == ["schema/__init__.py:1: schema -> errors"]
