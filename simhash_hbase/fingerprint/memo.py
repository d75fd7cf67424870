"""A bounded in-memory cache of a function of one token or term (throughput).

A fingerprint handles ~2,000 tokens per 4 kB of Chinese text. A Python call per
token for its class or its term costs as much as the native segmentation itself;
``map(memo.__getitem__, tokens)`` costs a C-level dict lookup per token, and the
function runs once per distinct token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

#: Past this many entries a memo starts afresh: bounded memory on endless input full
#: of unique tokens, at the cost of computing them again.
MAX_ENTRIES = 1 << 18

_K = TypeVar("_K")
_V = TypeVar("_V")


class Memo(dict[_K, _V], Generic[_K, _V]):
    """``memo[key]`` is ``fn(key)``, computed on the first lookup (``__missing__``)."""

    def __init__(self, fn: Callable[[_K], _V]) -> None:
        super().__init__()
        self._fn = fn

    def __missing__(self, key: _K) -> _V:
        value = self._fn(key)
        if len(self) >= MAX_ENTRIES:
            self.clear()
        self[key] = value
        return value
