"""The import graph stays lazy: a one-shot ``shdb`` command pays only for what it uses.

Each check imports a module in a fresh interpreter and lists which heavy modules
came with it (``sys.modules``, not a timing: it cannot flake on a busy machine).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import simhash_hbase
from simhash_hbase import _native as native

#: Loaded only by the code that needs them: NumPy and mmh3 to fingerprint or
#: search, the segmenters to cut text, LMDB / Thrift / Spark to open a store or
#: run a job, typer / rich / pydantic for the command line.
HEAVY = (
    "numpy",
    "mmh3",
    "jieba",
    "rjieba",
    "opencc",
    "regex",
    "lmdb",
    "thriftpy2",
    "happybase",
    "pyspark",
    "multiprocessing",
    "typer",
    "rich",
    "pydantic",
)

#: The modules whose names (settings, defaults, value types, errors) a command line
#: or a service reads before it knows whether it will fingerprint anything.
LIGHT = (
    "simhash_hbase",
    "simhash_hbase.errors",
    "simhash_hbase.records",
    "simhash_hbase.fingerprint.simhash",
    "simhash_hbase.fingerprint.segment",
    "simhash_hbase.fingerprint.probes",
    "simhash_hbase.fingerprint.idf",
    "simhash_hbase.layout.scheme",
)


def _loaded_after(statement: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """Those of ``heavy`` in ``sys.modules`` after running ``statement`` in a new process."""
    probe = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    return [name for name in heavy if name in loaded]


@pytest.mark.parametrize("module", LIGHT)
def test_light_modules_import_nothing_heavy(module: str) -> None:
    assert _loaded_after(f"import {module}") == []


def test_public_names_resolve_on_first_use() -> None:
    assert _loaded_after("from simhash_hbase import Match, ShdbError, FingerprintParams") == []
    for name in simhash_hbase.__all__:
        assert getattr(simhash_hbase, name) is not None
    assert set(dir(simhash_hbase)) >= set(simhash_hbase.__all__)


def test_unknown_public_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        simhash_hbase.no_such_name  # noqa: B018


def test_fingerprinting_loads_what_it_needs() -> None:
    """The check above is not vacuous: the same probe sees NumPy once a text is
    fingerprinted."""
    loaded = _loaded_after(
        "from simhash_hbase import Fingerprinter\nFingerprinter().fingerprint('今天天气很好')"
    )
    # mmh3 hashes on the pure-Python path only; the C path hashes itself (_native)
    hashing = set() if native.module() is not None else {"mmh3"}
    assert {"numpy", *hashing} <= set(loaded)


@pytest.mark.parametrize("module", ["simhash_hbase.cli", "simhash_hbase.cli.app"])
def test_the_command_line_imports_no_library_work(module: str) -> None:
    """Commands load when they run: importing the command line costs typer alone."""
    assert _loaded_after(f"import {module}", tuple(h for h in HEAVY if h != "typer")) == []


def _run_shdb(*argv: str) -> str:
    """A statement running ``shdb ARGV`` in-process (its exit is not the probe's)."""
    return (
        f"sys.argv = ['shdb', *{list(argv)!r}]\n"
        "from simhash_hbase.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )


def test_a_query_loads_only_what_a_query_needs(tmp_path: Path) -> None:
    from simhash_hbase import SimhashIndex

    index = str(tmp_path / "ix")
    with SimhashIndex.open(index) as ix:
        ix.add("d1", "今天天气很好，我们去公园散步吧。")
    other_commands = (
        "simhash_hbase.jobs.ingest",
        "simhash_hbase.jobs.verify",
        "simhash_hbase.cli.ingest",
        "simhash_hbase.cli.dedup",
        "simhash_hbase.cli.spark",
        "simhash_hbase.cli.serve",
        "simhash_hbase.spark",
        "simhash_hbase.serve",
        "pyspark",
        "happybase",
        "thriftpy2",
        "multiprocessing",
        "rich",
        "pydantic",
    )
    if importlib.util.find_spec("rjieba") is not None:
        other_commands += ("jieba",)  # rjieba cuts it: jieba only for what it alone cuts alike
        # rjieba's package builds the whole dictionary at import: a query needs its words only
        other_commands += ("rjieba",)
    for text in ("今天天气很好，我们去公园散步吧。", "毫不相干的另一段文字"):  # a match, none
        argv = ("query", text, "--index", index)
        assert _loaded_after(_run_shdb(*argv), other_commands) == [], text
    assert _loaded_after(_run_shdb(*argv), ("numpy", "lmdb")) == ["numpy", "lmdb"]  # it ran
