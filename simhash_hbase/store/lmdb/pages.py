"""The pages of the file LMDB maps: where this process maps it, and mapping its
pages before the queries touch them (Linux; nothing elsewhere).

LMDB reads through mmap, so the first touch of each page of the file costs the
process a page fault even when the page is in the page cache. Right after
opening, a query at 3 M documents paid ~2 of them (~5 µs each in this KVM
guest): its p50 was 22-28 µs against 16-22 µs once the pages were mapped.
:class:`Populator` maps, in a background thread, the pages of the file that are
in the page cache (``mincore``), never reading the disk (a file larger than RAM
is not pulled in), in calls of :data:`CHUNK` bytes that release the GIL.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import threading
from pathlib import Path

import numpy as np

MADV_POPULATE_READ = 22  # Linux 5.14+: map the pages of a range now (EINVAL before)
DATA_FILE = "data.mdb"  # the file of an LMDB environment, which LMDB maps
#: Bytes a populate call maps: ~5-10 ms each, the longest ``stop()`` waits.
CHUNK = 64 << 20


def mapped_at(data: Path) -> int | None:
    """Where this process maps ``data`` (LMDB maps its file once), from
    /proc/self/maps; None where there is no such file (not Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return None
    path = os.path.realpath(data)
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == path and int(fields[2], 16) == 0:
            return int(fields[0].split("-")[0], 16)
    return None


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def populate(start: int, size: int) -> bool:
    """Map ``size`` bytes from ``start`` into this process's page tables now
    (reading from disk the pages not in the page cache); False where the kernel
    cannot (before 5.14)."""
    return _libc().madvise(start, size, MADV_POPULATE_READ) == 0


def touch(start: int, size: int) -> None:
    """Map the pages of a range by reading a byte of each (in C): :func:`populate`
    where the kernel has no ``MADV_POPULATE_READ``."""
    mapped = (ctypes.c_char * size).from_address(start)
    _ = mapped[:: mmap.PAGESIZE]


def resident(start: int, size: int) -> list[tuple[int, int]]:
    """(address, bytes) of each run of pages of the mapping at ``start`` that
    are in the page cache; none where ``mincore`` fails."""
    vec = np.zeros(-(-size // mmap.PAGESIZE), dtype=np.uint8)
    if _libc().mincore(start, size, vec.ctypes.data):
        return []
    return [(start + a * mmap.PAGESIZE, n * mmap.PAGESIZE) for a, n in runs(vec & 1)]


def runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(first index, length) of each run of ones in ``flags`` (0s and 1s)."""
    edges = np.flatnonzero(np.diff(flags, prepend=0, append=0)).reshape(-1, 2)
    return [(a, b - a) for a, b in edges.tolist()]


class Populator:
    """Maps the page-cache pages of a file this process maps (:func:`resident`),
    :data:`CHUNK` bytes a call, in a daemon thread; :meth:`stop` before the
    file is unmapped."""

    def __init__(self, start: int, size: int) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(start, size), name="shdb-populate", daemon=True
        )
        self._thread.start()

    def _run(self, start: int, size: int) -> None:
        for at, length in resident(start, size):
            for offset in range(0, length, CHUNK):
                if self._stop.is_set() or not populate(at + offset, min(CHUNK, length - offset)):
                    return

    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop after the current call and wait for it (the mapping must outlive it)."""
        self._stop.set()
        self._thread.join()
