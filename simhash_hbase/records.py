"""Plain value types shared by every layer, and the fingerprint's text form
(only errors below them, so readers and stores alike can use them)."""

from __future__ import annotations

import math
import re
import time as _clock
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, NamedTuple

from simhash_hbase.errors import InvalidInput

#: Matches a result holds unless the caller asks for more (``limit``): a person
#: wants "is it a copy, and of what", not every copy of a mass-copied page.
DEFAULT_LIMIT = 10
MAX_LIMIT = 100_000


class Match(NamedTuple):
    """One query hit; results sort by distance, then id.

    ``similarity`` is the Jaccard similarity of the two texts' shingles estimated
    from their sketches (:mod:`simhash_hbase.fingerprint.minhash`); None when a
    side has no sketch (added by fingerprint alone, or an index of the ``simhash``
    net only): such a match was found and confirmed by the pigeonhole alone.
    """

    doc_id: str
    fingerprint: int
    distance: int
    similarity: float | None = None
    #: When the matched document arrived (ms since the Unix epoch, UTC; None: it
    #: was stored before documents had times, docs/lifecycle.md).
    time: int | None = None


class Matches(list[Match]):
    """At most ``limit`` matches, nearest first (distance, then id), and how many
    there are in all: ``total`` is exact when ``total_exact``, else a lower bound
    (the lookup stopped reading a hot index row once the shown matches were certain)."""

    total: int
    total_exact: bool
    #: Where the document was added (check-and-add, ingest): its cluster, the id of
    #: the representative it matches (its own when it represents one); else None.
    cluster: str | None = None

    def __init__(
        self, matches: Iterable[Match] = (), total: int | None = None, total_exact: bool = True
    ) -> None:
        super().__init__(matches)
        self.total = len(self) if total is None else total
        self.total_exact = total_exact

    def __repr__(self) -> str:
        bound = "" if self.total_exact else ">="
        return f"Matches({list.__repr__(self)}, total={bound}{self.total})"

    def to_json(self) -> dict[str, Any]:
        """The result shape every surface prints (``--json``, the service); a match's
        ``time`` when its document has one (not in ``dedup``, which holds no index)."""
        return {
            "matches": [
                {
                    "id": m.doc_id,
                    "distance": m.distance,
                    "similarity": m.similarity,
                    "fingerprint": fingerprint_to_hex(m.fingerprint),
                    **({} if m.time is None else {"time": time_to_text(m.time)}),
                }
                for m in self
            ],
            "total": self.total,
            "total_exact": self.total_exact,
            **({} if self.cluster is None else {"cluster": self.cluster}),
        }


def check_limit(limit: int | None) -> int | None:
    """``limit`` is 1..MAX_LIMIT matches per result, or None for all of them."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit {limit!r} is not a number of matches from 1 to {MAX_LIMIT:,} "
            "(or None for all matches)"
        )
    return limit


class Lookup(NamedTuple):
    """A new document's near-copies found while ingesting: ``doc_id`` is the new
    document, ``matches`` the nearest earlier documents (bounded) and their count."""

    doc_id: str
    matches: Matches


@dataclass(frozen=True)
class Document:
    """A row of the docs table."""

    doc_id: str
    fingerprint: int
    text: str | None = None
    meta: dict[str, Any] | None = None
    #: The stored MinHash sketch (64 bytes, then its evidence) that confirms
    #: candidates (docs/SPEC.md, "Nets"), and
    #: the document's LSH band keys (4 bytes each, big-endian; kept so that a
    #: replaced document's band rows can be deleted). None: no text was given.
    sketch: bytes | None = None
    bands: bytes | None = None
    #: The id of its cluster's representative (docs/nets.md, "Clusters"); None: itself
    #: (and every document of an index written before clusters were kept).
    cluster: str | None = None
    #: When it arrived: ms since the Unix epoch, UTC (ingest time, or the input's
    #: ``--time-field``). None: stored before documents had times.
    time: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The document as every surface prints it (``shdb get --json``, the service)."""
        return {
            "id": self.doc_id,
            "fingerprint": fingerprint_to_hex(self.fingerprint),
            "text": self.text,
            "meta": self.meta,
            "time": time_to_text(self.time),
        }


class Problem(str, Enum):
    """Why a record was skipped; the CLI turns each kind into a hint."""

    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    BINARY = "binary"
    MALFORMED = "malformed"  # JSON or CSV syntax
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    BAD_ID = "bad_id"
    BAD_META = "bad_meta"
    NO_TERMS = "no_terms"
    UNREADABLE = "unreadable"  # the file or folder cannot be opened or listed
    SPECIAL_FILE = "special_file"  # FIFO, socket, device
    BAD_FINGERPRINT = "bad_fingerprint"
    INVALID = "invalid"
    SYMLINK = "symlink"  # a link in a folder leading out of it, not followed
    BAD_HTML = "bad_html"  # a page the HTML parser refuses (e.g. nested too deeply)
    DAMAGED = "damaged"  # a compressed file cut short or corrupt: the rest is lost


class Record(NamedTuple):
    """One input document; ``where`` names its origin (file:line) for messages."""

    doc_id: str
    text: str
    meta: dict[str, Any] | None = None
    where: str = ""
    size: int = 0
    #: When it arrived (ms since the epoch, UTC); None: when it is stored.
    time: int | None = None


class BadRecord(NamedTuple):
    """An input record that cannot be indexed; it is skipped or fails the run."""

    where: str
    reason: str
    size: int = 0
    problem: Problem = Problem.INVALID


class Duplicate(NamedTuple):
    """A near-duplicate found while ingesting: ``doc_id`` is the new document."""

    doc_id: str
    existing_id: str
    distance: int
    similarity: float | None = None


class OnError(str, Enum):
    """What an ingest does with a bad record."""

    SKIP = "skip"  # report it (file:line, reason) and go on
    FAIL = "fail"  # write the good records read before it, then stop


@dataclass
class Written:
    """What writing documents did to the index, by id: ``added`` (not held before),
    ``replaced`` (held with another fingerprint) and ``unchanged`` (held with this
    one), so that a re-run of an ingest does not call what it already held new."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0

    @property
    def written(self) -> int:
        return self.added + self.replaced + self.unchanged

    def add(self, other: Written) -> None:
        self.added += other.added
        self.replaced += other.replaced
        self.unchanged += other.unchanged


@dataclass
class IngestSummary(Written):
    records: int = 0  # read from the input, good and bad
    duplicates: int = 0  # new documents that have near-copies (each reported once)
    skipped: list[BadRecord] = field(default_factory=list)
    bytes_read: int = 0
    seconds: float = 0.0
    resumed_after: int = 0  # records an earlier, interrupted run had already done
    skipped_before: int = 0  # skipped by earlier runs beyond those listed in ``skipped``

    @property
    def docs_per_second(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0


def fingerprint_to_hex(fp: int) -> str:
    return f"{fp:016x}"


def parse_fingerprint_hex(text: str) -> int:
    """Parse 1-16 hex digits, with an optional 0x; anything else is a clear error."""
    digits = text.strip().lower().removeprefix("0x")
    if not 1 <= len(digits) <= 16 or any(c not in "0123456789abcdef" for c in digits):
        raise InvalidInput(
            f"{text!r} is not a 64-bit hex fingerprint: give 1 to 16 hex digits, "
            "e.g. 3f2a9c0d11e4b7a8"
        )
    return int(digits, 16)


#: The times a document may hold: years 1 to 9999, as RFC 3339 can write them.
MIN_TIME_MS = -62_135_596_800_000
MAX_TIME_MS = 253_402_300_799_999
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


#: A time as the library takes it: RFC 3339 text, or seconds since the epoch.
Time = str | float | None


def now_ms() -> int:
    """The time a document arrives when its input gives none."""
    return _clock.time_ns() // 1_000_000


def parse_time(value: object) -> int:
    """A document time (RFC 3339 text, or seconds since the epoch as a number or
    numeric text) as ms since the epoch, UTC; :class:`InvalidInput` says why not."""
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            return _checked_ms(_seconds_ms(float(text), value), value)
        try:
            when = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InvalidInput(
                f"time {value!r:.60} is neither RFC 3339 with a time zone (e.g. "
                "2026-11-29T12:00:00Z) nor seconds since the epoch (e.g. 1795953600)"
            )
        return _checked_ms(round(when.timestamp() * 1000), value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _checked_ms(_seconds_ms(value, value), value)
    raise InvalidInput(
        f"time {value!r:.60} is a {type(value).__name__}: give RFC 3339 text or seconds "
        "since the epoch"
    )


def _seconds_ms(seconds: float, value: object) -> int:
    if not math.isfinite(seconds):
        raise InvalidInput(f"time {value!r:.60} is not a finite number of seconds")
    return round(seconds * 1000)


def _checked_ms(ms: int, value: object) -> int:
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise InvalidInput(f"time {value!r:.60} is outside the years 1 to 9999")
    return ms


def time_to_text(ms: int | None) -> str | None:
    """A document time as RFC 3339 UTC text (milliseconds shown when not zero)."""
    if ms is None:
        return None
    when = _EPOCH + timedelta(milliseconds=ms)
    spec = "milliseconds" if ms % 1000 else "seconds"
    return when.isoformat(timespec=spec).replace("+00:00", "Z")
