"""The bulk fingerprint-line reader gives exactly what reading line by line gives:
the same ids and fingerprints in the same order, the same bad lines with the same
file:line and reason, whatever the chunk size and however lines are damaged."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import BadRecord
from simhash_hbase.text.readers import (
    _FINGERPRINT_LINE_BYTES,
    _fingerprint_blocks,
    _long_line,
    bounded_lines,
    fingerprint_record,
    in_order,
    read_fingerprint_arrays,
)

NAME = "fps.tsv"
_HEX16 = st.integers(0, 2**64 - 1).map(lambda v: f"{v:016x}")
_ID = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=8)


def _per_line(data: bytes) -> list[tuple[str, int] | BadRecord]:
    """The per-line reference: one readline and one parse per line."""
    out: list[tuple[str, int] | BadRecord] = []
    for lineno, raw, _ in bounded_lines(io.BytesIO(data), _FINGERPRINT_LINE_BYTES):
        where = f"{NAME}:{lineno}"
        item = _long_line(where) if raw is None else fingerprint_record(raw, where)
        if item is not None:
            out.append(item)
    return out


def _bulk(data: bytes, chunk: int) -> list[tuple[str, int] | BadRecord]:
    return list(in_order(_fingerprint_blocks(io.BytesIO(data), NAME, chunk)))


_LINE = st.one_of(
    st.builds(lambda i, h: f"{i}\t{h}".encode(), _ID, _HEX16),  # the regular shape
    st.builds(lambda i, h: f"{i}\t{h.upper()}\r".encode(), _ID, _HEX16),
    st.builds(lambda i, h: f"{i}\t{h}\r\r".encode(), _ID, _HEX16),
    st.builds(lambda i, h: f"{i}\t0x{h[3:]}".encode(), _ID, _HEX16),
    st.builds(lambda h: h.encode(), _HEX16),  # bare hex: the id is file:line
    st.builds(lambda i, h: f"{i}\t{h}z".encode(), _ID, _HEX16),
    st.builds(lambda i, h: f"{i}\t{h} ".encode(), _ID, _HEX16),
    st.builds(lambda i, h: f"\ufeff{i}\t{h}".encode(), _ID, _HEX16),  # BOM
    st.builds(lambda i, h: f"{i}\x00\t{h}".encode(), _ID, _HEX16),  # NUL
    st.builds(lambda i, h: i.encode() + b"\xff\t" + h.encode(), _ID, _HEX16),  # not UTF-8
    st.builds(lambda n, h: b"a" * n + b"\t" + h.encode(), st.integers(4070, 4100), _HEX16),
    st.integers(4090, 9000).map(lambda n: b"b" * n),  # too long
    st.sampled_from([b"", b" ", b"\r", b"\t", b"\x0c", "\u3000".encode()]),  # blank
    st.binary(max_size=24),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINE, max_size=30),
    final_newline=st.booleans(),
    chunk=st.sampled_from([1, 5, 17, 64, 4096, 4097, 5000, 1 << 20]),
)
def test_bulk_reader_matches_per_line(lines: list[bytes], final_newline: bool, chunk: int) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    assert _bulk(data, chunk) == _per_line(data)


def test_regular_lines_take_the_bulk_path_and_keep_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    fps = rng.integers(0, 2**64 - 1, size=5000, dtype=np.uint64, endpoint=True)
    rows = [f"doc-{i}\t{int(v):016x}" for i, v in enumerate(fps)]
    rows[1234] = "doc-1234\tnot-hex"
    path = tmp_path / NAME
    path.write_text("\n".join(rows) + "\n")
    ids, got, skipped = read_fingerprint_arrays([str(path)])
    keep = np.arange(5000) != 1234
    assert ids == [f"doc-{i}" for i in range(5000) if i != 1234]
    assert got.dtype == np.uint64 and np.array_equal(got, fps[keep])
    assert [(b.where, b.problem.name) for b in skipped] == [(f"{path}:1235", "BAD_FINGERPRINT")]
