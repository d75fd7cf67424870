"""A persistent per-user cache for tables that are slow to parse (start-up time).

Parsing jieba's IDF table takes ~0.25 s of CPU and building jieba's prefix
dictionary ~1 s: too much for a one-shot ``shdb query``. Both are cached here, in
``$SHDB_CACHE_DIR``, else ``$XDG_CACHE_HOME/shdb``, else ``~/.cache/shdb`` (not
the system temp directory, which is emptied on reboot).

What is read from the cache decides fingerprints, so it is trusted only when
the folder is private (a real folder owned by this user, mode 0700: made so if
it is ours) and each entry's content matches the SHA-256 stored with it. With no
such folder (no home, a folder another user owns or may write) nothing is
cached: never a shared, world-writable fallback. Entries are named by a digest
of what they were built from, written atomically (0600), and rebuilt when
damaged; a cache that cannot be written only costs the rebuild.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

_DIGEST = 32  # bytes of SHA-256 at the head of an entry


def cache_dir() -> Path | None:
    """``$SHDB_CACHE_DIR``, else ``$XDG_CACHE_HOME/shdb``, else ``~/.cache/shdb``;
    None without a home (nowhere private to keep it)."""
    if explicit := os.environ.get("SHDB_CACHE_DIR"):
        return Path(explicit)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "shdb"
    try:
        return Path.home() / ".cache" / "shdb"
    except RuntimeError:  # no $HOME and no passwd entry (some containers)
        return None


def private_dir() -> Path | None:
    """The cache folder, created or made private (0700) if it is this user's;
    None when it cannot be (absent and not creatable, a link, another owner)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return None
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)  # ours, made before this rule: close it
    except OSError:
        return None
    return folder


def read_entry(name: str) -> bytes | None:
    """The payload of entry ``name``, if the folder is private and the payload
    matches its stored SHA-256; None otherwise (absent, damaged or untrusted)."""
    folder = private_dir()
    if folder is None:
        return None
    try:
        raw = (folder / name).read_bytes()
    except OSError:
        return None
    head, payload = raw[:_DIGEST], raw[_DIGEST:]
    return payload if len(head) == _DIGEST and hashlib.sha256(payload).digest() == head else None


def write_entry(name: str, payload: bytes) -> None:
    """Store ``payload`` under ``name`` with its SHA-256, atomically; a cache that
    cannot be written (read-only, full, not private) is skipped."""
    folder = private_dir()
    if folder is None:
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")  # 0600
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).digest())
            f.write(payload)
        os.replace(tmp, folder / name)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def cached(name: str, build: Callable[[], Any]) -> Any:
    """``build()``'s value, kept in the cache entry ``name`` (marshal: builtin types only)."""
    payload = read_entry(name)
    if payload is not None:
        try:
            return marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            pass  # written by an older format: rebuild it
    value = build()
    write_entry(name, marshal.dumps(value))
    return value


def _file_digest(path: Path) -> bytes:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").digest()


def checked_files(name: str, paths: Iterable[Path]) -> bool:
    """Whether the files match the SHA-256s of entry ``name.sha256``.

    Hashing ~20 MB costs ~10 ms, a thirtieth of a one-shot query: once the bytes
    are checked, the check is remembered with the files' stamp (``name.checked``)
    and redone only when the stamp changes.
    """
    paths = tuple(paths)
    sums = read_entry(f"{name}.sha256")
    if sums is None:
        return False
    stamp = _stamp(paths)
    if stamp is not None and read_entry(f"{name}.checked") == sums + stamp:
        return True
    if sums != b"".join(map(_file_digest, paths)):
        return False
    if stamp is not None:
        write_entry(f"{name}.checked", sums + stamp)
    return True


#: A file changed more recently than this may change again unseen within the file
#: system's timestamp granularity (a clock tick): its stamp is not trusted yet.
_SETTLED_NS = 2_000_000_000


def _stamp(paths: Iterable[Path]) -> bytes | None:
    """The files as the file system identifies their contents: device, inode, size,
    modification and status-change times. Any write, truncation or replacement
    changes it (the status-change time even when the modification time is put back).
    None while a file changed within :data:`_SETTLED_NS`."""
    now = time.time_ns()
    parts = []
    for path in paths:
        st = path.stat()
        if now - st.st_ctime_ns < _SETTLED_NS:
            return None
        parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    return ",".join(parts).encode()


def save_file(path: Path, data: bytes) -> bytes:
    """Write ``data`` to ``path`` atomically (0600); its SHA-256."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise
    return hashlib.sha256(data).digest()
