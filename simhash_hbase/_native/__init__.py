"""The C fast path of a fingerprint (``_native.c``), or the pure-Python one.

The extension is compiled at install (setup.py, optional: without a compiler the
install goes on). It does the per-token work, where Python spends most of a
fingerprint beyond rjieba's own cut: the corrections of rjieba's tokens
(:func:`simhash_hbase.fingerprint.segment._fast_py`) and token -> term -> count ->
weight -> top-N (:meth:`~simhash_hbase.fingerprint.simhash.Fingerprinter.weighted_terms`).
The pure-Python code stays the reference: tests/test_native.py checks that both give
the same tokens, terms, weights and fingerprints on arbitrary text.
``$SHDB_NATIVE=0`` turns the C path off; ``shdb --version`` says which path runs.

A build made from another version of ``_native.c`` (an editable install after a
``git pull``) lacks functions this code calls, or has them with other arguments: it
is not used, and ``shdb --version`` says how to rebuild it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path
from types import ModuleType

ENV = "SHDB_NATIVE"
REBUILD = "pip install -e . (or python setup.py build_ext --inplace) in the source tree"

log = logging.getLogger(__name__)


def module() -> ModuleType | None:
    """The compiled ``_native`` module, or None (not built, built from other
    sources, or ``$SHDB_NATIVE=0``)."""
    if os.environ.get(ENV, "1") == "0":
        return None
    compiled, stale = _load()
    return None if stale else compiled


@functools.cache
def _load() -> tuple[ModuleType | None, bool]:
    """The extension and whether it is stale, checked once a process."""
    try:
        from simhash_hbase.fingerprint import _native  # type: ignore[attr-defined]
    except ImportError:
        return None, False
    stale = is_stale(_native)
    if stale:
        log.warning("the C extension was built from other sources than these: unused; %s", REBUILD)
    return _native, stale


def is_stale(compiled: ModuleType) -> bool:
    """True when the source beside the package (a source tree; an installed wheel
    ships none) is not the one the module was compiled from."""
    source = Path(__file__).with_name("_native.c")
    if not source.exists():
        return False
    built = getattr(compiled, "SOURCE_SHA256", "")
    return built != hashlib.sha256(source.read_bytes()).hexdigest()


def status() -> str:
    """Which fingerprinting path runs, for ``shdb --version`` and diagnostics."""
    if os.environ.get(ENV, "1") == "0":
        return f"pure Python (${ENV}=0)"
    compiled, stale = _load()
    if stale:
        return f"pure Python (the C extension is out of date with the sources: {REBUILD})"
    if compiled is None:
        return "pure Python (the C extension is not built: no C compiler at install)"
    return "C extension"
