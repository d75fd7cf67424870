"""Pigeonhole schemes: which segments of a fingerprint are indexed together.

With m segments and at most k differing bits, at least m-k segments are equal,
so indexing every combination of m-k segments makes a k-query exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from typing import TYPE_CHECKING

from simhash_hbase.errors import InvalidQuery, InvalidSetting

if TYPE_CHECKING:
    import numpy as np

FINGERPRINT_BITS = 64
FIELD_BITS = 32


@dataclass(frozen=True)
class Scheme:
    """Segment widths (MSB first) and the flag-numbered segment combinations."""

    name: str
    widths: tuple[int, ...]
    combo_size: int
    combos: tuple[tuple[int, ...], ...] = field(init=False)
    shifts: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        if sum(self.widths) != FINGERPRINT_BITS:
            raise ValueError(f"scheme {self.name}: widths must sum to 64")
        # Lexicographic order of segment letters gives flags 1, 2, ... (docs/SPEC.md).
        combos = tuple(combinations(range(len(self.widths)), self.combo_size))
        if any(self._combo_width(c, self.widths) > FIELD_BITS + 8 for c in combos):
            raise ValueError(f"scheme {self.name}: a combination exceeds 40 bits")
        shifts, rest = [], FINGERPRINT_BITS
        for width in self.widths:
            rest -= width
            shifts.append(rest)
        object.__setattr__(self, "combos", combos)
        object.__setattr__(self, "shifts", tuple(shifts))

    @cached_property
    def prefix_terms(self) -> tuple[tuple[int, int, int, int, int], ...] | None:
        """Per flag, (r1, m1, r2, m2, flag) so that the 5-byte scan prefix's value
        (field << 8 | flag) is ``(fp << 40) >> r1 & m1 | (fp << 40) >> r2 & m2 | flag``.

        Two shift-and-mask terms cover combinations of one or two segments (both
        schemes); the one-query path uses them instead of NumPy. None otherwise.
        """
        if self.combo_size > 2:
            return None
        terms = []
        for flag, combo in enumerate(self.combos, 1):
            parts: list[int] = []
            used = 0
            for i in combo:
                used += self.widths[i]
                lift = FIELD_BITS + 8 - used  # where the segment's lowest bit lands
                parts += (self.shifts[i] + 40 - lift, ((1 << self.widths[i]) - 1) << lift)
            parts += (0, 0) * (2 - len(combo))
            terms.append((*parts, flag))
        return tuple(terms)  # type: ignore[arg-type]

    @staticmethod
    def _combo_width(combo: tuple[int, ...], widths: tuple[int, ...]) -> int:
        return sum(widths[i] for i in combo)

    @property
    def k(self) -> int:
        """Largest Hamming distance for which queries are exact."""
        return len(self.widths) - self.combo_size

    @property
    def rows_per_fingerprint(self) -> int:
        return len(self.combos)

    def check_k(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= self.k:
            raise InvalidQuery(
                f"k={k!r} is out of range: scheme {self.name} answers exactly for "
                f"0 <= k <= {self.k}",
                k=k if isinstance(k, int) else None,
                max_k=self.k,
            )

    def segments(self, fp: int) -> tuple[int, ...]:
        return tuple((fp >> s) & ((1 << w) - 1) for s, w in zip(self.shifts, self.widths))

    def fields(self, fp: int) -> list[int]:
        """The 32-bit, left-aligned segment field of each combination, by flag order.

        A combination wider than 32 bits keeps its top 32: equal segments still give
        equal fields, so queries stay exact, at the cost of the dropped bits'
        share of extra candidates (docs/SPEC.md, scheme ``6x20``)."""
        segs = self.segments(fp)
        out = []
        for combo in self.combos:
            value, width = 0, 0
            for i in combo:
                value = (value << self.widths[i]) | segs[i]
                width += self.widths[i]
            shift = FIELD_BITS - width
            out.append(value << shift if shift >= 0 else value >> -shift)
        return out

    def segments_many(self, fps: np.ndarray) -> list[np.ndarray]:
        """Each segment of many fingerprints, as a uint16 array (widths are <= 16)."""
        import numpy as np  # here: the scheme's names cost a command line no NumPy

        fps = np.asarray(fps, dtype=np.uint64)
        return [
            ((fps >> np.uint64(s)) & np.uint64((1 << w) - 1)).astype(np.uint16)
            for s, w in zip(self.shifts, self.widths)
        ]

    def combo_keys(self, segments: list[np.ndarray], combo: tuple[int, ...]) -> np.ndarray:
        """The combination's segments concatenated, right-aligned, as uint32 (the top
        32 bits of a wider combination, as :meth:`fields`)."""
        import numpy as np

        key = np.zeros(len(segments[0]), dtype=np.uint64)
        for i in combo:
            key = (key << np.uint64(self.widths[i])) | segments[i]
        extra = self._combo_width(combo, self.widths) - FIELD_BITS
        return (key >> np.uint64(max(extra, 0))).astype(np.uint32)

    def fields_many(self, fps: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`fields`: uint64 array (n,) -> uint32 array (n, combos)."""
        import numpy as np

        segments = self.segments_many(fps)
        out = np.empty((len(segments[0]), len(self.combos)), dtype=np.uint32)
        for col, combo in enumerate(self.combos):
            width = min(self._combo_width(combo, self.widths), FIELD_BITS)
            out[:, col] = self.combo_keys(segments, combo) << np.uint32(FIELD_BITS - width)
        return out


SCHEMES: dict[str, Scheme] = {
    "5x10": Scheme("5x10", (13, 13, 13, 13, 12), combo_size=2),
    "4x4": Scheme("4x4", (16, 16, 16, 16), combo_size=1),
    # For 10 B fingerprints: 20 rows a document, ~24 N / 2^32 candidates a query.
    "6x20": Scheme("6x20", (11, 11, 11, 11, 10, 10), combo_size=3),
}
DEFAULT_SCHEME = "5x10"


def get_scheme(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        known = ", ".join(SCHEMES)
        raise InvalidSetting("scheme", f"unknown scheme {name!r}; one of: {known}") from None
