"""One CLI voice (issue 22.9) and the friction a new user hit.

Exit codes 0 ok / 1 failure / 2 usage or setup error / 3 records skipped; a
no-match query says so; errors name what, where and what to do (no tracebacks);
a run that skips every record creates nothing; a query of a non-text is
InvalidQuery; an index used across fork() says so; progress follows the work.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import SimhashIndex
from simhash_hbase.errors import InvalidQuery, ShdbError, StoreError
from simhash_hbase.jobs import ingest as ingest_mod
from simhash_hbase.jobs import prepared as prepared_mod
from simhash_hbase.jobs.ingest import IngestOptions, index_records

from .test_cli import shdb

ROOT = Path(__file__).resolve().parents[1]
TEXT = "海量文本去重 指纹 抽屉原理 近似重复检测"
NOT_TEXT = st.one_of(
    st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = str(tmp_path_factory.mktemp("voice") / "ix")
    with SimhashIndex.open(url) as index:
        index.add("a", TEXT)
    return url


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=NOT_TEXT)
def test_a_query_of_a_non_text_is_invalid_query(index_url: str, value: Any) -> None:
    with SimhashIndex.open(index_url, readonly=True) as index:
        with pytest.raises(InvalidQuery, match="must be a str"):
            index.query(value)
        with pytest.raises(InvalidQuery, match="must be a str"):
            index.query_many([TEXT, value])


def test_an_index_used_after_fork_says_so(index_url: str) -> None:
    with SimhashIndex.open(index_url, readonly=True) as index:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: every use is a clear error, never a crash
            os.close(read)
            try:
                index.query(TEXT)
                said = b"no error"
            except StoreError as exc:
                said = str(exc).encode()
            index.close()  # the parent's: left alone
            os.write(write, said)
            os._exit(0)
        os.close(write)
        said = os.read(read, 4096).decode()
        os.waitpid(pid, 0)
        assert "forked" in said and "open it again in the child" in said, said
        assert [m.doc_id for m in index.query(TEXT)] == ["a"]  # the parent's still works


@pytest.mark.parametrize(
    "content",
    [
        b"not json\n",
        b"",
        b'{"id": "x"}\n{"text": 5}\n',
        b"\xff\xfe\n",
        b'{"id": "x", "text": "..."}\n',
    ],
)
@pytest.mark.parametrize("url", ["{}", "file://{}"])
def test_a_run_that_skips_every_record_creates_no_index(
    tmp_path: Path, content: bytes, url: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(content)
    folder = tmp_path / "ix"
    result = shdb("ingest", str(path), "-i", url.format(folder), "--top-n", "8")
    assert result.exit_code in (0, 3), result.output
    assert not folder.exists()
    path.write_text(json.dumps({"id": "ok", "text": TEXT}, ensure_ascii=False) + "\n")
    result = shdb("ingest", str(path), "-i", url.format(folder), "--top-n", "32")  # not refused
    assert result.exit_code == 0, result.output
    with SimhashIndex.open(str(folder), readonly=True) as index:
        assert index.params.top_n == 32 and set(index.get_many(["ok"])) == {"ok"}


def test_an_existing_index_is_kept_when_a_run_adds_nothing(index_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"not json\n")
    assert shdb("ingest", str(path), "-i", index_url).exit_code == 3
    with SimhashIndex.open(index_url, readonly=True) as index:
        assert set(index.get_many(["a"])) == {"a"}


OUT_OF_RANGE = [("--sample", "1.5"), ("--sample", "0"), ("--workers", "0")]


@pytest.mark.parametrize("command", ["stats", "verify"])
@pytest.mark.parametrize("flag, value", OUT_OF_RANGE)
def test_a_census_setting_out_of_range_names_its_flag(
    index_url: str, command: str, flag: str, value: str
) -> None:
    result = shdb(command, "-i", index_url, flag, value)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"shdb: error: {flag}: "), result.stderr


def test_no_match_says_so(index_url: str) -> None:
    result = shdb("query", "完全不同的内容 今天天气", "-i", index_url)
    assert result.exit_code == 1
    assert "no match (a match: similarity >= 0.5 (without a sketch: distance <= 3 bits" in (
        result.stderr
    )
    result = shdb("query", "完全不同的内容 今天天气", "-i", index_url, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"matches": [], "total": 0, "total_exact": True}


def test_plain_text_on_stdin_without_an_id_gets_a_hint(tmp_path: Path) -> None:
    result = shdb("ingest", "-", "-i", str(tmp_path / "ix"), stdin="just some plain text\n")
    assert result.exit_code == 3
    assert "stdin is read as JSON lines; for one plain text give --id ID" in result.stderr


#: The top-level modules of the optional extras (hbase, spark, serve, scrapy, fuzz,
#: docs): a plain ``pip install simhash-hbase`` has none of them.
OPTIONAL_MODULES = (
    "thriftpy2", "happybase", "pyspark", "py4j", "starlette", "uvicorn", "orjson",
    "prometheus_client", "httptools", "uvloop", "scrapy", "itemadapter", "atheris", "mkdocs",
)  # fmt: skip
_WITHOUT_EXTRAS = """
import sys
for name in OPTIONAL:
    sys.modules[name] = None
from simhash_hbase.cli.app import app, main
"""
_EVERY_HELP = """
import json
import re
from typer.main import get_command

def commands(group, path):
    yield path
    for name in group.list_commands(None) if hasattr(group, "list_commands") else ():
        yield from commands(group.get_command(None, name), [*path, name])

codes = {}
for path in list(commands(get_command(app), [])):
    sys.argv = ["shdb", *path, "--help"]
    try:
        main()
    except SystemExit as exc:
        codes[" ".join(path)] = exc.code or 0
print(json.dumps(codes))
"""


def without_extras(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run after the CLI's import, in a Python where no extra is importable."""
    return subprocess.run(
        [sys.executable, "-c", f"OPTIONAL = {OPTIONAL_MODULES!r}\n{_WITHOUT_EXTRAS}{code}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_every_help_works_without_the_optional_extras() -> None:
    """`shdb --help` loads every command module to list it: one that imports an
    extra at its top (the HBase client, Spark, the service) breaks every user of a
    plain install, not only that command's."""
    proc = without_extras(_EVERY_HELP)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    codes = json.loads(proc.stdout.splitlines()[-1])
    assert {"", "spark", "spark dedup", "spark ingest", "serve", "idf", "migrate"} <= set(codes)
    assert codes == dict.fromkeys(codes, 0)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["stats", "-i", "hbase://127.0.0.1:9090?prefix=x"], "hbase"),
        (["ingest", "examples/corpus", "-i", "hbase://127.0.0.1:9090"], "hbase"),
        (["spark", "dedup", "examples/corpus", "-o", "{tmp}/pairs"], "spark"),
        (["spark", "ingest", "examples/corpus", "-i", "hbase://127.0.0.1:9090"], "spark"),
        (["serve", "-i", "{tmp}/ix"], "serve"),
    ],
)
def test_a_missing_extra_is_a_hint_not_a_traceback(
    args: list[str], extra: str, tmp_path: Path
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = without_extras(f"sys.argv = ['shdb', *{argv!r}]\nmain()\n")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"pip install 'simhash-hbase[{extra}]'" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


def test_idf_build_has_json(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"id": "a", "text": TEXT}, ensure_ascii=False) + "\nbroken\n", "utf-8"
    )
    result = shdb("idf", "build", str(path), "-o", str(tmp_path / "t.idf"), "--json")
    assert result.exit_code == 3
    got = json.loads(result.stdout)
    assert got["terms"] > 0 and [s["where"] for s in got["skipped"]] == [f"{path}:2"]


def test_follow_symlinks_flag(tmp_path: Path) -> None:
    root, outside = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    outside.mkdir()
    (root / "a.txt").write_text(TEXT, "utf-8")
    (outside / "b.txt").write_text("外面的 文本 内容", "utf-8")
    (root / "b.txt").symlink_to(outside / "b.txt")
    result = shdb("dedup", str(root), "-o", str(tmp_path / "p.jsonl"))
    assert result.exit_code == 3 and "--follow-symlinks reads what it leads to" in result.stderr
    result = shdb("dedup", str(root), "-o", str(tmp_path / "p.jsonl"), "--follow-symlinks")
    assert result.exit_code == 0 and "2 inputs" in result.stderr


@pytest.mark.parametrize("batch", [1, 7, 64, 1000, 5000])
def test_reading_runs_only_a_piece_ahead_of_the_work(
    tmp_path: Path, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress counts records read: they must be read as they are worked on,
    not a whole batch at once (a bar that jumps and an ETA that lies)."""
    done = [0]
    worst = [0]
    real = prepared_mod.assemble

    def counting(*args: Any, **kwargs: Any) -> Any:
        done[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(prepared_mod, "assemble", counting)

    def records() -> Any:
        for i in range(3000):
            worst[0] = max(worst[0], i - done[0])
            yield (f"d{i}", f"{TEXT} {i}")

    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        summary = index_records(index, records(), IngestOptions(batch_size=batch, find_k=None))
    assert summary.added == 3000
    assert worst[0] <= ingest_mod.FINGERPRINT_STEP


def test_exit_codes_are_the_documented_ones(index_url: str, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "g", "text": TEXT}, ensure_ascii=False) + "\n", "utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text("utf-8") + "broken\n", "utf-8")
    assert shdb("ingest", str(good), "-i", str(tmp_path / "a")).exit_code == 0
    assert shdb("ingest", str(bad), "-i", str(tmp_path / "b")).exit_code == 3
    assert shdb("ingest", str(tmp_path / "missing"), "-i", str(tmp_path / "c")).exit_code == 2
    assert shdb("query", "完全不同的内容 今天天气", "-i", index_url).exit_code == 1
    reference = (ROOT / "docs" / "cli.md").read_text("utf-8")
    readme = " ".join((ROOT / "README.md").read_text("utf-8").split())
    for code, meaning in (
        ("0", "done"),
        ("1", "nothing found"),
        ("2", "error"),
        ("3", "records skipped"),
    ):
        assert f"| {code} | {meaning}" in reference  # the two pages say one contract
        assert f"{code} {meaning}" in readme
    assert issubclass(InvalidQuery, ShdbError)


_TSV = {"t": "\t", "n": "\n", "r": "\r"}
HEALTH = HealthCheck.function_scoped_fixture


@given(doc_id=st.text(st.sampled_from("a\t\n\r\\ 路x"), min_size=1, max_size=8))
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_table_row_is_one_line_of_its_columns(tmp_path: Path, doc_id: str) -> None:
    """Ids holding a tab, a newline or a backslash: each row of a table is still
    one line, with the header's columns, and reads back as the id."""
    url = str(tmp_path / os.urandom(8).hex())
    with SimhashIndex.open(url) as index:
        index.add_fingerprint(doc_id, 0x3C312E605D790631)
    for args, column in [(["get", doc_id], 0), (["query", "--fingerprint", "3c312e605d790631"], 3)]:
        result = shdb(*args, "-i", url)
        assert result.exit_code == 0, result.output
        header, row = result.stdout.splitlines()
        cells = row.split("\t")
        assert len(cells) == len(header.split("\t"))
        assert re.sub(r"\\(.)", lambda m: _TSV.get(m[1], m[1]), cells[column]) == doc_id
