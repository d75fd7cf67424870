"""HBase scan filters in the form Thrift2 takes them: serialized protobufs.

Thrift2's ``TScan.filterBytes`` carries one ``FilterProtos.Filter`` message
(HBase's Filter.proto): the filter's Java class name and its own serialized
message. It replaces the filter string of Thrift1, so several filters travel
inside one ``FilterList``. The handful of messages used here are encoded by
hand (proto2 wire format, fields in number order as Java writes them) rather
than with a protobuf dependency; tests/test_hbase_filters.py checks every
encoding against bytes produced by HBase's own jars.
"""

from __future__ import annotations

from collections.abc import Sequence

_PACKAGE = "org.apache.hadoop.hbase.filter."
_VARINT, _LENGTH_DELIMITED = 0, 2  # protobuf wire types

MUST_PASS_ALL, MUST_PASS_ONE = 1, 2  # FilterList.Operator

#: A row range ``[start, stop)``; an empty ``stop`` means "to the end of the table".
RowRange = tuple[bytes, bytes]


def _varint(value: int) -> bytes:
    if value < 0x80:  # every row key length of a query's ranges: skip the loop
        return _ONE_BYTE[value]
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _int_field(number: int, value: int) -> bytes:
    return _tag(number, _VARINT) + _varint(value)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _tag(number, _LENGTH_DELIMITED) + _varint(len(data)) + data


def _filter(class_name: str, serialized: bytes) -> bytes:
    """``Filter { required string name = 1; optional bytes serialized_filter = 2; }``"""
    return _bytes_field(1, (_PACKAGE + class_name).encode("ascii")) + _bytes_field(2, serialized)


def key_only(len_as_val: bool = False) -> bytes:
    """KeyOnlyFilter: cells come back without their values (index values are empty anyway,
    the filter saves the server from reading them)."""
    return _filter("KeyOnlyFilter", _int_field(1, int(len_as_val)))


def column_pagination(limit: int, offset: int = 0) -> bytes:
    """ColumnPaginationFilter: of each row, only the columns ``offset`` .. ``offset +
    limit - 1`` in qualifier order (an index row's smallest ids), cut on the server."""
    if not 0 < limit < 1 << 31 or not 0 <= offset < 1 << 31:
        raise ValueError("column pagination wants 0 < limit and 0 <= offset, both int32")
    return _filter("ColumnPaginationFilter", _int_field(1, limit) + _int_field(2, offset))


def column_range_from(start: bytes) -> bytes:
    """ColumnRangeFilter: of each row, the columns whose qualifier is at least
    ``start`` (no upper bound): where the next page of a wide row begins."""
    return _filter("ColumnRangeFilter", _bytes_field(1, start) + _RANGE_FROM)


def multi_row_range(ranges: Sequence[RowRange]) -> bytes:
    """MultiRowRangeFilter over sorted, disjoint ``[start, stop)`` ranges.

    The region server seeks from one range to the next, so a single scan
    reads many short ranges without visiting the rows between them.
    """
    body = bytearray()
    previous_stop: bytes | None = None
    for start, stop in ranges:
        if (stop and start >= stop) or (previous_stop is not None and start < previous_stop):
            raise ValueError("row ranges must be non-empty, sorted and disjoint")
        if previous_stop == b"":
            raise ValueError("row ranges: only the last one may be open-ended")
        previous_stop = stop
        row_range = (
            _START_ROW + _varint(len(start)) + start + _START_INCLUSIVE
            + _STOP_ROW + _varint(len(stop)) + stop + _STOP_EXCLUSIVE
        )  # fmt: skip
        body += _RANGE_LIST + _varint(len(row_range)) + row_range
    return _filter("MultiRowRangeFilter", bytes(body))


# The constant fields of a RowRange, encoded once: a query builds its filter on
# every call, and field by field that cost as much Python time as the rest of it.
_RANGE_LIST = _tag(1, _LENGTH_DELIMITED)  # MultiRowRangeFilter: repeated row_range_list = 1
_START_ROW = _tag(1, _LENGTH_DELIMITED)  # RowRange: start_row = 1, stop_row = 3
_STOP_ROW = _tag(3, _LENGTH_DELIMITED)
_START_INCLUSIVE = _int_field(2, 1)  # start_row_inclusive = 2: true
_STOP_EXCLUSIVE = _int_field(4, 0)  # stop_row_inclusive = 4: false
# ColumnRangeFilter: min_column_inclusive = 2: true; max_column_inclusive = 4: false
_RANGE_FROM = _int_field(2, 1) + _int_field(4, 0)


def filter_list(filters: Sequence[bytes], operator: int = MUST_PASS_ALL) -> bytes:
    """FilterList of already serialized ``Filter`` messages, applied in order: the one
    way to give a Thrift2 scan more than one filter. (Index scans need only the
    MultiRowRangeFilter: index cells have empty values, so KeyOnlyFilter would add
    per-cell work, about a tenth of a scan's time measured, for nothing.)"""
    if operator not in (MUST_PASS_ALL, MUST_PASS_ONE):
        raise ValueError(f"unknown FilterList operator {operator}")
    body = _int_field(1, operator) + b"".join(_bytes_field(2, f) for f in filters)
    return _filter("FilterList", body)
