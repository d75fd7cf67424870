"""Installing what the bench compares against.

* The project with its ``bench`` and ``hbase`` extras (matplotlib, PyPI simhash,
  psutil, happybase), with pip, only when something is missing.
* simhash-py (import name ``simhash``, which clashes with PyPI ``simhash``) for the
  all-pairs baseline, into a private --target directory that only a subprocess
  puts on its path. Its last sdist (0.4.0, 2017) does not build on Python 3.11
  (pre-generated Cython C includes ``longintrepr.h``; the .pxd files needed to
  regenerate it are not in the sdist), so simhash-pybind, a pybind11 wrapper of
  the same C++ ``find_all``, is the fallback. The attempt and its outcome are
  recorded in the results.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from .common import CACHE_DIR, ROOT, log

_PEER_MODULES = ("matplotlib", "simhash", "psutil", "happybase", "numpy", "lmdb", "jieba")
ALL_PAIRS_CANDIDATES = (("simhash-py", "0.4.0"), ("simhash-pybind", "0.0.3"))


def _pip(*args: str, quiet: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    if quiet:
        cmd.append("--quiet")
    return subprocess.run(cmd, capture_output=True, text=True)


def ensure_project() -> None:
    """pip install -e '.[bench,hbase]' unless everything already imports from here."""
    missing = [m for m in _PEER_MODULES if importlib.util.find_spec(m) is None]
    spec = importlib.util.find_spec("simhash_hbase")
    ours = spec is not None and spec.origin is not None and Path(spec.origin).is_relative_to(ROOT)
    if not missing and ours:
        return
    reason = f"missing {', '.join(missing)}" if missing else "simhash_hbase not from this checkout"
    log(f"installing the project and its peers: pip install -e '.[bench,hbase]' ({reason})")
    result = _pip("install", "-e", f"{ROOT}[bench,hbase]")
    if result.returncode != 0:
        sys.exit(f"benchmarks.bench: pip install -e '.[bench,hbase]' failed:\n{result.stderr}")
    importlib.invalidate_caches()


def all_pairs_peer(install: bool = True) -> dict[str, str]:
    """A --target dir holding simhash-py, else simhash-pybind; and what happened.

    With ``install=False`` only a peer built by an earlier run is used."""
    notes: dict[str, str] = {}
    for name, version in ALL_PAIRS_CANDIDATES:
        target = CACHE_DIR / f"{name}-{version}"
        stamp, failed = target / ".installed", CACHE_DIR / f"{name}-{version}.failed"
        if failed.exists():  # a failed build is not retried on every run (delete to retry)
            notes[name] = failed.read_text().strip()
            continue
        if not stamp.exists() and not install:
            notes[name] = "not built (installing peers is off)"
            continue
        if not stamp.exists():
            log(
                f"building {name}=={version} into {target} (a private dir: its import "
                "name `simhash` clashes with PyPI simhash)"
            )
            result = _pip(
                "install", "--no-cache-dir", "--target", str(target), f"{name}=={version}"
            )
            if result.returncode != 0:
                tail = [ln.strip() for ln in result.stderr.splitlines() if "error" in ln.lower()]
                notes[name] = "build failed: " + " | ".join(tail[:3])[:300]
                CACHE_DIR.mkdir(parents=True, exist_ok=True)
                failed.write_text(notes[name] + "\n")
                log(f"{name} did not build; trying the next candidate")
                continue
            stamp.write_text(f"{name}=={version}\n")
        notes["used"] = f"{name}=={version}"
        notes["path"] = str(target)
        return notes
    notes["used"] = ""
    return notes


def env_with_path(target: str) -> dict[str, str]:
    """Environment whose Python imports ``simhash`` from ``target`` first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = target + os.pathsep + env.get("PYTHONPATH", "")
    return env
