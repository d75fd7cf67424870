"""Plain value types shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class Match(NamedTuple):
    """One query hit; results sort by distance, then id."""

    doc_id: str
    fingerprint: int
    distance: int


@dataclass(frozen=True)
class Document:
    """A row of the docs table."""

    doc_id: str
    fingerprint: int
    text: str | None = None
    meta: dict[str, Any] | None = None
