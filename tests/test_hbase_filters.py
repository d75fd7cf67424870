"""Filter protobufs against the bytes HBase 2.6's own jars produce for the same filters.

tests/data/hbase_filters.tsv was written by tests/data/HBaseFilterFixtures.java
(``ProtobufUtil.toFilter(filter).toByteArray()``); each row here builds the same
filter with :mod:`simhash_hbase.store.hbase.filters`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from simhash_hbase.store.hbase import filters as hf

FIXTURES = dict(
    line.split("\t")
    for line in (Path(__file__).parent / "data" / "hbase_filters.tsv").read_text().splitlines()
)


def _ranges(*hexes: str) -> list[hf.RowRange]:
    raw = [bytes.fromhex(h) for h in hexes]
    return list(zip(raw[::2], raw[1::2]))


_SPREAD = [bound for i in range(200) for bound in (f"{i * 1000003:08x}01", f"{i * 1000003:08x}02")]

CASES: dict[str, Callable[[], bytes]] = {
    "key_only": hf.key_only,
    "key_only_len_as_val": lambda: hf.key_only(len_as_val=True),
    "mrrf_one": lambda: hf.multi_row_range(_ranges("1234560001", "1234560002")),
    "mrrf_two": lambda: hf.multi_row_range(
        _ranges("0000000001", "0000000002", "fffffffc0a", "fffffffc0b")
    ),
    "mrrf_open_start": lambda: hf.multi_row_range(_ranges("", "10")),
    "mrrf_open_stop": lambda: hf.multi_row_range(_ranges("f0", "")),
    "mrrf_200": lambda: hf.multi_row_range(_ranges(*_SPREAD)),  # multi-byte length varints
    "list_all_mrrf_keyonly": lambda: hf.filter_list(
        [hf.multi_row_range(_ranges("1234560001", "1234560002")), hf.key_only()]
    ),
    "list_one_keyonly": lambda: hf.filter_list([hf.key_only()], hf.MUST_PASS_ONE),
    "list_empty": lambda: hf.filter_list([]),
    "column_range_from": lambda: hf.column_range_from(bytes.fromhex("0123456789abcdef6964")),
    "column_range_from_empty": lambda: hf.column_range_from(b""),
}


def test_every_fixture_has_a_case() -> None:
    assert set(CASES) == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_encoding_matches_hbase(name: str) -> None:
    assert CASES[name]().hex() == FIXTURES[name]


@pytest.mark.parametrize(
    "ranges",
    [
        [(b"\x02", b"\x01")],  # empty range
        [(b"\x01", b"\x01")],
        [(b"\x01", b"\x03"), (b"\x02", b"\x04")],  # overlapping
        [(b"\x05", b"\x06"), (b"\x01", b"\x02")],  # unsorted
        [(b"\x05", b""), (b"\x07", b"\x08")],  # open end before another range
    ],
)
def test_bad_ranges_are_refused(ranges: list[hf.RowRange]) -> None:
    with pytest.raises(ValueError, match="row ranges"):
        hf.multi_row_range(ranges)


def test_adjacent_ranges_are_accepted() -> None:
    hf.multi_row_range([(b"\x01", b"\x02"), (b"\x02", b"\x03")])


def test_unknown_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="operator"):
        hf.filter_list([], operator=3)
