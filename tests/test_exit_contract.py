"""One exit-code contract (README, docs/cli.md): 0 done, 1 nothing found, 2 error,
3 records skipped; every command over the same classes of input, in one table.

An error after some records were written says what was saved and that a re-run
resumes. Each skipped record is named by file:line, a CSV row being one record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.errors import StoreUnavailable
from simhash_hbase.index.client import SimhashIndex as Client

from .test_cli import shdb
from .test_index import ARTICLE, OTHER

DONE, NOTHING_FOUND, ERROR, SKIPPED = 0, 1, 2, 3
DOWN = "hbase://127.0.0.1:1?prefix=x&timeout=500"  # nothing listens on port 1
UNREADABLE = Path("/proc/self/mem")  # opens, then every read is an I/O error (Linux)


def _jsonl(*rows: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


#: The classes of input every command that reads records is run on: file name, content.
INPUTS: dict[str, tuple[str, str]] = {
    "good": ("good.jsonl", _jsonl({"id": "a", "text": ARTICLE}, {"id": "b", "text": OTHER})),
    "some bad": (
        "some.jsonl",
        _jsonl({"id": "a", "text": ARTICLE}) + "{oops\n" + _jsonl({"id": "b", "text": OTHER}),
    ),
    "all bad": ("all.jsonl", _jsonl({"url": "u1", "text": ARTICLE}, {"url": "u2", "text": OTHER})),
    "CSV rows of the wrong width": (
        "rows.csv",
        f"id,text\na,{ARTICLE}\nshort\nb,{OTHER},extra\nc,{OTHER}\n",
    ),
}


class Row(NamedTuple):
    args: tuple[str, ...]  # {in}: the input file, {ix}: a built index, {new}: a new path
    code: int
    says: tuple[str, ...] = ()  # in stderr, formatted like args


def _read(command: tuple[str, ...]) -> dict[str, Row]:
    """A command that reads records, over every class of input (a CSV row is one
    record: the two wrong rows are two skips, and the others are read)."""
    return {
        "good": Row(command, DONE),
        "some bad": Row(command, SKIPPED, ("skipped {in}:2: malformed JSON",)),
        "all bad": Row(command, SKIPPED, ("skipped {in}:1: no 'id' field", "{in}:2: no 'id'")),
        "CSV rows of the wrong width": Row(
            command, SKIPPED, ("skipped {in}:3: row has 1 fields", "skipped {in}:4: row has 3")
        ),
        "unreadable": Row(command, SKIPPED, (f"skipped {UNREADABLE}: cannot read it",)),
    }


TABLE: dict[str, Row] = {}
for _name, _command in {
    "ingest": ("ingest", "{in}", "-i", "{new}"),
    "dedup": ("dedup", "{in}"),
}.items():
    TABLE |= {f"{_name}: {k}": v for k, v in _read(_command).items()}
TABLE |= {f"idf build: {k}": v for k, v in _read(("idf", "build", "{in}", "-o", "{new}")).items()}
# an IDF table counts texts: records without an id are read, not skipped
TABLE["idf build: all bad"] = Row(("idf", "build", "{in}", "-o", "{new}"), DONE)
TABLE["idf build: unreadable"] = Row(
    ("idf", "build", "{in}", "-o", "{new}"), SKIPPED, ("no table written", "all 1 records")
)
TABLE |= {
    # a store that cannot be reached, or an index that is not there: an error
    **{
        f"{args[0]}: store unreachable": Row(args, ERROR, ("not reachable",))
        for args in [
            ("ingest", "{good}", "-i", DOWN, "--create"),
            ("query", ARTICLE, "-i", DOWN),
            ("get", "a", "-i", DOWN),
            ("remove", "a", "-i", DOWN),
            ("stats", "-i", DOWN),
            ("verify", "-i", DOWN),
            ("compact", "-i", DOWN),
            ("migrate", DOWN, DOWN.replace("prefix=x", "prefix=y")),
            ("serve", "-i", DOWN),
            ("fingerprint", ARTICLE, "-i", DOWN),
        ]
    },
    **{
        f"{args[0]}: no index": Row(args, ERROR, ("no index at {new}",))
        for args in [
            ("query", ARTICLE, "-i", "{new}"),
            ("get", "a", "-i", "{new}"),
            ("remove", "a", "-i", "{new}"),
            ("stats", "-i", "{new}"),
            ("verify", "-i", "{new}"),
            ("compact", "-i", "{new}"),
            ("migrate", "{new}", "{new}2"),
            ("serve", "-i", "{new}"),
        ]
    },
    # what was asked for is there, or is not
    "query: found": Row(("query", ARTICLE, "-i", "{ix}"), DONE),
    "query: nothing found": Row(
        ("query", "一段与索引中任何内容都无关的话，讲做饭。", "-i", "{ix}"),
        NOTHING_FOUND,
        ("no match",),
    ),
    "query --file: unreadable": Row(
        ("query", "--file", str(UNREADABLE), "-i", "{ix}"), ERROR, ("cannot read it",)
    ),
    "fingerprint --file: unreadable": Row(
        ("fingerprint", "--file", str(UNREADABLE)), ERROR, ("cannot read it",)
    ),
    "fingerprint: good": Row(("fingerprint", ARTICLE), DONE),
    "get: found": Row(("get", "a", "-i", "{ix}"), DONE),
    "get: nothing found": Row(
        ("get", "a", "nope", "-i", "{ix}"), NOTHING_FOUND, ("not found: nope",)
    ),
    "remove: nothing found": Row(("remove", "nope", "-i", "{ix}"), NOTHING_FOUND, ("not found",)),
    "remove: found": Row(("remove", "b", "-i", "{ix}"), DONE),
    "stats: good": Row(("stats", "-i", "{ix}"), DONE),
    "verify: clean": Row(("verify", "-i", "{ix}"), DONE),
    "verify: problems found": Row(("verify", "-i", "{damaged}"), NOTHING_FOUND),
    "compact: good": Row(("compact", "-i", "{ix}"), DONE),
    "plan: good": Row(("plan", "10M"), DONE),
    "plan: nothing found": Row(
        ("plan", "10B", "--max-candidates", "0.001"), NOTHING_FOUND, ("no scheme fits",)
    ),
    "plan: bad usage": Row(("plan", "abc"), ERROR, ("expected a count",)),
    "migrate: good": Row(("migrate", "{ix}", "{new}"), DONE, ("copied 2 documents",)),
    "ingest: missing input": Row(("ingest", "{new}.jsonl", "-i", "{ix}"), ERROR, ("no such file",)),
    "dedup: missing input": Row(("dedup", "{new}.jsonl"), ERROR, ("no such file",)),
    "idf build: missing input": Row(
        ("idf", "build", "{new}.jsonl", "-o", "{new}"), ERROR, ("no such file",)
    ),
    # a bad record stops the run when asked to: what was written before it is said
    "ingest --on-error fail: after some were written": Row(
        ("ingest", "{some}", "-i", "{new}", "--on-error", "fail", "--batch-size", "1"),
        ERROR,
        ("{some}:2: malformed JSON", "the 1 documents of the batches finished before it are saved"),
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every input class as a file, a built index ({ix}, copied per test) and a
    damaged one ({damaged})."""
    root = tmp_path_factory.mktemp("inputs")
    paths = {}
    for kind, (name, body) in INPUTS.items():
        (root / name).write_text(body, encoding="utf-8")
        paths[kind] = str(root / name)
    paths["unreadable"] = str(UNREADABLE)
    for name in ("ix", "damaged"):
        with SimhashIndex.open(str(root / name)) as index:
            index.add("a", ARTICLE)
            index.add("b", OTHER)
            if name == "damaged":
                index.write_cells(put=index.cells([Document("ghost", 2)]))
    paths["ix"], paths["damaged"] = str(root / "ix"), str(root / "damaged")
    return paths


@pytest.mark.skipif(not UNREADABLE.exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("row", TABLE.values(), ids=list(TABLE))
def test_every_command_exits_by_the_contract(
    row: Row, files: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.id.split(": ", 1)[1]
    ix = tmp_path / "ix"
    shutil.copytree(files["ix"], ix)  # a command may change it (remove, compact)
    fill = {
        "in": files.get(kind, files["good"]),
        "ix": str(ix),
        "damaged": files["damaged"],
        "new": str(tmp_path / "new"),
        "good": files["good"],
        "some": files["some bad"],
    }
    args = [a.format(**fill) for a in row.args]
    result = shdb(*args)
    assert result.exit_code == row.code, result.output
    for text in row.says:
        assert text.format(**fill) in result.stderr, result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("written", [False, True], ids=["before its write", "after its write"])
def test_an_error_after_some_batches_says_what_was_saved_and_a_rerun_resumes(
    written: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store goes away at the third batch (a region server died), before or
    after that batch's write reached it: exit 2, naming what the finished batches
    saved; the same command again resumes, and counts what it did itself: a batch
    the stopped run wrote is written again as unchanged, never counted as added."""
    corpus = tmp_path / "in.jsonl"
    corpus.write_text(
        _jsonl(*({"id": f"d{i}", "text": f"{t} {i}"} for i, t in enumerate([ARTICLE, OTHER] * 3))),
        encoding="utf-8",
    )
    add = Client.add_documents
    calls = [0]

    def dying(self: Client, *args: object, **kwargs: object) -> object:
        calls[0] += 1
        found = add(self, *args, **kwargs) if written or calls[0] != 3 else None  # type: ignore[arg-type]
        if calls[0] == 3:
            raise StoreUnavailable("HBase at h:9091 stopped answering (a region server died)")
        return found

    monkeypatch.setattr(Client, "add_documents", dying)
    command = ["ingest", str(corpus), "-i", str(tmp_path / "ix"), "--batch-size", "2"]
    result = shdb(*command)
    assert result.exit_code == ERROR, result.output
    assert "shdb: error: HBase at h:9091 stopped answering" in result.stderr
    saved = 6 if written else 4  # what reached the store, as the run counted it
    assert (
        f"the {saved} documents of the batches finished before it are saved ({saved} added, "
        "0 replaced, 0 unchanged); run the same command again to resume after them" in result.stderr
    )
    monkeypatch.setattr(Client, "add_documents", add)
    again = shdb(*command)
    assert again.exit_code == DONE, again.output
    assert "resumed: 4 records were done by an earlier run" in again.stderr
    added, unchanged = (0, 2) if written else (2, 0)
    assert f"added {added} documents, replaced 0, unchanged {unchanged}" in again.stderr
    with SimhashIndex.open(str(tmp_path / "ix"), create=False, readonly=True) as index:
        assert index.stats()["documents"] == 6


RECORD = st.sampled_from(["good", "no id", "malformed", "text not a string", "not UTF-8"])


def _line(kind: str, n: int) -> bytes:
    text = f"{ARTICLE} 第{n}段"
    return {
        "good": json.dumps({"id": f"r{n}", "text": text}, ensure_ascii=False).encode(),
        "no id": json.dumps({"url": f"r{n}", "text": text}, ensure_ascii=False).encode(),
        "malformed": b'{"id": "x", "text": ',
        "text not a string": json.dumps({"id": f"r{n}", "text": [text]}).encode(),
        "not UTF-8": b'{"id": "u", "text": "\xff\xfe"}',
    }[kind]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kinds=st.lists(RECORD, min_size=1, max_size=8))
def test_ingest_dedup_and_idf_skip_the_same_records_by_line(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    """Any mix of good and bad records: ingest and dedup skip each bad one, named by
    its line, with the same reason, and exit 3 (0 when none is bad); idf build
    skips the same ones but those without an id, which it does not need."""
    root = tmp_path_factory.mktemp("mix")
    path = root / "in.jsonl"
    path.write_bytes(b"\n".join(_line(k, n) for n, k in enumerate(kinds)) + b"\n")
    bad = {f"{path}:{n + 1}" for n, k in enumerate(kinds) if k != "good"}
    needs_text = {f"{path}:{n + 1}" for n, k in enumerate(kinds) if k not in ("good", "no id")}
    runs: dict[str, tuple[list[str], set[str]]] = {
        "ingest": (["ingest", str(path), "-i", str(root / "ix"), "--json"], bad),
        "dedup": (["dedup", str(path), "--json", "-o", str(root / "pairs.jsonl")], bad),
        "idf": (["idf", "build", str(path), "-o", str(root / "idf.txt"), "--json"], needs_text),
    }
    reasons: dict[str, dict[str, str]] = {}
    for name, (args, expected) in runs.items():
        result = shdb(*args)
        assert result.exit_code == (SKIPPED if expected else DONE), result.output
        skipped = _skips(result.stdout + result.stderr)  # dedup's summary is on stderr
        assert set(skipped) == expected, result.output
        reasons[name] = skipped
    assert reasons["ingest"] == reasons["dedup"]
    assert all(reasons["idf"][w] == reasons["ingest"][w] for w in needs_text)


def _skips(output: str) -> dict[str, str]:
    """where -> reason of the skipped records a --json summary lists."""
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return {s["where"]: s["reason"] for row in rows for s in row.get("skipped", [])}


@pytest.mark.parametrize("command", [["get", "a", "b"], ["query", ARTICLE], ["stats"]])
def test_output_closed_early_is_exit_141_and_no_message(
    command: list[str], files: dict[str, str]
) -> None:
    """`shdb ... | head`: the reader has what it wanted; shdb stops with 141 (as a
    process killed by SIGPIPE) and says nothing (`ingest --report -` says what it
    saved: tests/test_nothing_lost.py)."""
    read, write = os.pipe()
    os.close(read)  # closed before shdb writes: every write is a broken pipe
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "simhash_hbase", *command, "-i", files["ix"]],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")
