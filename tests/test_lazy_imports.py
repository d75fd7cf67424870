"""The import graph stays lazy: a one-shot ``shdb`` command pays only for what it uses.

Each check imports a module in a fresh interpreter and lists which heavy modules
came with it (``sys.modules``, not a timing: it cannot flake on a busy machine).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import simhash_hbase

#: Loaded only by the code that needs them: NumPy and mmh3 to fingerprint or
#: search, the segmenters to cut text, LMDB / Thrift / Spark to open a store or
#: run a job, typer / rich / pydantic for the command line.
HEAVY = (
    "numpy",
    "mmh3",
    "jieba",
    "rjieba",
    "opencc",
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


def _loaded_after(statement: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after running ``statement`` in a new process."""
    probe = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out))
    return [name for name in HEAVY if name in loaded]


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
    assert {"numpy", "mmh3"} <= set(loaded)
