"""The C fast path of a fingerprint (``_native.c``), or the pure-Python one.

The extension is compiled at install (setup.py, optional: without a compiler the
install goes on). It does the per-token work, where Python spends most of a
fingerprint beyond rjieba's own cut: the corrections of rjieba's tokens
(:func:`simhash_hbase.fingerprint.segment._fast_py`) and token -> term -> count ->
weight -> top-N (:meth:`~simhash_hbase.fingerprint.simhash.Fingerprinter.weighted_terms`).
The pure-Python code stays the reference: tests/test_native.py checks that both give
the same tokens, terms, weights and fingerprints on arbitrary text.
``$SHDB_NATIVE=0`` turns the C path off; ``shdb --version`` says which path runs.
"""

from __future__ import annotations

import os
from types import ModuleType

ENV = "SHDB_NATIVE"


def module() -> ModuleType | None:
    """The compiled ``_native`` module, or None (not built, or ``$SHDB_NATIVE=0``)."""
    if os.environ.get(ENV, "1") == "0":
        return None
    try:
        from simhash_hbase.fingerprint import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _native


def status() -> str:
    """Which fingerprinting path runs, for ``shdb --version`` and diagnostics."""
    if os.environ.get(ENV, "1") == "0":
        return f"pure Python (${ENV}=0)"
    if module() is None:
        return "pure Python (the C extension is not built: no C compiler at install)"
    return "C extension"
