"""Multi-probe by volatile bits (Sood & Loguinov, CIKM 2011).

A SimHash bit is the sign of a weighted sum; the bits whose sums are closest to zero
(the smallest *margins*) are the ones an edit flips first. A probed query searches,
besides the fingerprint itself, the fingerprints with its weakest bits flipped, each
an exact k-search, and keeps a hit only if its true Hamming distance to the unflipped
fingerprint is within :func:`bound`.

Order of the flip sets: every set of 1 to :data:`MAX_FLIPS` bits, cheapest first by
the sum of its bits' margins (the total push an edit needs to flip all of them), ties
by fewer bits, then by the bit numbers. Probe 0 is the fingerprint itself; ``probes=P``
searches probes 0..P.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from simhash_hbase.errors import InvalidQuery

if TYPE_CHECKING:
    import numpy as np

MAX_PROBES = 64
MAX_FLIPS = 3
#: A text query's default: the most recall within 4x the scans of an unprobed query
#: in the evaluation (docs/quality.md, "Probes"). Lookups at ingest stay unprobed
#: unless asked: there the scans are paid by every document written.
DEFAULT_QUERY_PROBES = 10


def check_probes(probes: int) -> None:
    if not 0 <= probes <= MAX_PROBES:
        raise InvalidQuery(f"probes must be between 0 and {MAX_PROBES}, got {probes}")


def flip_sets(margins: np.ndarray, probes: int) -> list[tuple[int, ...]]:
    """The first ``probes`` flip sets (bit numbers, bit i = 1 << i) in the module's order.

    Best-first over the bits sorted weakest first: a set's successors (its last bit
    swapped for the next weaker-but-one, or the next bit added) never cost less, so a
    heap yields the sets in order after O(probes log probes) steps.
    """
    check_probes(probes)
    if probes == 0:
        return []
    m = list(map(float, margins))
    order = sorted(range(len(m)), key=lambda b: (m[b], b))

    def entry(idx: tuple[int, ...]) -> tuple[float, int, tuple[int, ...], tuple[int, ...]]:
        bits = tuple(sorted(order[i] for i in idx))
        return math.fsum(m[b] for b in bits), len(bits), bits, idx

    heap = [entry((0,))]
    out: list[tuple[int, ...]] = []
    while heap and len(out) < probes:
        _, _, bits, idx = heapq.heappop(heap)
        out.append(bits)
        last = idx[-1]
        if last + 1 < len(order):
            heapq.heappush(heap, entry((*idx[:-1], last + 1)))
            if len(idx) < MAX_FLIPS:
                heapq.heappush(heap, entry((*idx, last + 1)))
    return out


def probe_fingerprints(fp: int, margins: np.ndarray, probes: int) -> list[int]:
    """``fp`` followed by its ``probes`` flipped variants, in probe order."""
    out = [fp]
    for combo in flip_sets(margins, probes):
        mask = 0
        for bit in combo:
            mask |= 1 << bit
        out.append(fp ^ mask)
    return out


def bound(k: int, probes: int) -> int:
    """Largest true distance a probed query reports: ``k + MAX_FLIPS`` (a hit of a
    probe with s <= MAX_FLIPS flipped bits lies within k + s of the fingerprint, so
    the bound never drops a hit of any probe: it states what "near" means), ``k``
    without probes. At k = 3 that is 6, where the evaluation measures the FPR of
    every pair the probes could ever report (docs/quality.md)."""
    return k if probes == 0 else k + MAX_FLIPS
