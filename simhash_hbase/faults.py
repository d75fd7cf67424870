"""Fault injection for the tests of what survives a crash or a stall: the commit
protocol's crash points (:mod:`simhash_hbase.jobs.checkpoint`), a removal's, and a
writer paused inside its write section (:mod:`simhash_hbase.index.write`).

``SHDB_FAULT=POINT:N`` kills this process (SIGKILL, nothing cleaned up) the Nth time
it reaches POINT; ``SHDB_FAULT=POINT:N:stop`` stops it there (SIGSTOP: a pause as
long as the test likes, ended by SIGCONT). Unset (always, outside tests): nothing.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_HITS: Counter[str] = Counter()


def fault(point: str) -> None:
    """The fault ``SHDB_FAULT`` asks for at ``point``, if this is its Nth time here."""
    spec = os.environ.get("SHDB_FAULT")
    if not spec:
        return
    name, _, rest = spec.partition(":")
    nth, _, action = rest.partition(":")
    if name == point:
        _HITS[point] += 1
        if _HITS[point] == int(nth or 1):
            os.kill(os.getpid(), signal.SIGSTOP if action == "stop" else signal.SIGKILL)
