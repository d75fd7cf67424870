"""Fingerprint lines (``HEX`` or ``ID<TAB>HEX``), parsed in bulk with NumPy."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import BadRecord, Problem, parse_fingerprint_hex
from simhash_hbase.text.readers.base import (
    READ_CHUNK,
    STDIN,
    STDIN_NAME,
    as_utf8,
    decode_text,
    display_path,
    too_large,
    unreadable,
)
from simhash_hbase.text.readers.paths import check_paths

_FINGERPRINT_LINE_BYTES = 4096  # an id (<= 1024 bytes), a tab and 16 hex digits fit


# -- fingerprint lines --------------------------------------------------------
@dataclass
class FingerprintBlock:
    """Consecutive fingerprint lines parsed in bulk: the good ones as ids and a
    uint64 array, in input order, and the bad ones, each with how many good
    lines of the block came before it (so the input order can be rebuilt)."""

    ids: list[str]
    fps: np.ndarray
    bad: list[tuple[int, BadRecord]]


def _hex_table() -> np.ndarray:
    table = np.full(256, 255, dtype=np.uint8)
    for value, digit in enumerate("0123456789abcdef"):
        table[ord(digit)] = table[ord(digit.upper())] = value
    return table


_HEX_VALUE = _hex_table()
_NIBBLE_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)
_BOM = np.frombuffer(b"\xef\xbb\xbf", dtype=np.uint8)
_REGULAR_TAIL = 17  # a tab and exactly 16 hex digits end a line the bulk path takes


def read_fingerprint_lines(
    paths: Sequence[str], stdin: BinaryIO | None = None
) -> Iterator[tuple[str, int] | BadRecord]:
    """Lines ``HEX`` or ``ID<TAB>HEX``; a bare HEX gets the id ``file:line``."""
    return in_order(read_fingerprint_blocks(paths, stdin))


def in_order(blocks: Iterable[FingerprintBlock]) -> Iterator[tuple[str, int] | BadRecord]:
    """The blocks' good and bad lines one by one, in input order."""
    for block in blocks:
        start = 0
        for pos, bad in block.bad:
            yield from zip(block.ids[start:pos], block.fps[start:pos].tolist())
            yield bad
            start = pos
        yield from zip(block.ids[start:], block.fps[start:].tolist())


def read_fingerprint_arrays(paths: Sequence[str]) -> tuple[list[str], np.ndarray, list[BadRecord]]:
    """All good lines as ids and a uint64 array, and the bad lines, without a
    Python object per fingerprint."""
    ids: list[str] = []
    fps: list[np.ndarray] = [np.zeros(0, dtype=np.uint64)]
    skipped: list[BadRecord] = []
    for block in read_fingerprint_blocks(paths):
        ids.extend(block.ids)
        fps.append(block.fps)
        skipped.extend(bad for _, bad in block.bad)
    return ids, np.concatenate(fps), skipped


def read_fingerprint_blocks(
    paths: Sequence[str], stdin: BinaryIO | None = None, chunk: int = READ_CHUNK
) -> Iterator[FingerprintBlock]:
    """The lines of :func:`read_fingerprint_lines`, ``chunk`` bytes at a time."""
    check_paths(paths)
    for path in paths:
        name = STDIN_NAME if path == STDIN else display_path(path)
        if path == STDIN:
            yield from _fingerprint_blocks(as_utf8(stdin or sys.stdin.buffer), name, chunk)
            continue
        try:
            f = open(path, "rb")  # noqa: SIM115
        except OSError as exc:
            yield _bad_block(unreadable(name, exc))
            continue
        with f:
            yield from _fingerprint_blocks(as_utf8(f), name, chunk)


def _bad_block(bad: BadRecord) -> FingerprintBlock:
    return FingerprintBlock([], np.zeros(0, dtype=np.uint64), [(0, bad)])


def _long_line(where: str) -> BadRecord:
    reason = f"the line is over {_FINGERPRINT_LINE_BYTES} bytes (expected ID<TAB>HEX)"
    return too_large(where, None, _FINGERPRINT_LINE_BYTES)._replace(reason=reason)


def _fingerprint_blocks(f: BinaryIO, name: str, chunk: int) -> Iterator[FingerprintBlock]:
    """Whole lines, ``chunk`` bytes at a time; a line over the limit is reported
    as soon as it is, and the rest of it is read and dropped, so memory stays
    within a chunk plus one line."""
    lineno = 1  # the number of the first line not handed out yet
    carry = b""
    skipping = False
    while True:
        data = f.read(chunk)
        eof = not data
        if skipping and not eof:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            skipping, data = False, data[nl + 1 :]
        buf = carry + data
        if eof:
            if buf:
                yield _parse_lines(buf, name, lineno)
            return
        cut = buf.rfind(b"\n") + 1
        carry = buf[cut:]
        if cut:
            yield _parse_lines(buf[:cut], name, lineno)
            lineno += buf.count(b"\n", 0, cut)
        if len(carry) > _FINGERPRINT_LINE_BYTES:
            yield _bad_block(_long_line(f"{name}:{lineno}"))
            lineno += 1
            carry, skipping = b"", True


def _parse_lines(buf: bytes, name: str, first: int) -> FingerprintBlock:
    """Lines ending in a tab and 16 hex digits are parsed with NumPy; any other
    line (blank, short, 0x, BOM, NUL, not UTF-8, too long) goes through
    :func:`fingerprint_record`, so its result and report are the per-line ones."""
    padded = np.frombuffer(buf + bytes(_REGULAR_TAIL), dtype=np.uint8)
    arr = padded[: len(buf)]
    ends = np.flatnonzero(arr == 10)
    if not buf.endswith(b"\n"):
        ends = np.append(ends, len(arr))
    starts = np.concatenate(([0], ends[:-1] + 1))
    cr = (ends > starts) & (padded[ends - 1] == 13)  # an empty line has no \r to strip
    stop = ends - cr
    windows = np.lib.stride_tricks.sliding_window_view(padded, 16)
    nibbles = _HEX_VALUE[windows[np.maximum(stop - 16, 0)]]
    regular = (
        (stop - starts > _REGULAR_TAIL)
        & (ends - starts <= _FINGERPRINT_LINE_BYTES)
        & (padded[np.maximum(stop - _REGULAR_TAIL, 0)] == 9)
        & (nibbles < 16).all(axis=1)
        & (windows[starts, :3] != _BOM).any(axis=1)
    )
    regular[np.searchsorted(ends, np.flatnonzero(arr == 0))] = False
    try:
        text = buf.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
        regular[:] = False
    good = np.flatnonzero(regular)
    ids = _regular_ids(text, good, cr, buf.count(b"\t") == len(good) == len(ends))
    nibbles = nibbles[good]
    fps = ((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view(">u8").ravel().astype(np.uint64)
    odd = np.flatnonzero(~regular)
    if not len(odd):
        return FingerprintBlock(ids, fps, [])
    return _merge_odd(buf, name, first, (starts, ends), odd, FingerprintBlock(ids, fps, []), good)


def _regular_ids(text: str, good: np.ndarray, cr: np.ndarray, only_separators: bool) -> list[str]:
    """The ids of the regular lines. When every line is regular and its tab the
    only one, splitting on tabs and newlines gives ids and hex alternately."""
    if only_separators and not cr.any():
        return text.replace("\n", "\t").split("\t")[0 : 2 * len(good) : 2]
    lines = text.split("\n")
    return [lines[i][:-c] for i, c in zip(good.tolist(), (_REGULAR_TAIL + cr[good]).tolist())]


def _merge_odd(
    buf: bytes,
    name: str,
    first: int,
    bounds: tuple[np.ndarray, np.ndarray],
    odd: np.ndarray,
    block: FingerprintBlock,
    good: np.ndarray,
) -> FingerprintBlock:
    """Add the lines the bulk path left (``odd``) to ``block``, in input order."""
    starts, ends = bounds
    extra_pos: list[int] = []
    extra_ids: list[str] = []
    extra_fps: list[int] = []
    bad_lines: list[tuple[int, BadRecord]] = []
    for i in odd.tolist():
        item = fingerprint_record(buf[starts[i] : ends[i] + 1], f"{name}:{first + i}")
        if isinstance(item, BadRecord):
            bad_lines.append((i, item))
        elif item is not None:
            extra_pos.append(i)
            extra_ids.append(item[0])
            extra_fps.append(item[1])
    pos = np.concatenate((good, np.array(extra_pos, dtype=np.int64)))
    order = np.argsort(pos, kind="stable")
    ids = block.ids + extra_ids
    fps = np.concatenate((block.fps, np.array(extra_fps, dtype=np.uint64)))
    kept = pos[order]
    bad = [(int(np.searchsorted(kept, i)), b) for i, b in bad_lines]
    return FingerprintBlock([ids[j] for j in order.tolist()], fps[order], bad)


def fingerprint_record(raw: bytes, where: str) -> tuple[str, int] | BadRecord | None:
    """One raw line (with its newline, if any) the per-line way; None for a blank line."""
    if len(raw) - raw.endswith(b"\n") > _FINGERPRINT_LINE_BYTES:
        return _long_line(where)
    line = decode_text(raw, where, wide=False)
    if isinstance(line, BadRecord):
        return line._replace(where=where)
    return _fingerprint_line(line.rstrip("\r\n"), where) if line.strip() else None


def _fingerprint_line(line: str, where: str) -> tuple[str, int] | BadRecord:
    doc_id, _, hex_fp = line.rpartition("\t")
    try:
        return doc_id or where, parse_fingerprint_hex(hex_fp)
    except InvalidInput as exc:
        return BadRecord(where, str(exc), 0, Problem.BAD_FINGERPRINT)
