"""The bad-input catalogue: each case names file and line, says what to do, has a
documented exit code, and loses none of the valid records around it."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import lmdb
import pytest

from simhash_hbase import InvalidInput, SimhashIndex
from simhash_hbase.errors import StoreClosed
from simhash_hbase.jobs.ingest import index_fingerprints

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
    "JSON not an object": Case(b"[1, 2]", message="{path}:2: an array, not an object"),
    "missing id": Case(b'{"text": "x"}', message="{path}:2: no 'id' field"),
    "missing text": Case(b'{"id": "t"}', message="{path}:2: no 'text' field"),
    "non-string id": Case(_line(12345), message="{path}:2: field 'id' is a number, not a string"),
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
    "CSV wrong columns": Case(  # each row is one skipped record, named by its line
        b"key,body\n1,x\n2,y\n",
        name="in.csv",
        wrap=False,
        ids=frozenset(),
        message="{path}:3: no column 'id' in the header on line 1 (columns: key, body)",
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
        message="{path}:1: invalid UTF-8 at byte 0 (line 1); it declares no charset, and more "
        "than one charset reads it as likely text",
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
    result = shdb("ingest", "--create", str(path), "-i", store_url, *case.args)
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
    result = shdb("ingest", "--create", str(folder), "-i", store_url)
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
        "import resource, sys; from simhash_hbase.cli.app import app\n"
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


# -- damaged, foreign, read-only and full-disk embedded indexes (issue #10, part 5) ----------
# These run `shdb` in a subprocess: a regression here is a signal (SIGBUS) or a hang.

_ROOT = Path(__file__).resolve().parents[1]
_READ_COMMANDS = (
    ("query", "--fingerprint", "0123456789abcdef"),
    ("stats",),
    ("get", "before"),
    ("verify",),
)
_ALL_COMMANDS = (
    *_READ_COMMANDS,
    ("verify", "--repair"),
    ("remove", "before"),
    ("ingest", "{corpus}"),
)


def _run(*args: str, preexec: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simhash_hbase", *args],
        capture_output=True,
        text=True,
        cwd=_ROOT,
        preexec_fn=preexec,
        timeout=120,
    )


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b"\n".join([GOOD_BEFORE, GOOD_AFTER]) + b"\n")
    return corpus


def _built_index(tmp_path: Path) -> tuple[Path, Path]:
    corpus = _corpus(tmp_path)
    index = tmp_path / "index"
    assert shdb("ingest", str(corpus), "-i", str(index)).exit_code == 0
    return index, corpus


def _digests(folder: Path) -> dict[str, str]:
    """Digests of the data files (lock.mdb is LMDB's reader table: any reader writes it)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.iterdir()
        if p.name != "lock.mdb"
    }


def _assert_refused(index: Path, corpus: Path, message: str, commands: Any) -> None:
    for command in commands:
        args = [a.format(corpus=corpus) for a in command]
        result = _run(*args, "-i", str(index))
        assert result.returncode == EXIT_ERROR, (command, result.returncode, result.stderr)
        assert result.stderr.startswith("shdb: error: "), (command, result.stderr)
        assert message in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("keep", [0.5, 100 / 2**30])
def test_truncated_data_file_is_an_error_not_a_signal(keep: float, tmp_path: Path) -> None:
    index, corpus = _built_index(tmp_path)
    data = index / "data.mdb"
    with SimhashIndex.open(str(index)) as ix:  # grow the file well past its first pages
        index_fingerprints(ix, ((f"n{i}", i * 0x9E3779B97F4A7C15 % 2**64) for i in range(3000)))
    size = data.stat().st_size
    with data.open("r+b") as f:
        f.truncate(max(int(size * keep), 100))  # half of it, or not even a header
    _assert_refused(index, corpus, "is truncated", _ALL_COMMANDS)


def test_foreign_lmdb_file_is_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "foreign"
    env = lmdb.open(str(folder), max_dbs=2)
    other = env.open_db(b"sessions")
    with env.begin(write=True) as txn:
        txn.put(b"user:1", b"alice", db=other)
    env.close()
    before = _digests(folder)
    _assert_refused(folder, _corpus(tmp_path), "is not an shdb index", _ALL_COMMANDS)
    assert _digests(folder) == before  # not even an empty table was added


def test_lmdb_tables_without_a_manifest_are_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "lookalike"
    env = lmdb.open(str(folder), max_dbs=3)
    docs = env.open_db(b"docs")
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v", db=docs)
    env.close()
    before = _digests(folder)
    _assert_refused(folder, _corpus(tmp_path), "but no index manifest", _ALL_COMMANDS)
    assert _digests(folder) == before


def test_a_file_that_is_not_lmdb_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "junk"
    folder.mkdir()
    (folder / "data.mdb").write_bytes(b"SQLite format 3\x00" + bytes(8192))
    _assert_refused(folder, _corpus(tmp_path), "is not an LMDB data file", _ALL_COMMANDS)


def _damage_docs_row(index: Path, doc_id: str) -> None:
    """Cut the columns of a docs row short, as a bad disk might (its number and
    fingerprint, the first 12 bytes in the compact layout, are kept)."""
    env = lmdb.open(str(index), max_dbs=4)
    docs = env.open_db(b"docs")
    with env.begin(write=True) as txn:
        row = txn.get(doc_id.encode(), db=docs)
        txn.put(doc_id.encode(), row[:12] + b"\x03\x00\x00", db=docs)
    env.close()


def test_damaged_docs_row_is_a_message_and_verify_repair_removes_it(tmp_path: Path) -> None:
    index, _ = _built_index(tmp_path)
    with SimhashIndex.open(str(index)) as ix:  # every net's rows of the document
        owned = sum(doc_id == "before" for _, doc_id in ix.index_cells())
        bands = ix.lsh.bands if ix.lsh is not None else 0
        assert owned == ix.scheme.rows_per_fingerprint + bands
    _damage_docs_row(index, "before")
    damaged = (
        "the docs row 'before' is damaged (its columns are cut short), "
        f"in the embedded index at {index}"
    )
    for command in (("get", "before"), ("remove", "before")):
        result = _run(*command, "-i", str(index))
        assert result.returncode == EXIT_ERROR, result.stderr
        assert damaged in result.stderr, result.stderr
    result = _run("verify", "--json", "-i", str(index))
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["corrupt_documents"] == 1 and report["stale_cells"] == owned
    assert any(damaged in example for example in report["examples"])
    result = _run("verify", "--repair", "-i", str(index))
    assert result.returncode == EXIT_OK, result.stderr
    assert _run("verify", "-i", str(index)).returncode == EXIT_OK
    with SimhashIndex.open(str(index)) as ix:
        assert {doc.doc_id for doc in ix.documents()} == {"after"}
        assert {doc_id for _, doc_id in ix.index_cells()} == {"after"}


def _limit_file_size(limit: int) -> Any:
    def preexec() -> None:  # a full disk, as the kernel reports it to a writer (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


@pytest.mark.parametrize("limit", [0, 8192, 16384, 24576])
def test_full_disk_at_creation_does_not_block_the_next_try(limit: int, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    index = tmp_path / "index"
    result = _run("ingest", str(corpus), "-i", str(index), preexec=_limit_file_size(limit))
    assert result.returncode == EXIT_ERROR, result.stderr
    assert "the disk is full or failing" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    result = _run("ingest", str(corpus), "-i", str(index))
    assert result.returncode == EXIT_OK, result.stderr
    with SimhashIndex.open(str(index)) as ix:
        assert {doc.doc_id for doc in ix.documents()} == {"before", "after"}


def _as_nobody() -> None:
    if os.geteuid() == 0:  # root ignores file modes: drop to an ordinary user
        os.setgid(65534)
        os.setuid(65534)


def test_read_only_index_folder_can_be_read_not_written(tmp_path: Path) -> None:
    index, _ = _built_index(tmp_path)
    shared = Path(tempfile.mkdtemp(prefix="shdb-ro-"))  # a path an ordinary user can reach
    try:
        shared.chmod(0o755)
        folder = shared / "index"
        shutil.copytree(index, folder)
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)
        # The child imports everything first: /root's Python is unreadable once it is nobody.
        code = (
            "import sys, lmdb._envid, typer._click.decorators, simhash_hbase.cli.app as cli\n"
            "import simhash_hbase.store.lmdb.store, simhash_hbase.jobs.verify\n"
            "from tests.test_bad_input import _as_nobody; _as_nobody()\n"
            "sys.argv[0] = 'shdb'; cli.main()"
        )
        for command in _READ_COMMANDS:
            result = subprocess.run(
                [sys.executable, "-c", code, *command, "-i", str(folder)],
                capture_output=True,
                text=True,
                cwd=_ROOT,
                timeout=120,
            )
            assert result.returncode in (EXIT_OK, 1), (command, result.stderr)
            assert "error" not in result.stderr, (command, result.stderr)
        write = (
            "import sys, lmdb._envid\n"
            "from simhash_hbase import ShdbError, SimhashIndex\n"
            "from tests.test_bad_input import _as_nobody; _as_nobody()\n"
            "try: SimhashIndex.open(sys.argv[1]).add_fingerprint('new', 1)\n"
            "except ShdbError as e: sys.exit(f'shdb: error: {e}')"
        )
        result = subprocess.run(
            [sys.executable, "-c", write, str(folder)],
            capture_output=True,
            text=True,
            cwd=_ROOT,
            timeout=120,
        )
        assert result.returncode == 1, result.stderr
        assert "read-only for this user" in result.stderr, result.stderr
    finally:
        for path in (shared, *shared.rglob("*")):
            path.chmod(0o755)
        shutil.rmtree(shared)


def test_library_errors_after_close_and_for_bad_arguments(tmp_path: Path) -> None:
    index = SimhashIndex.open(str(tmp_path / "index"))
    with pytest.raises(InvalidInput, match="the text of 'x' is a NoneType, not a string"):
        index.add("x", None)  # type: ignore[arg-type]
    index.add_fingerprint("a", 1)
    index.close()
    for call in (
        lambda: index.query_fingerprint(1),
        lambda: index.get("a"),
        lambda: index.add_fingerprint("b", 2),
        lambda: index.stats(),
        lambda: list(index.documents()),
    ):
        with pytest.raises(StoreClosed, match="is closed; open it again"):
            call()
