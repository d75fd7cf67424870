"""A time window over documents' times: which held documents a lookup may match.

One value, :class:`Window` (``[since, until)`` in ms since the epoch, either bound
open), made once by a surface from its flags (:meth:`Window.parse`: ``--within 30d``,
or ``--since``/``--until`` times) and applied in one place, the lookup
(:class:`~simhash_hbase.index.lookup.Finder`). A retention is a window too:
``Window.last(retain_ms)`` (:func:`duration_ms` parses ``90d``), narrowed by a query's
own window with :meth:`Window.narrowed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import MAX_TIME_MS, MIN_TIME_MS, now_ms, parse_time, time_to_text

#: Milliseconds of each unit a duration may be written in.
UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"(\d+)\s*([smhdw])")


def duration_ms(text: str, flag: str = "--within") -> int:
    """A duration such as ``30d`` (a whole number and a unit: s, m, h, d or w) in
    ms; :class:`InvalidInput` names ``flag`` and shows the form."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None or int(found[1]) == 0:
        raise InvalidInput(
            f"{flag} {text!r:.40}: give a duration, a whole number over 0 and a unit "
            "s, m, h, d or w (e.g. 30d, 12h, 2w)"
        )
    ms = int(found[1]) * UNITS[found[2]]
    if ms > MAX_TIME_MS - MIN_TIME_MS:
        raise InvalidInput(f"{flag} {text!r:.40}: longer than the years 1 to 9999")
    return ms


@dataclass(frozen=True)
class Window:
    """The documents whose time is in ``[since, until)`` (ms since the epoch; None:
    that side open). A document without a time (stored before documents had
    times) is outside any bounded window: a window asks for times. ``Window()``
    (both open) is no window: it holds every document."""

    since: int | None = None
    until: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("since", self.since), ("until", self.until)):
            if value is not None and not (
                isinstance(value, int) and MIN_TIME_MS <= value <= MAX_TIME_MS
            ):
                raise InvalidInput(f"window {name} {value!r:.40} is not a time in ms")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InvalidInput(
                f"empty window: since {time_to_text(self.since)} is not before until "
                f"{time_to_text(self.until)}"
            )

    @classmethod
    def last(cls, ms: int, now: int | None = None) -> Window:
        """The last ``ms`` milliseconds up to ``now`` (default: the clock), until open."""
        return cls(max(MIN_TIME_MS, (now_ms() if now is None else now) - ms), None)

    @classmethod
    def parse(
        cls,
        within: str | None = None,
        since: str | None = None,
        until: str | None = None,
        *,
        names: tuple[str, str, str] = ("--within", "--since", "--until"),
        now: int | None = None,
    ) -> Window | None:
        """The window of a command's three settings, from ``now`` (None: none
        given); see :meth:`WindowSpec.parse`."""
        spec = WindowSpec.parse(within, since, until, names=names)
        return None if spec is None else spec.at(now)

    @property
    def bounded(self) -> bool:
        """Whether the window leaves any document out."""
        return self.since is not None or self.until is not None

    def holds(self, time: int | None) -> bool:
        """Whether a document of this time is inside (None: no time, outside a
        bounded window)."""
        if time is None:
            return not self.bounded
        return (self.since is None or time >= self.since) and (
            self.until is None or time < self.until
        )

    def narrowed(self, other: Window | None) -> Window:
        """The documents inside both windows (a retention and a query's own window)."""
        if other is None:
            return self
        since = max((t for t in (self.since, other.since) if t is not None), default=None)
        until = min((t for t in (self.until, other.until) if t is not None), default=None)
        return Window(since, until)

    def to_json(self) -> dict[str, str | None]:
        return {"since": time_to_text(self.since), "until": time_to_text(self.until)}


@dataclass(frozen=True)
class WindowSpec:
    """A window as asked, before the clock is read: ``within`` ms back from when its
    lookups run (a service or a crawl that runs for days keeps counting back from
    each request), or ``since``; and ``until``. Equal specs group (serve's group
    commit), where windows taken a millisecond apart would not."""

    within: int | None = None
    since: int | None = None
    until: int | None = None

    @classmethod
    def parse(
        cls,
        within: str | None = None,
        since: str | None = None,
        until: str | None = None,
        *,
        names: tuple[str, str, str] = ("--within", "--since", "--until"),
    ) -> WindowSpec | None:
        """The spec of a surface's three settings (None: none given): ``within`` a
        duration (:func:`duration_ms`), or ``since`` (not both), and ``until``; times
        as ``--time-field`` takes them (RFC 3339 with a zone, or epoch seconds).
        Errors name the setting (``names``: how this surface spells them)."""
        if within is not None and since is not None:
            raise InvalidInput(f"give {names[0]} or {names[1]}, not both")
        spec = cls(
            None if within is None else duration_ms(within, names[0]),
            None if since is None else _time(since, names[1]),
            None if until is None else _time(until, names[2]),
        )
        if spec == cls():
            return None
        start = spec.since if spec.within is None else Window.last(spec.within).since
        if start is not None and spec.until is not None and start >= spec.until:
            raise InvalidInput(
                f"{names[1] if since is not None else names[0]} {time_to_text(start)} is not "
                f"before {names[2]} {time_to_text(spec.until)}: the window would be empty"
            )
        return spec

    def at(self, now: int | None = None) -> Window:
        """The window from ``now`` (default: the clock)."""
        since = self.since if self.within is None else Window.last(self.within, now).since
        return Window(since, self.until)


def _time(text: str, flag: str) -> int:
    try:
        return parse_time(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{flag}: {exc}") from None
