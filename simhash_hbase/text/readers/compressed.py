"""Compressed inputs: gzip, zstd, bz2 and xz, known by their magic bytes or suffix.

A compressed file is read through a decompressing stream, so every reader sees
its content as it would a plain file. Damage (a file cut short, or corrupt
bytes) ends the stream where it is found instead of raising: the records decoded
before it are kept, and :class:`Damage` says what happened, where, and in which
compression, for the reader to report as one skipped record.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from simhash_hbase.records import BadRecord, Problem

#: Magic bytes first: a file's content tells more than its name.
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
)
_BZ2_BLOCK = b"1AY&SY"  # after "BZh" and the block size digit: pi's first digits
SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
_ZSTD_INPUT = 8 * 1024  # a zstd stream is fed this much at a time (its output is not bounded)
_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError)


def compression_of(head: bytes, suffix: str) -> str | None:
    """``gzip``, ``zstd``, ``bz2``, ``xz`` or None, by the first bytes, else by suffix."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] == _BZ2_BLOCK:
        return "bz2"
    return SUFFIXES.get(suffix.lower())


@dataclass
class Damage:
    """Where a compressed stream stopped being readable, and why."""

    compression: str
    reason: str
    line: int  # the line of the decompressed text the damage falls in
    offset: int  # decompressed bytes read before it

    def record(self, name: str) -> BadRecord:
        return BadRecord(
            f"{name}:{self.line}",
            f"the {self.compression} data is {self.reason} after {self.offset} bytes of "
            "content: the records before were read, the rest of the file is lost "
            "(fetch or compress it again)",
            0,
            Problem.DAMAGED,
        )


class Guard(io.RawIOBase):
    """A decompressing stream that ends at the first damage, noting it."""

    def __init__(self, source: io.BufferedIOBase, compression: str) -> None:
        self._source = source
        self._compression = compression
        self.damage: Damage | None = None
        self._offset = 0
        self._lines = 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.damage is not None:
            return 0
        try:  # read1: one step of decompression, so no data decoded before damage is lost
            data = self._source.read1(len(buffer))
        except _ERRORS as exc:
            self._damaged(exc)
            return 0
        if data is None:
            return 0
        n = len(data)
        buffer[:n] = data
        self._offset += n
        self._lines += data.count(b"\n")
        return n

    def _damaged(self, exc: BaseException) -> None:
        if isinstance(exc, EOFError):
            reason = "truncated (the file ends inside the compressed stream)"
        else:
            reason = f"corrupt ({exc})"
        self.damage = Damage(self._compression, reason, self._lines, self._offset)

    def close(self) -> None:
        self._source.close()
        super().close()


class _Zstd(io.RawIOBase):
    """zstd frames one after another; a file that ends inside a frame is truncated
    (zstandard's stream reader would end there without a word)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._pending = b""
        self._at = 0  # how much of _pending was handed out
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._at == len(self._pending):
            self._pending, self._at = b"", 0
            data = self._raw.read(_ZSTD_INPUT)
            if not data:
                if self._started and not self._obj.eof:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            while data:
                if self._obj.eof:
                    self._obj = self._dctx.decompressobj()
                self._started = True
                self._pending += self._obj.decompress(data)
                data = self._obj.unused_data if self._obj.eof else b""
        n = min(len(buffer), len(self._pending) - self._at)
        buffer[:n] = self._pending[self._at : self._at + n]
        self._at += n
        return n


def decompressing(raw: BinaryIO, compression: str) -> tuple[io.BufferedReader, Guard]:
    """A buffered stream of ``raw``'s content, and its guard (whose ``damage`` says
    where it stopped, if it did)."""
    source: io.BufferedIOBase
    if compression == "gzip":
        source = gzip.GzipFile(fileobj=raw, mode="rb")
    elif compression == "bz2":
        source = bz2.BZ2File(raw)
    elif compression == "xz":
        source = lzma.LZMAFile(raw)  # noqa: SIM115 (the guard closes it)
    else:
        source = io.BufferedReader(_Zstd(raw), _ZSTD_INPUT)
    guard = Guard(source, compression)
    return io.BufferedReader(guard, 1 << 16), guard
