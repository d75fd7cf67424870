"""The C kernels (the ``_kernels`` extension, built from this folder's ``*.c``), or
the pure-Python paths.

Layer-neutral: this package imports nothing of simhash_hbase, and any layer may
use it. The extension is compiled at install (setup.py, optional: without a
compiler the install goes on). Its sources, by concern:

- text kernels (``text.c``, ``terms.c``), used by ``fingerprint/``: the per-token
  work, where Python spends most of a fingerprint beyond rjieba's own cut: the
  corrections of rjieba's tokens (:func:`simhash_hbase.fingerprint.segment._fast_py`)
  and token -> term -> count -> weight -> top-N
  (:meth:`~simhash_hbase.fingerprint.simhash.Fingerprinter.weighted_terms`).
  The pure-Python code stays the reference: tests/test_native.py checks that both
  give the same tokens, terms, weights and fingerprints on arbitrary text.
- page and cell kernels (``probes.c``, ``match.c``), used by ``layout/codec.py`` and
  ``store/lmdb/``: one query's probes of the embedded store, a batch's cells
  matched to its prefixes and a removal's taken out of their buckets
  (tests/test_native_probe.py and tests/test_compact.py
  compare them with their pure-Python references).

``$SHDB_NATIVE=0`` turns the C path off; ``shdb --version`` says which path runs.

A build made from other versions of these sources (an editable install after a
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
    """The compiled ``_kernels`` module, or None (not built, built from other
    sources, or ``$SHDB_NATIVE=0``)."""
    if os.environ.get(ENV, "1") == "0":
        return None
    compiled, stale = _load()
    return None if stale else compiled


@functools.cache
def _load() -> tuple[ModuleType | None, bool]:
    """The extension and whether it is stale, checked once a process."""
    try:
        from simhash_hbase._native import _kernels  # type: ignore[attr-defined]
    except ImportError:
        return None, False
    stale = is_stale(_kernels)
    if stale:
        log.warning("the C extension was built from other sources than these: unused; %s", REBUILD)
    return _kernels, stale


def sources_digest(folder: Path) -> str:
    """The digest of every C source and header in ``folder``, by name (setup.py
    compiles the same into the module as ``SOURCE_SHA256``)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.[ch]")):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def is_stale(compiled: ModuleType) -> bool:
    """True when the sources beside the package (a source tree; an installed wheel
    ships none) are not the ones the module was compiled from."""
    folder = Path(__file__).parent
    if not any(folder.glob("*.c")):
        return False
    built = getattr(compiled, "SOURCE_SHA256", "")
    return built != sources_digest(folder)


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
