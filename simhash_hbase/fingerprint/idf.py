"""jieba's IDF table, read term by term from a sorted on-disk copy (start-up time).

A Python dict of jieba's 270,000 terms costs ~0.12 s of CPU to unmarshal and ~0.23 s
to parse: more than a one-shot ``shdb query`` can spend. :class:`SparseIdf` instead
memory-maps two sorted arrays (terms, values) kept in the per-user cache and copies
into its ``idf`` dict only the terms a text asks for (:meth:`SparseIdf.resolve`). The
values are the table's own float64s, so weights, and fingerprints, are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import compress, filterfalse
from pathlib import Path
from typing import TYPE_CHECKING

from simhash_hbase.fingerprint.cache import checked_files, private_dir, save_file, write_entry

if TYPE_CHECKING:
    import numpy as np

#: Terms looked up and not in the table are remembered up to this many (bounded
#: memory on endless input full of unique tokens); past it they are looked up again.
_MAX_ABSENT = 1 << 20


class SparseIdf:
    """``idf`` (term -> IDF) holds every resolved term of the table; ``median`` is
    the table's median, the weight of unknown terms."""

    def __init__(self, terms: np.ndarray, values: np.ndarray, median: float) -> None:
        self.idf: dict[str, float] = {}
        self.median = median
        self._terms = terms  # sorted, dtype <U{longest}
        self._values = values
        self._longest = terms.dtype.itemsize // 4
        self._absent: set[str] = set()

    def arrays(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The sorted terms (NUL-padded UCS4 records of ``width`` code points, native
        byte order), their IDFs (float64) and ``width``: what the C path searches."""
        import numpy as np

        terms = np.ascontiguousarray(self._terms, self._terms.dtype.newbyteorder("="))
        return terms, np.ascontiguousarray(self._values, np.float64), self._longest

    def resolve(self, terms: Iterable[str]) -> None:
        """Make ``idf`` hold those of ``terms`` that the table has."""
        unresolved = filterfalse(self.idf.__contains__, terms)  # C speed: no Python call a term
        new = list(filterfalse(self._absent.__contains__, unresolved))
        if not new:
            return
        # Longer than any entry, or with a NUL (numpy drops trailing NULs): not in it.
        fits = [t for t in new if len(t) <= self._longest and "\0" not in t]
        if fits:
            import numpy as np

            wanted = np.array(fits, dtype=self._terms.dtype)
            at = np.minimum(np.searchsorted(self._terms, wanted), len(self._terms) - 1)
            found = self._terms[at] == wanted
            self.idf.update(zip(compress(fits, found.tolist()), self._values[at[found]].tolist()))
        if len(self._absent) > _MAX_ABSENT:
            self._absent.clear()
        self._absent.update(filterfalse(self.idf.__contains__, new))


def _median(values: np.ndarray) -> float:
    """The upper median, ``sorted(values)[len // 2]``, in linear time (no full sort)."""
    import numpy as np

    middle = len(values) // 2
    return float(np.partition(values, middle)[middle])


def _save(path: Path, array: np.ndarray) -> bytes:
    """Write ``array`` atomically (0600); the SHA-256 of the file's bytes."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return save_file(path, buf.getvalue())


def sparse_idf(digest: str, table: Callable[[], tuple[dict[str, float], float]]) -> SparseIdf:
    """The table with SHA-256 ``digest`` from the cache, built from ``table()`` once.

    The two arrays are memory-mapped, and used only when their bytes match the
    SHA-256s stored beside them (cache.py: private folder, checked entries)."""
    import numpy as np

    folder = private_dir()
    name = f"idf-{digest}"
    if folder is not None:
        terms_path, values_path = folder / f"{name}.terms.npy", folder / f"{name}.values.npy"
        try:
            if checked_files(name, (terms_path, values_path)):
                terms = np.load(terms_path, mmap_mode="r", allow_pickle=False)
                values = np.load(values_path, mmap_mode="r", allow_pickle=False)
                return SparseIdf(terms, values, _median(values))
        except (OSError, ValueError):
            pass  # absent or damaged: rebuild
    idf, median = table()
    keys = sorted(idf)
    terms = np.array(keys, dtype=f"<U{max(map(len, keys))}")
    values = np.array([idf[k] for k in keys], dtype=np.float64)
    assert not any("\0" in k for k in keys), "numpy drops trailing NULs: not representable"
    if folder is not None:
        try:
            sums = _save(terms_path, terms) + _save(values_path, values)
            write_entry(f"{name}.sha256", sums)
        except OSError:
            pass  # unwritable cache: correct, only slower next time
    return SparseIdf(terms, values, median)
