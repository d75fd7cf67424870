"""Files, folders and stdin: which reader reads what, and the walk of a folder."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from simhash_hbase.errors import InvalidInput, InvalidSetting
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.extract import TEXT_FORMATS
from simhash_hbase.text.html import DEFAULT_HTML_MODE
from simhash_hbase.text.readers.base import (
    DEFAULT_MAX_BYTES,
    STDIN,
    STDIN_NAME,
    SourceOptions,
    as_text,
    as_utf8,
    check_readable_file,
    decoded,
    display_path,
    read_bounded,
    too_large,
    unreadable,
)
from simhash_hbase.text.readers.compressed import SUFFIXES as COMPRESSED_SUFFIXES
from simhash_hbase.text.readers.delimited import read_csv
from simhash_hbase.text.readers.jsonl import read_json_values, read_jsonl
from simhash_hbase.text.readers.sniff import (
    CSV_SUFFIXES,
    HEAD,
    HTML_SUFFIXES,
    JSONL_SUFFIXES,
    RECORD_KINDS,
    Content,
    open_content,
)
from simhash_hbase.text.readers.warc import read_warc


def read_document(path: Path, doc_id: str, max_bytes: int, fmt: str = "text") -> Record | BadRecord:
    """One file as one document, decompressed as ingest decompresses it (:mod:`.sniff`)."""
    where = display_path(path)
    try:
        with path.open("rb") as f:
            content = open_content(f, path.name, fmt)
            raw, more = read_bounded(content.stream, max_bytes)
            damage = content.damage(where)
            if damage is not None:  # a truncated or corrupt archive: not indexed in part
                return damage
            if more:
                size = os.fstat(f.fileno()).st_size if content.compression is None else None
                return too_large(where, size if size and size > max_bytes else None, max_bytes)
    except OSError as exc:
        return unreadable(where, exc)
    return decoded(raw, where, doc_id, fmt)


def read_text_file(
    path: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stdin: BinaryIO | None = None,
    *,
    fmt: str = "auto",
    html: str = DEFAULT_HTML_MODE,
) -> str:
    """One whole file (``-``: stdin) as the text it is fingerprinted as, the way
    ingest reads it (:func:`~simhash_hbase.text.extract.to_text`): ``fmt`` auto, text
    or html (auto: a page by its suffix or content), ``html`` the index's HTML mode.
    :class:`InvalidInput` says what is wrong."""
    if fmt not in TEXT_FORMATS:
        raise InvalidSetting("format", f"a single text is {', '.join(TEXT_FORMATS)}, not {fmt!r}")
    opts = SourceOptions(format=fmt, max_bytes=max_bytes, html=html)
    check_readable_file(path)
    if path == STDIN:
        doc_fmt = "html" if fmt == "html" else "text"
        raw = whole_stream(stdin or sys.stdin.buffer, STDIN_NAME, STDIN_NAME, max_bytes, doc_fmt)
    else:
        named = Path(path)  # feed.html.gz is a page, by its inner suffix
        named = named.with_suffix("") if named.suffix.lower() in COMPRESSED_SUFFIXES else named
        doc_fmt = "html" if format_of(named, opts) == "html" else "text"
        raw = read_document(Path(path), path, max_bytes, doc_fmt)
    result = as_text(raw, doc_fmt, opts)
    if isinstance(result, BadRecord):
        raise InvalidInput(f"{result.where}: {result.reason}")
    return result.text


def whole_stream(
    f: BinaryIO, name: str, doc_id: str, max_bytes: int, fmt: str = "text", size: int | None = None
) -> Record | BadRecord:
    """The stream as one document; ``size``, when known, is said if it is too large."""
    raw, more = read_bounded(f, max_bytes)
    if more:
        return too_large(name, size if size is not None and size > max_bytes else None, max_bytes)
    return decoded(raw, name, doc_id, fmt)


# -- paths --------------------------------------------------------------------
def format_of(path: Path, opts: SourceOptions) -> str:
    """The format a file's name alone says (its content may say more: :func:`read_file`)."""
    if opts.format != "auto":
        return opts.format
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in HTML_SUFFIXES:
        return "html"
    return "csv" if suffix in CSV_SUFFIXES else "text"


def read_file(
    path: Path, doc_id: str, opts: SourceOptions, *, named: bool
) -> Iterator[Record | BadRecord]:
    """The records of one file, read as its content and name say (:mod:`.sniff`).
    Named fields fit only records: a file ``named`` as input that holds none is one
    bad record saying so; a folder's page, text or WARC is read as it is beside its
    record files (one run ingests a mixed folder)."""
    name = display_path(path)
    try:
        f = path.open("rb", buffering=HEAD)
    except OSError as exc:
        yield unreadable(name, exc)
        return
    with f:
        try:
            content = open_content(f, path.name, opts.format)
            if named and opts.fields_given and content.fmt not in RECORD_KINDS:
                yield BadRecord(name, content.not_records(name), 0, Problem.INVALID)
                return
            size = os.fstat(f.fileno()).st_size if content.compression is None else None
            yield from _read_content(content, name, opts, doc_id, size)
        except OSError as exc:  # an I/O error part way (a disk, a network mount): the
            yield unreadable(name, exc)  # records read before it are kept, the rest said


def _read_content(
    content: Content, name: str, opts: SourceOptions, doc_id: str | None, size: int | None = None
) -> Iterator[Record | BadRecord]:
    """The records of an opened input, then the damage that ended it, if any: the
    record the damage cut short (a whole document's text, a WARC archive's last page,
    or a record that is then malformed) is that one report, never indexed in part."""
    last: Record | BadRecord | None = None
    for item in _read_stream(
        content.stream, name, content.fmt, opts, content.delimiter, doc_id, size
    ):
        if last is not None:
            yield last
        last = item
    damage = content.damage(name)
    cut = damage is not None and (
        content.fmt in ("text", "html", "warc")
        or (isinstance(last, BadRecord) and last.where == damage.where)
    )
    if last is not None and not cut:
        yield last
    if damage is not None:
        yield damage


def _read_stream(
    f: BinaryIO,
    name: str,
    fmt: str,
    opts: SourceOptions,
    delimiter: str = ",",
    doc_id: str | None = None,
    size: int | None = None,
) -> Iterator[Record | BadRecord]:
    if fmt == "csv":
        yield from read_csv(as_utf8(f), name, opts, delimiter)
    elif fmt in ("text", "html"):
        whole = whole_stream(f, name, doc_id or opts.stdin_id or name, opts.max_bytes, fmt, size)
        yield as_text(whole, fmt, opts)
    elif fmt == "warc":
        yield from read_warc(f, name, opts)
    elif fmt == "json":
        yield from read_json_values(as_utf8(f), name, opts)
    else:
        yield from read_jsonl(as_utf8(f), name, opts)


def _special(path: Path) -> BadRecord | None:
    """A folder entry that is not a regular file (FIFO, socket, device) is never
    opened: reading it could block forever."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return unreadable(display_path(path), exc)
    if stat.S_ISREG(mode):
        return None
    return BadRecord(
        display_path(path), "not a regular file (FIFO, socket or device)", 0, Problem.SPECIAL_FILE
    )


def walk(
    root: Path, exclude: Sequence[Path] = (), follow: bool = False
) -> Iterator[Path | BadRecord]:
    """Regular files below ``root`` in sorted order; hidden files and folders, and
    those in ``exclude`` (e.g. the index being written), are left out.

    A symbolic link that leads out of ``root`` is not followed (a skipped record
    naming it and its target), unless ``follow``; a linked folder inside ``root``
    is walked where it really is. With ``follow``, linked folders are walked
    once each, so a link loop ends.
    """
    problems: list[OSError] = []
    skip = {os.path.realpath(p) for p in exclude}
    inside = os.path.realpath(root)
    seen = {inside}
    for folder, dirs, files in os.walk(root, onerror=problems.append, followlinks=follow):
        kept = []
        for d in sorted(dirs):
            path = os.path.join(folder, d)
            real = os.path.realpath(path)
            if d.startswith(".") or real in skip:
                continue
            if os.path.islink(path):
                if not follow and not _within(real, inside):
                    yield _outside(Path(path), real, root)
                if not follow or real in seen:
                    continue
            seen.add(real)
            kept.append(d)
        dirs[:] = kept
        for problem in problems:
            yield BadRecord(
                display_path(problem.filename or folder),
                f"cannot list the folder: {problem.strerror}",
                0,
                Problem.UNREADABLE,
            )
        problems.clear()
        for name in sorted(files):
            file = Path(folder) / name
            target = os.path.realpath(file)
            if name.startswith(".") or target in skip:
                continue
            if not follow and not _within(target, inside):
                yield _outside(file, target, root)
                continue
            yield _special(file) or file


def _within(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _outside(path: Path, real: str, root: Path) -> BadRecord:
    return BadRecord(
        display_path(path),
        f"a symbolic link to {display_path(real)}, outside {display_path(root)}: not followed",
        0,
        Problem.SYMLINK,
    )


def relative_id(path: Path, root: Path) -> str | BadRecord:
    doc_id = path.relative_to(root).as_posix()
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        return BadRecord(
            display_path(path),
            "the file name is not valid UTF-8, so it cannot be a document id (rename it)",
            0,
            Problem.INVALID,
        )
    return doc_id


def check_paths(paths: Sequence[str], opts: SourceOptions | None = None) -> None:
    """Fail before reading anything if a path is missing or cannot be read whole, or
    (``opts`` given) if fields are named for a file or stdin that holds no records."""
    if not paths:
        raise InvalidInput("no input given (a file, a folder, or - for stdin)")
    if paths.count(STDIN) > 1:
        raise InvalidInput("stdin (-) can be read only once")
    for path in paths:
        check_readable_file(path)
    if opts is not None and opts.fields_given:
        for path in paths:
            _check_records(path, opts)


def _check_records(path: str, opts: SourceOptions) -> None:
    """Named fields need records: a file named on the command line that is read as
    one document (or a WARC archive) is refused before anything is written."""
    if path == STDIN:
        if opts.format in ("text", "html", "warc"):
            what = {"text": "one plain-text document", "html": "one HTML page"}
            raise InvalidInput(
                f"--format {opts.format} reads stdin as {what.get(opts.format, 'a WARC archive')}"
                ": --id-field and --text-field name the fields of records (JSON, CSV); "
                "leave them out, or give --format jsonl or csv"
            )
        return
    if os.path.isdir(path) or stat.S_ISFIFO(os.stat(path).st_mode):
        return  # a folder's files are checked as they are read; a FIFO cannot be peeked
    try:
        with open(path, "rb", buffering=HEAD) as f:
            content = open_content(f, os.path.basename(path), opts.format)
    except OSError:
        return  # said when it is read
    if content.fmt not in RECORD_KINDS:
        raise InvalidInput(content.not_records(display_path(path)))


def read_sources(
    paths: Sequence[str],
    opts: SourceOptions,
    stdin: BinaryIO | None = None,
    exclude: Sequence[Path] = (),
) -> Iterator[Record | BadRecord]:
    """Records of every path in order: folders (one doc per file, id = relative path),
    text files (one doc), JSONL/CSV (one doc per record), ``-`` (stdin, JSONL by default)."""
    check_paths(paths)
    for path in paths:
        if path == STDIN:
            content = open_content(stdin or sys.stdin.buffer, "", opts.format, stdin=True)
            if opts.fields_given and content.fmt not in RECORD_KINDS:
                yield BadRecord(STDIN_NAME, content.not_records(STDIN_NAME), 0, Problem.INVALID)
            else:
                yield from _read_content(content, STDIN_NAME, opts, None)
        elif os.path.isdir(path):
            root = Path(path)
            for item in walk(root, exclude, opts.follow_symlinks):
                doc_id = item if isinstance(item, BadRecord) else relative_id(item, root)
                if isinstance(doc_id, BadRecord):
                    yield doc_id
                else:
                    yield from read_file(item, doc_id, opts, named=False)  # type: ignore[arg-type]
        else:
            yield from read_file(Path(path), path, opts, named=True)


def input_files(
    paths: Sequence[str], exclude: Sequence[Path] = (), follow: bool = False
) -> Iterator[Path]:
    """Every regular file the paths name, folders walked as :func:`read_sources` does."""
    for path in paths:
        if path == STDIN:
            continue
        if os.path.isdir(path):
            yield from (p for p in walk(Path(path), exclude, follow) if isinstance(p, Path))
        else:
            yield Path(path)


def total_bytes(
    paths: Sequence[str], exclude: Sequence[Path] = (), follow: bool = False
) -> int | None:
    """Input size for a progress bar; None when it cannot be known (stdin, FIFO, a
    compressed file: the bar counts the bytes of the records read, decompressed)."""
    check_paths(paths)
    if STDIN in paths:
        return None
    total = 0
    for path in input_files(paths, exclude, follow):
        try:
            info = path.stat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or path.suffix.lower() in COMPRESSED_SUFFIXES:
            return None
        total += info.st_size
    return total
