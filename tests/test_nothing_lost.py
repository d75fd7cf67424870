"""Issue #10's examples, each a test: isolation, exact resume, bounds, paths, one CLI voice.

Every case asserts the exact set of ids held afterwards (nothing lost, nothing extra).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simhash_hbase import IngestSummary, SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, SourceOptions, index_records, ingest

from .test_cli import shdb
from .test_index import ARTICLE, OTHER

ROOT = Path(__file__).resolve().parents[1]
SHDB = [sys.executable, "-m", "simhash_hbase"]
EXIT_SKIPPED = 3


def _line(doc_id: object, text: object = ARTICLE, **extra: object) -> bytes:
    return json.dumps({"id": doc_id, "text": text, **extra}, ensure_ascii=False).encode()


def _text(n: int) -> str:
    return f"第{n}篇 海量文本去重 指纹编号{n * 7919} 抽屉原理 近似重复检测"


def _held(url: str, ids: list[str]) -> set[str]:
    with SimhashIndex.open(url, create=False) as index:
        return set(index.get_many(ids))


# -- 1. one bad record never costs a batch-mate ---------------------------------------
def test_deeply_nested_meta_is_one_skipped_record(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    deep = b'{"id": "deep", "text": "x", "meta": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    path.write_bytes(_line("before") + b"\n" + deep + b"\n" + _line("after", OTHER) + b"\n")
    result = shdb("ingest", "--create", str(path), "-i", store_url)
    assert result.exit_code == EXIT_SKIPPED, result.stderr
    assert f"skipped {path}:2: unusable JSON (nested too deeply)" in result.stderr
    assert _held(store_url, ["before", "after", "deep"]) == {"before", "after"}


def test_file_name_that_is_not_utf8_costs_only_itself(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(ARTICLE, encoding="utf-8")
    (folder / "c.txt").write_text(OTHER, encoding="utf-8")
    with open(os.path.join(os.fsencode(folder), b"b\xff.txt"), "wb") as f:
        f.write(_text(1).encode())
    result = shdb("ingest", "--create", str(folder), "-i", store_url)
    assert result.exit_code == EXIT_SKIPPED, result.stderr
    assert "b\\xff.txt: the file name is not valid UTF-8" in result.stderr
    assert _held(store_url, ["a.txt", "c.txt"]) == {"a.txt", "c.txt"}


def test_get_of_an_id_that_is_not_text_is_a_message(store_url: str, corpus_jsonl: Path) -> None:
    shdb("ingest", "--create", str(corpus_jsonl), "-i", store_url)
    bad = os.fsdecode(b"x\xff")  # what a shell passes for $(printf 'x\xff')
    result = shdb("get", bad, "-i", store_url)
    assert result.exit_code == 2
    assert result.stderr.startswith("shdb: error: document id has a character")
    assert "Traceback" not in result.output


def test_csv_header_with_bad_bytes_is_named(store_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"id,te\xffxt\n1,x\n")
    good = tmp_path / "good.csv"
    good.write_text(f"id,text\ng1,{ARTICLE}\n", encoding="utf-8")
    result = shdb("ingest", "--create", str(bad), str(good), "-i", store_url)
    assert result.exit_code == EXIT_SKIPPED, result.stderr
    assert f"skipped {bad}:1: invalid UTF-8 in the header; the file was skipped" in result.stderr
    assert _held(store_url, ["g1", "1"]) == {"g1"}


def test_meta_that_is_not_json_costs_only_its_record(store_url: str) -> None:
    records = [(f"d{i}", _text(i), {"n": i}) for i in range(200)]
    records[57] = ("d57", _text(57), {"when": object()})
    records[58] = ("d58", "\ud800 lone surrogate " + _text(58), None)
    with SimhashIndex.open(store_url) as index:
        summary = index_records(index, records, IngestOptions(batch_size=200))
    assert summary.added == 198
    assert [b.where for b in summary.skipped] == ["'d57'", "'d58'"]
    assert "cannot be stored as JSON" in summary.skipped[0].reason
    assert _held(store_url, [r[0] for r in records]) == {f"d{i}" for i in range(200)} - {
        "d57",
        "d58",
    }


def test_gbk_idf_table_is_a_message(tmp_path: Path) -> None:
    table = tmp_path / "gbk-idf.txt"
    table.write_bytes("天气 1.0\n公园 2.0\n".encode("gbk"))
    result = shdb("fingerprint", ARTICLE, "--idf", str(table))
    assert result.exit_code == 2
    assert f"shdb: error: {table}:1: invalid UTF-8" in result.stderr


# -- 2. exact resume ---------------------------------------------------------------------
def _stop_after(records: int):  # type: ignore[no-untyped-def]
    def on_progress(summary: IngestSummary) -> None:
        if summary.records >= records:
            raise KeyboardInterrupt

    return on_progress


def _folder(root: Path, n: int) -> list[str]:
    ids = []
    for i in range(n):
        sub = root / f"part{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"d{i:03}.txt").write_text(_text(i), encoding="utf-8")
        ids.append(f"part{i % 3}/d{i:03}.txt")
    return ids


def test_file_added_in_a_subfolder_after_an_interrupt_is_indexed(
    store_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "docs"
    ids = _folder(root, 60)
    options = IngestOptions(batch_size=10)
    with SimhashIndex.open(store_url) as index:
        with pytest.raises(KeyboardInterrupt):
            ingest(index, [str(root)], SourceOptions(), options, on_progress=_stop_after(20))
        (root / "part1" / "new.txt").write_text(_text(999), encoding="utf-8")
        summary = ingest(index, [str(root)], SourceOptions(), options)
    assert summary.resumed_after == 0  # the input changed: start over
    assert _held(store_url, [*ids, "part1/new.txt"]) == {*ids, "part1/new.txt"}


def test_fail_mode_rerun_stops_at_the_same_line_again(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_line("ok") + b"\n{oops\n" + _line("later", OTHER) + b"\n")
    for _ in range(2):
        result = shdb("ingest", "--create", str(path), "-i", store_url, "--on-error", "fail")
        assert result.exit_code == 2
        assert f"shdb: error: {path}:2: malformed JSON" in result.stderr
        assert "--on-error skip" in result.stderr
    assert _held(store_url, ["ok", "later"]) == {"ok"}
    result = shdb(
        "ingest", "--create", str(path), "-i", store_url
    )  # skip mode: goes on, lists the line
    assert result.exit_code == EXIT_SKIPPED and f"skipped {path}:2" in result.stderr
    assert _held(store_url, ["ok", "later"]) == {"ok", "later"}


def test_skipped_records_are_reported_again_after_a_resume(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    lines = [_line(f"d{i}", _text(i)) for i in range(40)]
    lines[3] = b"{broken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    options = IngestOptions(batch_size=10)
    with SimhashIndex.open(store_url) as index:
        with pytest.raises(KeyboardInterrupt):
            ingest(index, [str(path)], SourceOptions(), options, on_progress=_stop_after(20))
        summary = ingest(index, [str(path)], SourceOptions(), options)
    assert summary.resumed_after == 20
    assert [b.where for b in summary.skipped] == [f"{path}:4"]


def test_store_text_rerun_does_not_resume_a_run_without_it(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(_line(f"d{i}", _text(i)) for i in range(30)) + b"\n")
    with SimhashIndex.open(store_url) as index, pytest.raises(KeyboardInterrupt):
        ingest(
            index,
            [str(path)],
            SourceOptions(),
            IngestOptions(batch_size=10),
            on_progress=_stop_after(10),
        )
    result = shdb(
        "ingest", "--create", str(path), "-i", store_url, "--store-text", "--batch-size", "10"
    )
    assert result.exit_code == 0 and "resumed" not in result.stderr
    with SimhashIndex.open(store_url, create=False) as index:
        docs = index.get_many([f"d{i}" for i in range(30)])
    assert len(docs) == 30 and all(d.text is not None for d in docs.values())


def test_reingesting_an_unchanged_folder_reports_nothing(store_url: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text(ARTICLE, encoding="utf-8")
    (root / "a-copy.txt").write_text(ARTICLE + "！", encoding="utf-8")
    (root / "b.txt").write_text(OTHER, encoding="utf-8")
    first = tmp_path / "r1.jsonl"
    second = tmp_path / "r2.jsonl"
    assert (
        shdb("ingest", "--create", str(root), "-i", store_url, "--report", str(first)).exit_code
        == 0
    )
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert [(x["id"], [m["id"] for m in x["matches"]], x["total"]) for x in lines] == [
        ("a.txt", ["a-copy.txt"], 1)
    ]
    assert (
        shdb("ingest", "--create", str(root), "-i", store_url, "--report", str(second)).exit_code
        == 0
    )
    assert second.read_text() == ""


def test_report_survives_an_interrupt_without_loss_or_repeats(
    store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    rows = []
    for i in range(40):  # every 4th record is a near-copy of the one before
        rows.append(_line(f"d{i}", _text(i - 1 if i % 4 == 3 else i)))
    path.write_bytes(b"\n".join(rows) + b"\n")
    report = tmp_path / "dups.jsonl"

    def run(stop: int | None) -> None:
        from simhash_hbase.cli.ingest import JsonlReport

        sink = JsonlReport(str(report))
        try:
            # the pigeonhole net alone: these short texts share most shingles; version 1,
            # whose terms include the numbers that tell these texts apart
            with SimhashIndex.open(store_url, nets="simhash", params={"version": 1}) as index:
                ingest(
                    index,
                    [str(path)],
                    SourceOptions(),
                    IngestOptions(batch_size=8),
                    report=sink,
                    on_progress=_stop_after(stop) if stop else None,
                )
        finally:
            sink.close()

    with pytest.raises(KeyboardInterrupt):
        run(16)
    with report.open("a", encoding="utf-8") as f:  # a line written after the checkpoint
        f.write('{"id": "d19", "matches": [{"id": "d18", "distance": 0}], "total": 1}\n')
    run(None)
    pairs = [json.loads(x) for x in report.read_text().splitlines()]
    assert [(p["id"], [m["id"] for m in p["matches"]]) for p in pairs] == [
        (f"d{i}", [f"d{i - 1}"]) for i in range(3, 40, 4)
    ]


# -- 3. bounds ------------------------------------------------------------------------------
def test_devices_are_refused_up_front(tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    for args in (
        ["ingest", "--fingerprints", "/dev/zero", "--max-bytes", "1000", "-i", index],
        ["ingest", "/dev/zero", "-i", index],
        ["query", "--file", "/dev/zero", "-i", index],
        ["fingerprint", "--file", "/dev/zero"],
    ):
        result = shdb(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "/dev/zero is a device or socket, not a file" in result.stderr
    assert not Path(index).exists()


def test_absurd_limits_are_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_line("a") + b"\n")
    index = str(tmp_path / "ix")
    for args in (
        ["ingest", str(path), "-i", index, "--max-bytes", "1099511627776"],
        ["ingest", str(path), "-i", index, "--max-bytes", "0"],
        ["ingest", str(path), "-i", index, "--batch-size", "0"],
        ["query", "--file", str(path), "-i", index, "--max-bytes", "-1"],
    ):
        result = shdb(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "--max-bytes" in result.stderr or "--batch-size" in result.stderr
    assert not Path(index).exists()


def test_query_and_fingerprint_files_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text(ARTICLE * 10, encoding="utf-8")
    result = shdb("fingerprint", "--file", str(path), "--max-bytes", "100")
    assert result.exit_code == 2
    assert "over the 100-byte limit (it is " in result.stderr


def test_csv_limit_counts_bytes_not_characters(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(
        f"id,text\nbefore,{ARTICLE}\nbig,{'字' * 2000}\nafter,{OTHER}\n", encoding="utf-8"
    )  # 'big' is 2000 characters, 6000 bytes
    result = shdb("ingest", "--create", str(path), "-i", store_url, "--max-bytes", "4096")
    assert result.exit_code == EXIT_SKIPPED, result.stderr
    assert f"skipped {path}:3: the document is over the 4096-byte limit" in result.stderr
    assert _held(store_url, ["before", "big", "after"]) == {"before", "after"}


def _peak_rss_kib(args: list[str]) -> tuple[int, str, str]:
    """Peak RSS (KiB), exit code and stderr of `shdb ARGS` in a fresh process."""
    code = (
        "import resource, sys; from simhash_hbase.cli.app import app\n"
        "try: app(sys.argv[1:])\n"
        "except SystemExit as e: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
        "e.code, file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT
    )
    peak_kib, exit_code = result.stderr.split()[-2:]
    return int(peak_kib), exit_code, result.stderr


def test_a_sparse_csv_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """300 MB without a newline in one CSV record costs no more memory than a tiny file."""
    head = f"id,text\nbefore,{ARTICLE}\n".encode()
    tail = f'"\nafter,{OTHER}\n'.encode()
    small, path = tmp_path / "small.csv", tmp_path / "sparse.csv"
    small.write_bytes(head + b'tiny,"x' + tail)
    with path.open("wb") as f:
        f.write(head + b'huge,"')
        f.truncate(f.tell() + 300 * 2**20)  # 300 MB of NUL bytes, no newline
        f.seek(0, os.SEEK_END)
        f.write(tail)
    args = ["ingest", "-i", str(tmp_path / "ix"), "--max-bytes", "65536", "--no-dedup"]
    baseline, _, _ = _peak_rss_kib([*args, str(small)])
    peak, exit_code, stderr = _peak_rss_kib([*args, str(path)])
    assert exit_code == str(EXIT_SKIPPED), stderr
    assert f"skipped {path}:3: the document is over the 65536-byte limit" in stderr
    assert peak - baseline < 32 * 1024, f"peak RSS {peak // 1024} MiB vs {baseline // 1024} MiB"
    assert _held(str(tmp_path / "ix"), ["before", "huge", "after"]) == {"before", "after"}


# -- 4. paths and outputs --------------------------------------------------------------
def test_outputs_are_checked_before_any_work(tmp_path: Path) -> None:
    corpus = tmp_path / "in.jsonl"
    corpus.write_bytes(_line("a") + b"\n")
    index = tmp_path / "ix"
    cases = [
        (
            ["ingest", str(corpus), "-i", str(index), "--report", "/nonexistent/x.jsonl"],
            "--report /nonexistent/x.jsonl: the folder /nonexistent does not exist",
        ),
        (["ingest", str(corpus), "-i", str(index), "--report", str(corpus)], "is also an input"),
        (["dedup", str(corpus), "-o", str(tmp_path)], "is a folder; give a file name"),
        (["idf", "build", str(corpus), "-o", "/nonexistent/i"], "the folder /nonexistent does"),
    ]
    for args, message in cases:
        result = shdb(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr and "Traceback" not in result.output
    assert not index.exists()
    assert corpus.read_bytes() == _line("a") + b"\n"


def test_file_urls_and_folders_with_colons(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "in.jsonl"
    corpus.write_bytes(_line("a") + b"\n")
    assert shdb("ingest", str(corpus), "-i", "file://myindex").exit_code == 0
    assert (tmp_path / "myindex" / "data.mdb").exists()
    assert not (tmp_path / "data.mdb").exists()
    assert shdb("get", "a", "-i", f"file://{tmp_path}/myindex").exit_code == 0
    assert shdb("ingest", str(corpus), "-i", "snap:2024").exit_code == 0
    assert (tmp_path / "snap:2024" / "data.mdb").exists()


def test_folder_walk_skips_fifos_and_the_index_itself(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text(ARTICLE, encoding="utf-8")
    os.mkfifo(root / "pipe")
    index = root / "shdb-index"
    for _ in range(2):  # the second run walks a folder that holds the index
        proc = subprocess.run(
            [*SHDB, "ingest", str(root), "-i", str(index)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert proc.returncode == EXIT_SKIPPED, proc.stderr
        assert f"skipped {root / 'pipe'}: not a regular file (FIFO, socket or device)" in (
            proc.stderr
        )
        assert "data.mdb" not in proc.stderr
    with SimhashIndex.open(str(index), create=False) as ix:
        assert {d.doc_id for d in ix.documents()} == {"a.txt"}


# -- 6. one CLI voice ---------------------------------------------------------------------
@pytest.fixture
def corpus_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(_line("a") + b"\n" + _line("b", OTHER) + b"\n")
    return path


def test_every_data_command_speaks_json(corpus_jsonl: Path, tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    result = shdb("ingest", str(corpus_jsonl), "-i", index, "--json")
    assert json.loads(result.stdout)["added"] == 2
    found = json.loads(shdb("query", ARTICLE, "-i", index, "--json").stdout)
    assert found["matches"][0]["id"] == "a" and found["total"] == 1
    assert json.loads(shdb("get", "a", "-i", index, "--json").stdout)["id"] == "a"
    assert json.loads(shdb("stats", "-i", index, "--json").stdout)["documents"] == 2
    assert json.loads(shdb("verify", "-i", index, "--json").stdout)["clean"] is True
    fp = json.loads(shdb("fingerprint", ARTICLE, "--json", "--terms").stdout)
    assert len(fp["fingerprint"]) == 16 and fp["terms"][0]["term"]
    assert json.loads(shdb("remove", "b", "-i", index, "--json").stdout)["removed"] == ["b"]


def test_human_output_is_a_table_with_a_header(corpus_jsonl: Path, tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    shdb("ingest", str(corpus_jsonl), "-i", index)
    assert shdb("stats", "-i", index).stdout.startswith("stat\tvalue\n")
    assert shdb("verify", "-i", index).stdout.startswith("check\tvalue\n")
    assert shdb("query", ARTICLE, "-i", index).stdout.startswith(
        "distance\tsimilarity\tfingerprint\tid\n"
    )
    assert shdb("get", "a", "-i", index).stdout.startswith("id\tfingerprint\ttext\tmeta\ttime\n")


@pytest.mark.parametrize("k", ["-1", "4"])
def test_k_out_of_range_hint_is_true(k: str, corpus_jsonl: Path, tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    shdb("ingest", str(corpus_jsonl), "-i", index)
    result = shdb("query", ARTICLE, "-i", index, "-k", k)
    assert result.exit_code == 2
    assert f"k={k} is out of range: scheme 5x10 answers exactly for 0 <= k <= 3" in result.stderr
    assert "hint: give -k between 0 and 3" in result.stderr
    assert "more segments" not in result.stderr


def test_stdin_text_takes_an_id(tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    assert shdb("ingest", "-", "-i", index, "--id", "one", stdin=ARTICLE).exit_code == 0
    assert shdb("ingest", "-", "-i", index, "--id", "two", stdin=OTHER).exit_code == 0
    assert _held(index, ["one", "two", "<stdin>"]) == {"one", "two"}
    missing = shdb("ingest", "-", "-i", index, "--format", "text", stdin=OTHER)
    assert missing.exit_code == 2 and "give --id ID" in missing.stderr


def test_version_and_clean_help() -> None:
    from simhash_hbase import __version__

    assert shdb("--version").stdout.startswith(f"shdb (simhash-hbase) {__version__}\n")
    for command in ("ingest", "query", "fingerprint", "get", "remove", "dedup", "verify"):
        text = shdb(command, "--help").stdout
        assert "<" not in text.split("Options:")[1].replace("<TAB>", ""), text


def test_idf_build_lists_what_it_skipped(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(_line("a") + b"\n{broken\n" + _line("b", OTHER) + b"\n")
    result = shdb("idf", "build", str(path), "-o", str(tmp_path / "idf.txt"))
    assert result.exit_code == EXIT_SKIPPED
    assert f"skipped {path}:2: malformed JSON" in result.stderr


def _big_corpus(path: Path, n: int) -> Path:
    path.write_bytes(b"\n".join(_line(f"d{i}", _text(i)) for i in range(n)) + b"\n")
    return path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_says_what_is_saved_and_how_to_resume(workers: str, tmp_path: Path) -> None:
    # Far more input than the run can finish before the signal, on any machine: the
    # signal lands half a second after the index exists (a quiet machine ingests
    # 20,000 of these in under 3 s).
    corpus = _big_corpus(tmp_path / "in.jsonl", 200_000)
    index = str(tmp_path / "ix")
    proc = subprocess.Popen(
        [*SHDB, "ingest", str(corpus), "-i", index, "--workers", workers, "--batch-size", "200"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + 120
        while not (Path(index) / "data.mdb").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:  # a run that outlives the test (a hang, a stopped pytest) is never left behind
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "shdb: error: interrupted: the" in err and "run the same command again to resume" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def _die_with_parent() -> None:
    """The child gets SIGKILL when pytest dies (killed by a timeout, say): an
    interrupted test leaves no 200,000-document ingest running. And it takes
    Ctrl-C as a terminal's child would: pytest started in the background (a CI
    script's ``&``) ignores SIGINT, and Python installs no KeyboardInterrupt
    handler in a child that inherits the ignore."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_broken_pipe_stops_ingest_saying_what_was_saved(tmp_path: Path) -> None:
    corpus = _big_corpus(tmp_path / "in.jsonl", 300)
    dup = tmp_path / "dup.jsonl"
    dup.write_bytes(corpus.read_bytes().replace(b'"id": "d', b'"id": "x'))
    index = str(tmp_path / "ix")
    shell = (
        f"{sys.executable} -m simhash_hbase ingest {corpus} {dup} -i {index} "
        "--report - --batch-size 10 | head -1"
    )
    proc = subprocess.run(shell, shell=True, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.stdout.count("\n") == 1
    assert "stopped: the report's reader closed it" in proc.stderr, proc.stderr
    assert "run the same command again to resume" in proc.stderr
    assert "Traceback" not in proc.stderr and "shdb: error" not in proc.stderr
