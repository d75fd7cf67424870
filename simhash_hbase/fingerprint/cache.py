"""A persistent per-user cache for tables that are slow to parse (start-up time).

Parsing jieba's IDF table takes ~0.25 s of CPU and building jieba's prefix
dictionary ~1 s: too much for a one-shot ``shdb query``. Both are cached here, in
``$SHDB_CACHE_DIR``, else ``$XDG_CACHE_HOME/shdb``, else ``~/.cache/shdb`` (not
the system temp directory, which is emptied on reboot). Entries are named by a
digest of what they were built from, written atomically, and rebuilt when
unreadable; a cache that cannot be written only costs the rebuild.
"""

from __future__ import annotations

import marshal
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """``$SHDB_CACHE_DIR``, else ``$XDG_CACHE_HOME/shdb``, else ``~/.cache/shdb``."""
    if explicit := os.environ.get("SHDB_CACHE_DIR"):
        return Path(explicit)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "shdb"
    try:
        return Path.home() / ".cache" / "shdb"
    except RuntimeError:  # no $HOME and no passwd entry (some containers): still per user
        return Path(tempfile.gettempdir()) / f"shdb-cache-{os.getuid()}"


def cached(name: str, build: Callable[[], Any]) -> Any:
    """``build()``'s value, kept in the cache file ``name`` (marshal: builtin types only)."""
    path = cache_dir() / name
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass  # absent, unreadable or damaged: rebuild it
    value = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.")
    except OSError:
        return value  # read-only: correct, only slower next time
    try:
        with os.fdopen(fd, "wb") as f:
            marshal.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)  # full disk: same
    return value
