"""The HBase store's write timestamps: one clock per process, shared by its stores
(kept apart from :mod:`.store`, which holds what must not differ between the
gateway protocols)."""

from __future__ import annotations

import threading
import time


class Clock:
    """Strictly increasing millisecond timestamps for this process.

    HBase quirk: a delete at timestamp T masks every put at <= T, even one sent
    later. Deletes therefore get T and the puts that follow get T+1, and no two
    batches share a timestamp, so a remove-then-re-add in one millisecond works.
    Across writers the clock is a Lamport clock: a batch's pair is above every
    owner token it read (``_HBaseBatch.claim_docs`` in :mod:`.store`).
    """

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def observe(self, ts: int) -> None:
        """A timestamp another writer used: the pairs after this exceed it."""
        with self._lock:
            self._last = max(self._last, ts)

    def pair(self) -> tuple[int, int]:
        with self._lock:
            t = max(int(time.time() * 1000), self._last + 1)
            self._last = t + 1
            return t, t + 1


#: The clock of every HBase store of this process.
CLOCK = Clock()
