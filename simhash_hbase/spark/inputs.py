"""What the Spark jobs read: the same records, ids and ``file:line`` as `shdb ingest`.

The driver lists the input (folders walked exactly as :func:`read_sources` walks
them) into *units*: one per file, and large JSONL files cut into byte ranges so
one file spreads over many tasks. Each task reads its units with the project's
own readers, so a bad record is reported exactly as `shdb ingest` reports it.
Parquet inputs go through Spark's reader (any Hadoop file system URL).

Every record gets a *position*, ``file ordinal << 40 | ordinal in the file``:
sorting by it gives the order in which `shdb ingest`/`shdb dedup` read them.
JSONL, text and CSV files are read by path on the executors, so on a cluster they
must sit on a file system every node mounts at the same path (Parquet need not).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers import (
    STDIN,
    SourceOptions,
    bounded_lines,
    check_paths,
    display_path,
    format_of,
    parse_json_line,
    read_file,
    relative_id,
    too_large,
    walk,
)

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import SparkSession

POSITION_BITS = 40  # records per file < 2**40; file ordinals < 2**23
DEFAULT_SPLIT_BYTES = 64 << 20
_MIN_SPLIT = 1 << 20
PARQUET = "parquet"
FORMATS = ("auto", "text", "jsonl", "csv", PARQUET)
_SKIP_CHUNK = 1 << 20

Item = tuple[int, Record | BadRecord]  # (position, record)


@dataclass(frozen=True)
class Unit:
    """A file, or a byte range ``[start, end)`` of a JSONL file, read by one task."""

    ordinal: int
    path: str
    doc_id: str  # the id of a whole-file document: relative path in a folder
    named: bool = False  # named as input, not found in a folder (:func:`read_file`)
    jsonl: bool = False
    start: int = 0
    end: int | None = None
    first_line: int = 1  # the number of the line holding byte ``start``


@dataclass
class Plan:
    units: list[Unit]
    parquet: dict[str, int]  # Parquet file (URL path part) -> ordinal; read by Spark
    problems: list[BadRecord]  # found while listing (unreadable folders, special files)


def position(ordinal: int, seq: int) -> int:
    return (ordinal << POSITION_BITS) | seq


def _is_parquet(path: str, fmt: str) -> bool:
    return fmt == PARQUET or (fmt == "auto" and path.rstrip("/").lower().endswith(".parquet"))


def plan(
    paths: Sequence[str],
    fmt: str,
    opts: SourceOptions,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    parquet_files: Callable[[str], list[str]] = lambda path: [path],
    tasks: int = 1,
) -> Plan:
    """List the input on the driver; fails at once on a path that does not exist.

    ``parquet_files`` lists the files of a Parquet input (a file, a dataset folder
    or a URL); each file gets its own ordinal, in name order. JSONL files are cut
    into ranges of ``split_bytes``, or smaller to make ``tasks`` ranges in all.
    """
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}")
    if STDIN in paths:
        raise InvalidInput("Spark jobs read files, folders and URLs, not stdin (-)")
    if split_bytes < 1:
        raise InvalidInput(f"the split size must be positive, got {split_bytes}")
    if not paths:
        raise InvalidInput("no input given (files, folders or Parquet datasets)")
    local = [p for p in paths if not (_is_parquet(p, fmt) and "://" in p)]
    if local:
        check_paths(local)
    out = Plan([], {}, [])
    listed: list[tuple[int, Path, str]] = []
    ordinal = 0
    for path in paths:
        if _is_parquet(path, fmt):
            for name in sorted(parquet_files(path)):
                out.parquet[urlsplit(name).path] = ordinal
                ordinal += 1
            continue
        files: Iterable[tuple[Path | BadRecord, str | BadRecord]]
        if os.path.isdir(path):
            root = Path(path)
            files = (
                (item, item if isinstance(item, BadRecord) else relative_id(item, root))
                for item in walk(root)
            )
        else:
            files = [(Path(path), path)]
        for item, doc_id in files:
            if isinstance(doc_id, BadRecord):
                out.problems.append(doc_id)
                continue
            assert isinstance(item, Path)
            listed.append((ordinal, item, doc_id))
            ordinal += 1
    split = _split_for(listed, opts, split_bytes, tasks)
    named = {str(Path(p)) for p in local if not os.path.isdir(p)}
    for ordinal, item, doc_id in listed:
        units = _units(ordinal, item, doc_id, opts, split)
        out.units += [replace(unit, named=unit.path in named) for unit in units]
    return out


def _split_for(
    listed: list[tuple[int, Path, str]], opts: SourceOptions, split_bytes: int, tasks: int
) -> int:
    """``split_bytes``, or less so that the JSONL input makes at least ``tasks``
    ranges (one small file must not leave all but one core idle); >= 1 MiB."""
    total = 0
    for _, path, _ in listed:
        if format_of(path, opts) == "jsonl":
            with contextlib.suppress(OSError):  # the reader reports why it cannot be read
                total += path.stat().st_size
    return max(min(split_bytes, -(-total // max(tasks, 1))), min(split_bytes, _MIN_SPLIT))


def _units(
    ordinal: int, path: Path, doc_id: str, opts: SourceOptions, split_bytes: int
) -> list[Unit]:
    whole = Unit(ordinal, str(path), doc_id)
    if format_of(path, opts) != "jsonl":
        return [whole]
    try:
        size = path.stat().st_size
    except OSError:
        return [whole]  # the reader reports why it cannot be read
    starts = range(0, max(size, 1), split_bytes)
    return [
        replace(whole, jsonl=True, start=s, end=min(s + split_bytes, size) if size else None)
        for s in starts
    ]


def _count_newlines(unit: Unit) -> tuple[int, int, int]:
    """(ordinal, start, newlines in [start, end)) of a range."""
    count = 0
    with open(unit.path, "rb") as f:
        f.seek(unit.start)
        left = (unit.end or 0) - unit.start
        while left > 0 and (chunk := f.read(min(_SKIP_CHUNK, left))):
            count += chunk.count(b"\n")
            left -= len(chunk)
    return unit.ordinal, unit.start, count


def number_lines(spark: SparkSession, units: list[Unit]) -> list[Unit]:
    """Give each range of a split file its first line number: the ranges' newlines
    are counted in parallel, then summed up on the driver."""
    split = {u.ordinal for u in units if u.start > 0}
    ranges = [u for u in units if u.ordinal in split]
    if not ranges:
        return units
    sc = spark.sparkContext
    counts = sc.parallelize(ranges, min(len(ranges), sc.defaultParallelism * 4))
    before: dict[tuple[int, int], int] = {}
    running: dict[int, int] = {}
    for ordinal, start, count in sorted(counts.map(_count_newlines).collect()):
        before[(ordinal, start)] = running.get(ordinal, 0)
        running[ordinal] = running.get(ordinal, 0) + count
    return [
        replace(u, first_line=before[(u.ordinal, u.start)] + 1) if u.ordinal in split else u
        for u in units
    ]


def read_unit(unit: Unit, opts: SourceOptions) -> Iterator[Item]:
    """The records of one unit with their positions (runs on an executor)."""
    if not unit.jsonl:
        found = read_file(Path(unit.path), unit.doc_id, opts, named=unit.named)
        for seq, record in enumerate(found):
            yield position(unit.ordinal, seq), record
        return
    try:
        f = open(unit.path, "rb")  # noqa: SIM115
    except OSError as exc:
        reason = f"cannot read it: {exc.strerror or exc}"
        yield position(unit.ordinal, 0), BadRecord(unit.path, reason, 0, Problem.UNREADABLE)
        return
    with f:
        yield from _read_range(f, unit, opts)


def _read_range(f: Any, unit: Unit, opts: SourceOptions) -> Iterator[Item]:
    """JSONL lines that start in ``[start, end)``: a range starting inside a line
    leaves that line to the range before it, which reads it to its end."""
    lineno = unit.first_line
    if unit.start:
        f.seek(unit.start - 1)
        if f.read(1) != b"\n":
            lineno += 1
            while (part := f.readline(_SKIP_CHUNK)) and not part.endswith(b"\n"):
                pass
    name = display_path(unit.path)
    end = unit.end if unit.end is not None else float("inf")
    at = f.tell()
    for _, line, _ in bounded_lines(f, opts.max_bytes):
        if at >= end:
            return
        where = f"{name}:{lineno}"
        record = (
            too_large(where, None, opts.max_bytes)
            if line is None
            else parse_json_line(line, where, opts)
        )
        if record is not None:
            yield position(unit.ordinal, lineno), record
        lineno += 1
        at = f.tell()


def read_units(units: Iterable[Unit], opts: SourceOptions) -> Iterator[Item]:
    for unit in units:
        yield from read_unit(unit, opts)


def records(
    spark: SparkSession, paths: Sequence[str], fmt: str, opts: SourceOptions, split_bytes: int
) -> RDD[Item]:
    """Every input record (good or bad) with its position, as an RDD."""
    parquet_inputs: list[str] = []

    def parquet_files(path: str) -> list[str]:
        parquet_inputs.append(path)
        return list(spark.read.parquet(path).inputFiles())

    sc = spark.sparkContext
    found = plan(paths, fmt, opts, split_bytes, parquet_files, sc.defaultParallelism * 2)
    units = number_lines(spark, found.units)
    parts = max(1, min(len(units), sc.defaultParallelism * 4))
    # Consecutive units per partition: a folder of small files is read in batches.
    rdd: RDD[Item] = sc.parallelize(units, parts).mapPartitions(lambda us: read_units(us, opts))
    if found.problems:
        rdd = rdd.union(sc.parallelize([(-1, p) for p in found.problems], 1))
    if parquet_inputs:
        rdd = rdd.union(parquet_records(spark, parquet_inputs, found.parquet, opts))
    return rdd


def parquet_records(
    spark: SparkSession, paths: list[str], ordinals: dict[str, int], opts: SourceOptions
) -> RDD[Item]:
    """Rows of Parquet files or datasets: the id and text columns must be strings;
    other columns become the document's meta. A null id or text is a bad record."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    df = spark.read.parquet(*paths)
    types = {f.name: f.dataType for f in df.schema.fields}
    for field in (opts.id_field, opts.text_field):
        if field not in types:
            present = ", ".join(types) or "none"
            raise InvalidInput(f"{paths[0]}: no {field!r} column (columns: {present})")
        if not isinstance(types[field], StringType):
            raise InvalidInput(
                f"{paths[0]}: column {field!r} is {types[field].simpleString()}, not a string"
            )
    fields = (opts.id_field, opts.text_field)
    rows = df.select(
        "*", F.col("_metadata.file_path").alias("_file"), F.col("_metadata.row_index").alias("_row")
    )

    def to_item(row: Any) -> Item:
        data = row.asDict(recursive=True)
        file, index = data.pop("_file"), data.pop("_row")
        where = f"{file}:{index + 1}"
        pos = position(ordinals[urlsplit(file).path], index)
        doc_id, text = data.pop(fields[0]), data.pop(fields[1])
        if doc_id is None or text is None:
            which = fields[0] if doc_id is None else fields[1]
            return pos, BadRecord(where, f"{which!r} is null", 0, Problem.MISSING_FIELD)
        meta = {k: v for k, v in data.items() if v is not None} or None
        return pos, Record(doc_id, text, meta, where, len(text.encode()))

    return rows.rdd.map(to_item)
