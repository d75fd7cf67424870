"""The time window value: parsing its settings and which times it holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase.errors import InvalidInput
from simhash_hbase.layout.window import UNITS, Window, WindowSpec, duration_ms
from simhash_hbase.records import MAX_TIME_MS, MIN_TIME_MS, time_to_text

NOW = 1_795_953_600_000  # 2026-11-29T12:00:00Z
times = st.integers(MIN_TIME_MS, MAX_TIME_MS)


@given(st.integers(1, 10_000), st.sampled_from(sorted(UNITS)))
def test_durations(n: int, unit: str) -> None:
    assert duration_ms(f"{n}{unit}") == n * UNITS[unit]
    window = Window.parse(within=f" {n}{unit.upper()} ", now=NOW)
    assert window == Window(NOW - n * UNITS[unit], None)


@pytest.mark.parametrize("bad", ["", "30", "d", "0d", "-3d", "1.5d", "30y", "3 days", "1e9w"])
def test_bad_durations_name_the_flag(bad: str) -> None:
    with pytest.raises(InvalidInput, match=r"--within .*e\.g\. 30d"):
        Window.parse(within=bad)
    with pytest.raises(InvalidInput, match=r"SHDB_WITHIN"):
        Window.parse(within=bad, names=("SHDB_WITHIN", "since", "until"))


@given(st.lists(times, min_size=2, max_size=2, unique=True), times)
def test_since_until_hold_half_open(bounds: list[int], t: int) -> None:
    since, until = sorted(bounds)
    window = Window.parse(since=time_to_text(since), until=str(until / 1000))
    assert window is not None and window.since == since
    assert window.holds(t) == (since <= t < (window.until or 0))
    assert not window.holds(None)  # a document without a time is outside
    assert Window().holds(None) and Window().holds(t) and not Window().bounded


def test_parse_errors() -> None:
    assert Window.parse() is None
    with pytest.raises(InvalidInput, match="--within or --since, not both"):
        Window.parse(within="1d", since="0")
    with pytest.raises(InvalidInput, match=r"--since: time .yesterday.*\(e\.g\. 2026"):
        Window.parse(since="yesterday")
    with pytest.raises(InvalidInput, match="--until: time"):
        Window.parse(until="2026-11-29")  # no zone
    with pytest.raises(InvalidInput, match=r"--since .* is not before --until"):
        Window.parse(since="2000", until="1000")
    with pytest.raises(InvalidInput, match="empty window"):
        Window(5, 5)


@given(times, times, times)
def test_narrowed_is_both(a: int, b: int, t: int) -> None:
    retain = Window(a, None)
    asked = Window(None, b) if b > a else None
    both = retain.narrowed(asked)
    assert both.holds(t) == (retain.holds(t) and (asked is None or asked.holds(t)))


@given(st.integers(1, 1000), st.integers(NOW - 10**9, NOW + 10**9))
def test_a_spec_counts_back_from_when_it_is_used(days: int, later: int) -> None:
    """A service's --within is read once and counts back from each request."""
    spec = WindowSpec.parse(within=f"{days}d", names=("within", "since", "until"))
    assert spec == WindowSpec(days * UNITS["d"]) and spec is not None
    assert spec.at(later) == Window(later - days * UNITS["d"], None)
    assert WindowSpec.parse() is None
    assert WindowSpec.parse(since="1", until="2") == WindowSpec(None, 1000, 2000)
