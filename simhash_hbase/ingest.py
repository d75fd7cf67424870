"""Input readers (text files, directories, JSONL, CSV, stdin) and the ingest job.

Readers never raise on a bad record: they yield a :class:`BadRecord` naming the
file and line, so the records around it are still indexed.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .codec import parse_fingerprint_hex
from .dedup import Pair, near_duplicate_pairs
from .errors import EmptyDocument, InvalidInput
from .fingerprint import Fingerprinter, FingerprintParams
from .index import (
    BadRecord,
    Duplicate,
    IngestSummary,
    Record,
    SimhashIndex,
    fingerprint_chunks,
)
from .scheme import Scheme

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
FORMATS = ("auto", "text", "jsonl", "csv")
STDIN = "-"
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
_READ_CHUNK = 1 << 20
_DEDUP_CHUNK = 1000
_GBK_HINT = "re-encode it as UTF-8 (for GBK text: iconv -f GB18030 -t UTF-8)"


@dataclass(frozen=True)
class SourceOptions:
    format: str = "auto"
    id_field: str = "id"
    text_field: str = "text"
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidInput(f"unknown format {self.format!r}; use one of: {', '.join(FORMATS)}")
        if self.max_bytes < 1:
            raise InvalidInput(f"--max-bytes must be positive, got {self.max_bytes}")


# -- decoding -----------------------------------------------------------------
def decode_text(raw: bytes, where: str) -> str | BadRecord:
    """Strict UTF-8 (a BOM is dropped); NUL bytes mean a binary file."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        return BadRecord(
            where,
            f"binary content (NUL byte at offset {nul}); only UTF-8 text is indexed",
            len(raw),
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return BadRecord(
            f"{where}:{line}", f"invalid UTF-8 at byte {exc.start}; {_GBK_HINT}", len(raw)
        )


def read_text_file(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """One whole file (``-``: stdin) as text, or :class:`InvalidInput` saying what is wrong."""
    if path == STDIN:
        result = next(
            _read_stream(sys.stdin.buffer, "<stdin>", "text", SourceOptions(max_bytes=max_bytes))
        )
    else:
        result = _read_document(Path(path), path, max_bytes)
    if isinstance(result, BadRecord):
        raise InvalidInput(f"{result.where}: {result.reason}")
    return result.text


def _too_big(where: str, size: int | None, max_bytes: int) -> BadRecord:
    """``size`` None: a line whose end was not even read (its size is unknown)."""
    what = f"is {size} bytes" if size is not None else "is longer than that"
    return BadRecord(
        where,
        f"the document is over the {max_bytes}-byte limit (it {what}); raise --max-bytes "
        "or split the document",
        size or max_bytes,
    )


def _read_document(path: Path, doc_id: str, max_bytes: int) -> Record | BadRecord:
    where = str(path)
    try:
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
            if len(raw) > max_bytes:
                return _too_big(where, os.fstat(f.fileno()).st_size, max_bytes)
    except OSError as exc:
        return BadRecord(where, f"cannot read the file: {exc.strerror}; check its permissions")
    text = decode_text(raw, where)
    if isinstance(text, BadRecord):
        return text
    return Record(doc_id, text, None, where, len(raw))


# -- line-oriented formats ----------------------------------------------------
def _bounded_lines(f: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) pairs; None for a line over ``max_bytes``, read in
    chunks and dropped so that memory stays bounded."""
    lineno = 0
    while True:
        line = f.readline(max_bytes + 1)
        if not line:
            return
        lineno += 1
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while (rest := f.readline(_READ_CHUNK)) and not rest.endswith(b"\n"):
                pass
            yield lineno, None
            continue
        yield lineno, line


def _field(obj: dict[str, Any], name: str, flag: str, where: str) -> str | BadRecord:
    if name not in obj:
        present = ", ".join(sorted(obj)) or "none"
        return BadRecord(where, f"no {name!r} field (fields: {present}); set {flag}")
    value = obj[name]
    if not isinstance(value, str):
        return BadRecord(
            where, f"field {name!r} is a {type(value).__name__}, not a string; quote it"
        )
    return value


def _record_from_fields(
    obj: dict[str, Any], opts: SourceOptions, where: str, size: int
) -> Record | BadRecord:
    doc_id = _field(obj, opts.id_field, "--id-field", where)
    if isinstance(doc_id, BadRecord):
        return doc_id._replace(size=size)
    text = _field(obj, opts.text_field, "--text-field", where)
    if isinstance(text, BadRecord):
        return text._replace(size=size)
    meta = {k: v for k, v in obj.items() if k not in (opts.id_field, opts.text_field)}
    return Record(doc_id, text, meta or None, where, size)


def _parse_json_line(line: bytes, where: str, opts: SourceOptions) -> Record | BadRecord | None:
    text = decode_text(line, where)
    if isinstance(text, BadRecord):
        return text._replace(where=where)
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadRecord(
            where,
            f"malformed JSON ({exc.msg} at column {exc.colno}); fix or remove the line",
            len(line),
        )
    if not isinstance(obj, dict):
        return BadRecord(where, f"a JSON {type(obj).__name__}, not an object", len(line))
    return _record_from_fields(obj, opts, where, len(line))


def _read_jsonl(f: BinaryIO, name: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    for lineno, line in _bounded_lines(f, opts.max_bytes):
        where = f"{name}:{lineno}"
        if line is None:
            yield _too_big(where, None, opts.max_bytes)
            continue
        record = _parse_json_line(line, where, opts)
        if record is not None:
            yield record


def _read_csv(
    f: BinaryIO, name: str, opts: SourceOptions, delimiter: str
) -> Iterator[Record | BadRecord]:
    # surrogateescape keeps reading past invalid UTF-8; the bad row is caught below.
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="surrogateescape", newline="")
    csv.field_size_limit(opts.max_bytes)
    reader = csv.reader(text, delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield BadRecord(f"{name}:1", f"unreadable CSV header ({exc})")
        return
    missing = [c for c in (opts.id_field, opts.text_field) if c not in header]
    if missing:
        yield BadRecord(
            f"{name}:1",
            f"no column {missing[0]!r} (columns: {', '.join(header)}); "
            "set --id-field/--text-field; the whole file was skipped",
        )
        return
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield BadRecord(f"{name}:{start}", f"malformed CSV ({exc}); fix the quoting")
            continue
        yield _csv_record(row, header, opts, f"{name}:{start}")


def _csv_record(
    row: list[str], header: list[str], opts: SourceOptions, where: str
) -> Record | BadRecord:
    size = sum(len(c) for c in row)
    if not any(row):
        return BadRecord(where, "empty CSV row", size)
    if len(row) != len(header):
        return BadRecord(
            where,
            f"row has {len(row)} fields, the header has {len(header)}; fix the quoting",
            size,
        )
    try:
        "".join(row).encode("utf-8")
    except UnicodeEncodeError:
        return BadRecord(where, f"invalid UTF-8; {_GBK_HINT}", size)
    return _record_from_fields(dict(zip(header, row)), opts, where, size)


# -- paths --------------------------------------------------------------------
def _format_of(path: Path, opts: SourceOptions) -> str:
    if opts.format != "auto":
        return opts.format
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    return "csv" if suffix in _CSV_SUFFIXES else "text"


def _read_file(path: Path, doc_id: str, opts: SourceOptions) -> Iterator[Record | BadRecord]:
    fmt = _format_of(path, opts)
    if fmt == "text":
        yield _read_document(path, doc_id, opts.max_bytes)
        return
    try:
        f = path.open("rb")
    except OSError as exc:
        yield BadRecord(str(path), f"cannot read the file: {exc.strerror}; check its permissions")
        return
    with f:
        yield from _read_stream(f, str(path), fmt, opts, _CSV_SUFFIXES.get(path.suffix, ","))


def _read_stream(
    f: BinaryIO, name: str, fmt: str, opts: SourceOptions, delimiter: str = ","
) -> Iterator[Record | BadRecord]:
    if fmt == "csv":
        yield from _read_csv(f, name, opts, delimiter)
    elif fmt == "text":
        raw = f.read(opts.max_bytes + 1)
        if len(raw) > opts.max_bytes:
            yield _too_big(name, len(raw), opts.max_bytes)
            return
        text = decode_text(raw, name)
        yield text if isinstance(text, BadRecord) else Record(name, text, None, name, len(raw))
    else:
        yield from _read_jsonl(f, name, opts)


def _walk(root: Path) -> Iterator[Path | BadRecord]:
    """Files below ``root`` in sorted order; hidden files and folders are skipped."""
    problems: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=problems.append):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for problem in problems:
            yield BadRecord(str(problem.filename), f"cannot list the folder: {problem.strerror}")
        problems.clear()
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(folder) / name


def check_paths(paths: Sequence[str]) -> None:
    """Fail before ingesting anything if a path does not exist (a typo, not bad data)."""
    if not paths:
        raise InvalidInput("give at least one PATH to ingest (a file, a folder, or - for stdin)")
    for path in paths:
        if path != STDIN and not os.path.exists(path):
            raise InvalidInput(f"{path}: no such file or folder")


def read_sources(
    paths: Sequence[str], opts: SourceOptions, stdin: BinaryIO | None = None
) -> Iterator[Record | BadRecord]:
    """Records of every path in order: folders (one doc per file, id = relative path),
    text files (one doc), JSONL/CSV (one doc per record), ``-`` (stdin, JSONL by default)."""
    check_paths(paths)
    for path in paths:
        if path == STDIN:
            fmt = "jsonl" if opts.format == "auto" else opts.format
            yield from _read_stream(stdin or sys.stdin.buffer, "<stdin>", fmt, opts)
        elif os.path.isdir(path):
            root = Path(path)
            for item in _walk(root):
                if isinstance(item, BadRecord):
                    yield item
                else:
                    yield from _read_file(item, item.relative_to(root).as_posix(), opts)
        else:
            yield from _read_file(Path(path), path, opts)


def total_bytes(paths: Sequence[str]) -> int | None:
    """Input size for a progress bar; None when it cannot be known (stdin)."""
    check_paths(paths)
    total = 0
    for path in paths:
        if path == STDIN:
            return None
        if os.path.isdir(path):
            for item in _walk(Path(path)):
                if isinstance(item, Path):
                    total += item.stat().st_size if item.is_file() else 0
        else:
            total += os.path.getsize(path)
    return total


def checkpoint_name(paths: Sequence[str], opts: SourceOptions) -> str | None:
    """Names the input (paths, sizes, mtimes, options); None for stdin, which
    cannot be read again."""
    if STDIN in paths:
        return None
    identity: list[Any] = [dataclasses.asdict(opts)]
    for path in paths:
        stat = os.stat(path)
        identity.append([os.path.abspath(path), stat.st_size, stat.st_mtime_ns])
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]
    return f"checkpoint/{digest}"


def ingest(
    index: SimhashIndex,
    paths: Sequence[str],
    opts: SourceOptions,
    *,
    workers: int = 1,
    store_text: bool = False,
    find_k: int | None = 3,
    on_error: str = "skip",
    resume: bool = True,
    fingerprints: bool = False,
    on_duplicate: Callable[[Duplicate], None] | None = None,
    on_progress: Callable[[IngestSummary], None] | None = None,
) -> IngestSummary:
    """The streaming-dedup job: index every record and report near-copies found.

    ``fingerprints``: the input is ``HEX`` or ``ID<TAB>HEX`` lines (a Spark job's
    output, say) rather than documents.

    After each batch the number of input records done is saved in the index; a
    re-run of the same command on the same files resumes after them, so an
    interrupted night's ingest does not start over (writes are idempotent, so
    the batch in flight when it stopped is simply written again).
    """
    checkpoint = checkpoint_name(paths, opts) if resume else None
    done = (index.store.get_meta(checkpoint) or {}).get("records", 0) if checkpoint else 0

    def progress(summary: IngestSummary) -> None:
        if checkpoint:
            index.store.put_meta(checkpoint, {"records": done + summary.records})
        if on_progress is not None:
            on_progress(summary)

    common: dict[str, Any] = {
        "find_k": find_k,
        "on_error": on_error,
        "on_duplicate": on_duplicate,
        "on_progress": progress,
    }
    if fingerprints:
        items = islice(read_fingerprint_lines(paths), done, None)
        summary = index.add_fingerprints(items, **common)
    else:
        records = islice(read_sources(paths, opts), done, None)
        summary = index.add_many(records, workers=workers, store_text=store_text, **common)
    summary.resumed_after = done
    if checkpoint:
        index.store.delete_meta(checkpoint)
    return summary


@dataclass
class DedupResult:
    """Ids in input order, near-duplicate pairs among them, and what was skipped."""

    ids: list[str]
    pairs: list[Pair]
    skipped: list[tuple[str, str]]


def read_fingerprint_lines(paths: Sequence[str]) -> Iterator[tuple[str, int] | BadRecord]:
    """Lines ``HEX`` or ``ID<TAB>HEX``; a bare HEX gets the id ``file:line``."""
    check_paths(paths)
    for path in paths:
        f = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115
        name = "<stdin>" if path == STDIN else path
        try:
            for lineno, raw in enumerate(f, 1):
                where = f"{name}:{lineno}"
                line = decode_text(raw, where)
                if isinstance(line, BadRecord):
                    yield line._replace(where=where)
                elif line.strip():
                    yield _fingerprint_line(line.rstrip("\r\n"), where)
        finally:
            if f is not sys.stdin.buffer:
                f.close()


def _fingerprint_line(line: str, where: str) -> tuple[str, int] | BadRecord:
    doc_id, _, hex_fp = line.rpartition("\t")
    try:
        return doc_id or where, parse_fingerprint_hex(hex_fp)
    except InvalidInput as exc:
        return BadRecord(where, str(exc))


def find_duplicates(
    paths: Sequence[str],
    opts: SourceOptions,
    *,
    k: int,
    scheme: Scheme,
    params: FingerprintParams,
    workers: int = 1,
    fingerprints: bool = False,
) -> DedupResult:
    """All near-duplicate pairs within the input (no index): documents, or
    precomputed fingerprints with ``fingerprints=True``."""
    scheme.check_k(k)
    ids: list[str] = []
    fps: list[int] = []
    skipped: list[tuple[str, str]] = []
    if fingerprints:
        items = read_fingerprint_lines(paths)
    else:
        items = _fingerprinted(read_sources(paths, opts), Fingerprinter(params), workers)
    for item in items:
        if isinstance(item, BadRecord):
            skipped.append((item.where, item.reason))
        else:
            ids.append(item[0])
            fps.append(item[1])
    pairs = near_duplicate_pairs(np.array(fps, dtype=np.uint64), k, scheme)
    return DedupResult(ids, pairs, skipped)


def _fingerprinted(
    records: Iterator[Record | BadRecord], fingerprinter: Fingerprinter, workers: int
) -> Iterator[tuple[str, int] | BadRecord]:
    for chunk, fps in fingerprint_chunks(records, fingerprinter, workers, _DEDUP_CHUNK):
        for record, fp in zip(chunk, fps):
            if isinstance(record, BadRecord):
                yield record
            elif isinstance(fp, EmptyDocument):
                yield BadRecord(record.where, f"document {record.doc_id!r}: {fp}")
            else:
                yield record.doc_id, fp
