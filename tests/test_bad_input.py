"""The bad-input catalogue: each case names file and line, says what to do, has a
documented exit code, and loses none of the valid records around it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from simhash_hbase import SimhashIndex

from .test_cli import shdb
from .test_index import ARTICLE, OTHER

EXIT_OK, EXIT_ERROR, EXIT_SKIPPED = 0, 2, 3


def _line(doc_id: object, text: object = ARTICLE, **extra: object) -> bytes:
    return json.dumps({"id": doc_id, "text": text, **extra}, ensure_ascii=False).encode()


GOOD_BEFORE, GOOD_AFTER = _line("before"), _line("after", OTHER)


class Case(NamedTuple):
    body: bytes  # the bad part, written between two good records (JSONL) or as given
    name: str = "in.jsonl"
    exit_code: int = EXIT_SKIPPED
    message: str = ""  # expected in stderr; {path} is the input file
    ids: frozenset[str] = frozenset({"before", "after"})
    args: tuple[str, ...] = ()
    wrap: bool = True  # put good records around the body


CASES = {
    "empty document": Case(_line("e", ""), message="{path}:2: document 'e' has no usable terms"),
    "whitespace only": Case(_line("w", " \t\u3000\n"), message="{path}:2: document 'w' has no"),
    "punctuation only": Case(_line("p", "，。！？……"), message="{path}:2: document 'p' has no"),
    "invalid UTF-8": Case(b'{"id": "u", "text": "\xff\xfe"}', message="{path}:2: invalid UTF-8"),
    "NUL byte": Case(b'{"id": "n", "text": "a\x00b"}', message="{path}:2: binary content"),
    "malformed JSON": Case(b'{"id": "m", "text": ', message="{path}:2: malformed JSON"),
    "JSON not an object": Case(b"[1, 2]", message="{path}:2: a JSON list, not an object"),
    "missing id": Case(b'{"text": "x"}', message="{path}:2: no 'id' field"),
    "missing text": Case(b'{"id": "t"}', message="{path}:2: no 'text' field"),
    "non-string id": Case(_line(12345), message="{path}:2: field 'id' is a int, not a string"),
    "id over 1024 bytes": Case(_line("x" * 1025), message="{path}:2: document id 'xxxx"),
    "line over --max-bytes": Case(
        _line("big", "字" * 3000),
        args=("--max-bytes", "4096"),
        message="{path}:2: the document is over the 4096-byte limit (it is longer than that)",
    ),
    "BOM and CRLF": Case(
        b"\xef\xbb\xbf" + _line("bom") + b"\r\n" + _line("crlf", OTHER) + b"\r\n",
        exit_code=EXIT_OK,
        ids=frozenset({"bom", "crlf"}),
        wrap=False,
    ),
    "duplicate ids (last wins)": Case(
        _line("dup", OTHER) + b"\n" + _line("dup", ARTICLE + "。"),
        exit_code=EXIT_OK,
        ids=frozenset({"before", "after", "dup"}),
    ),
    "empty file": Case(b"", exit_code=EXIT_OK, ids=frozenset(), wrap=False),
    "CSV wrong columns": Case(
        b"key,body\n1,x\n",
        name="in.csv",
        wrap=False,
        ids=frozenset(),
        message="{path}:1: no column 'id' (columns: key, body)",
    ),
    "CSV row with wrong field count": Case(
        f"id,text\nbefore,{ARTICLE}\nshort\nafter,{OTHER}\n".encode(),
        name="in.csv",
        wrap=False,
        message="{path}:3: row has 1 fields, the header has 2",
    ),
    "text file in GBK": Case(
        "中文文本".encode("gbk"),
        name="gbk.txt",
        wrap=False,
        ids=frozenset(),
        message="{path}:1: invalid UTF-8 at byte 0; re-encode it as UTF-8 (from GBK: iconv",
    ),
    "binary file": Case(
        b"\x89PNG\r\n\x1a\n\x00\x00",
        name="img.txt",
        wrap=False,
        ids=frozenset(),
        message="{path}: binary content (NUL byte at offset 8)",
    ),
    # Issue #10: each of these used to abort its batch, or the whole run.
    "meta nested 200,000 deep": Case(
        b'{"id": "d", "text": "x", "m": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        message="{path}:2: unusable JSON (nested too deeply)",
    ),
    "integer too long for JSON": Case(
        b'{"id": "i", "text": "x", "n": ' + b"9" * 5000 + b"}",
        message="{path}:2: unusable JSON (",
    ),
    "text with a lone surrogate": Case(
        b'{"id": "s", "text": "\\ud800 ' + ARTICLE.encode() + b'"}',
        message="{path}:2: the text of 's' is not valid Unicode",
    ),
    "meta key with a lone surrogate": Case(
        b'{"id": "k", "text": "' + OTHER.encode() + b'", "\\udc80": 1}',
        message="{path}:2: the meta of 'k' has a character that is not valid Unicode",
    ),
    "id with a lone surrogate": Case(
        b'{"id": "\\udfff", "text": "' + OTHER.encode() + b'"}',
        message="{path}:2: document id has a character that is not valid Unicode",
    ),
    "CSV header with invalid bytes": Case(
        b"id,te\xffxt\n1,x\n",
        name="in.csv",
        wrap=False,
        ids=frozenset(),
        message="{path}:1: invalid UTF-8 in the header; the file was skipped",
    ),
    "CSV record over --max-bytes in bytes": Case(
        f"id,text\nbefore,{ARTICLE}\nbig,{'字' * 2000}\nafter,{OTHER}\n".encode(),
        name="in.csv",
        wrap=False,
        args=("--max-bytes", "4096"),
        message="{path}:3: the document is over the 4096-byte limit",
    ),
    "JSONL line with no newline at the end over --max-bytes": Case(
        GOOD_BEFORE + b"\n" + GOOD_AFTER + b"\n" + _line("big", "字" * 3000),
        wrap=False,
        args=("--max-bytes", "4096"),
        message="{path}:3: the document is over the 4096-byte limit",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_catalogue(case: Case, store_url: str, tmp_path: Path) -> None:
    path = tmp_path / case.name
    body = b"\n".join([GOOD_BEFORE, case.body, GOOD_AFTER]) + b"\n" if case.wrap else case.body
    path.write_bytes(body)
    result = shdb("ingest", str(path), "-i", store_url, *case.args)
    assert result.exit_code == case.exit_code, result.stderr
    assert case.message.format(path=path) in result.stderr
    with SimhashIndex.open(store_url) as index:
        held = {doc.doc_id for doc in index.documents()}
        assert held == case.ids  # nothing lost, nothing half-written
        if "dup" in held:
            assert index.get("dup").fingerprint == index.fingerprint(ARTICLE + "。")  # type: ignore[union-attr]


def test_unreadable_file_in_a_folder_keeps_the_others(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(ARTICLE, encoding="utf-8")
    (folder / "b.txt").symlink_to(folder / "gone")
    (folder / "c.txt").write_text(OTHER, encoding="utf-8")
    result = shdb("ingest", str(folder), "-i", store_url)
    assert result.exit_code == EXIT_SKIPPED
    assert f"skipped {folder / 'b.txt'}: cannot read it" in result.stderr
    with SimhashIndex.open(store_url) as index:
        assert {doc.doc_id for doc in index.documents()} == {"a.txt", "c.txt"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "--format", "xml", "{corpus}"], "unknown format 'xml'"),
        (["ingest", "{tmp}/missing.jsonl"], "missing.jsonl: no such file or folder"),
        (["ingest", "{corpus}", "-i", "mysql://db/x"], "unknown scheme 'mysql'"),
        (
            ["ingest", "{corpus}", "-i", "hbase://127.0.0.1:1?timeout=2000"],
            "HBase at 127.0.0.1:1 is not reachable",
        ),
        (["query", "x", "-i", "{index}", "-k", "7"], "k=7 is out of range: scheme 5x10"),
        (
            ["query", "--fingerprint", "12345678901234567", "-i", "{index}"],
            "is not a 64-bit hex fingerprint",
        ),
        (
            ["ingest", "{corpus}", "-i", "{index}", "--scheme", "4x4"],
            "scheme: the index has '5x10', asked for '4x4'",
        ),
        (
            ["ingest", "{corpus}", "-i", "{index}", "--idf", "{tmp}/idf.txt"],
            "idf: the index has None",
        ),
        (["ingest", "{corpus}", "-i", "{index}", "--on-error", "maybe"], "--on-error"),
    ],
)
def test_fatal_errors_exit_2_before_writing(args: list[str], message: str, tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(GOOD_BEFORE + b"\n")
    index = str(tmp_path / "index")
    assert shdb("ingest", str(corpus), "-i", index).exit_code == 0
    (tmp_path / "idf.txt").write_text("海量 3.0\n", encoding="utf-8")
    filled = [a.format(corpus=corpus, tmp=tmp_path, index=index) for a in args]
    result = shdb(*filled)
    assert result.exit_code == EXIT_ERROR, result.stderr
    assert message in result.stderr
    assert result.stderr.startswith("shdb: error: ")


def test_100mb_document_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    """A 100 MB JSONL line is skipped without being held in memory."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.write(GOOD_BEFORE + b"\n" + b'{"id": "huge", "text": "')
        chunk = "重复的内容".encode() * 100_000
        for _ in range(100 * 2**20 // len(chunk)):
            f.write(chunk)
        f.write(b'"}\n' + GOOD_AFTER + b"\n")
    code = (
        "import resource, sys; from simhash_hbase.cli import app\n"
        "try: app(sys.argv[1:])\n"
        "except SystemExit as e: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
        "e.code, file=sys.stderr)"
    )
    index = str(tmp_path / "index")
    result = subprocess.run(
        [sys.executable, "-c", code, "ingest", str(path), "-i", index],
        capture_output=True,
        text=True,
    )
    peak_kib, exit_code = result.stderr.split()[-2:]
    assert exit_code == str(EXIT_SKIPPED)
    assert f"skipped {path}:2: the document is over the 16777216-byte limit" in result.stderr
    assert int(peak_kib) < 300 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"
    with SimhashIndex.open(index) as ix:
        assert {doc.doc_id for doc in ix.documents()} == {"before", "after"}
