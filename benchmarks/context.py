"""What a bench section gets: sizes, scratch space, shared data, the bench HBase."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .plans import Plan, pick

T = TypeVar("T")


def synthetic_fingerprints(n: int, seed: int) -> np.ndarray:
    """n distinct random 64-bit fingerprints (repeats are astronomically rare; dropped)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    _, first = np.unique(fps, return_index=True)
    if len(first) != n:
        fps = fps[np.sort(first)]
    return fps


@dataclass
class Context:
    """One bench run as a section sees it.

    ``results`` holds the results of the sections that ran before (by name), so a
    later section can reuse what an earlier one built (storage reads the tables
    the HBase query section filled). ``hbase`` is None with ``--no-hbase``.
    """

    plan: Plan
    work: Path
    results: dict[str, Any]
    hbase: Any = None  # benchmarks.hbase_instance.BenchHBase, started on first use
    install: bool = True  # may sections pip-install the peers they compare against?
    _fps: np.ndarray | None = field(default=None, repr=False)
    _corpus: list[tuple[str, str]] | None = field(default=None, repr=False)

    @property
    def mode(self) -> str:
        return self.plan.mode

    def pick(self, *, smoke: T, quick: T, full: T) -> T:
        """A size for this run's mode (for sections that keep their own sizes)."""
        return pick(self.mode, smoke=smoke, quick=quick, full=full)

    def fingerprints(self, n: int) -> np.ndarray:
        """The first n of one fixed series of random fingerprints (shared by sections)."""
        if self._fps is None or len(self._fps) < n:
            self._fps = synthetic_fingerprints(max(n, self.plan.largest_n), self.plan.seed)
        return self._fps[:n]

    def corpus(self) -> list[tuple[str, str]]:
        """(id, text) of real Chinese documents; smoke runs use a generated corpus."""
        if self._corpus is None:
            from . import corpus

            self._corpus = corpus.for_mode(self.mode)
        return self._corpus

    def require_hbase(self) -> Any:
        """The bench HBase, once it is ready (its start began with the run)."""
        if self.hbase is None:
            raise RuntimeError("this section needs HBase; the run has --no-hbase")
        self.hbase.wait()
        return self.hbase
