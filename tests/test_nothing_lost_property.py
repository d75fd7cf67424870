"""Nothing lost, as a property: valid records mixed with damaged ones, in JSONL, CSV
and folders, on both stores; the ids held are exactly the valid ids.

And a kill-and-resume trial whose input changes between the runs.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import ShdbError, SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, SourceOptions, ingest
from simhash_hbase.jobs.verify import verify

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 4096
WORDS = ["海量", "文本", "去重", "指纹", "抽屉", "原理", "索引", "查询", "股市", "银行", "simhash"]
_runs = itertools.count()

# A valid record: an id of letters, digits and CJK, and a text with usable terms.
ids = st.text(alphabet="abcxyz019_-文档", min_size=1, max_size=20)
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join)

# How a record can be damaged, per format: (kind, what is written).
JSONL_DAMAGE = st.sampled_from(
    [
        "bad_bytes",
        "bad_json",
        "id_not_string",
        "text_not_string",
        "huge",
        "empty_id",
        "long_id",
        "no_terms",
        "deep_meta",
        "not_object",
    ]
)
CSV_DAMAGE = st.sampled_from(["bad_bytes", "field_count", "huge", "empty_id", "no_terms"])
FILE_DAMAGE = st.sampled_from(["bad_bytes", "binary", "huge", "no_terms", "bad_name"])


def _jsonl_line(doc_id: str, text: str, damage: str | None) -> bytes:
    row: dict[str, object] = {"id": doc_id, "text": text}
    if damage == "bad_bytes":
        return json.dumps(row, ensure_ascii=False).encode()[:-2] + b'\xff"}'
    if damage == "bad_json":
        return json.dumps(row, ensure_ascii=False).encode()[:-1]
    if damage == "id_not_string":
        row["id"] = 12345
    elif damage == "text_not_string":
        row["text"] = [text]
    elif damage == "huge":
        row["text"] = text + " 指纹" * MAX_BYTES
    elif damage == "empty_id":
        row["id"] = ""
    elif damage == "long_id":
        row["id"] = doc_id + "x" * 1100
    elif damage == "no_terms":
        row["text"] = "，。！ "
    elif damage == "deep_meta":
        return (
            json.dumps(row, ensure_ascii=False).encode()[:-1]
            + b', "m": '
            + b"[" * 5000
            + b"]" * 5000
            + b"}"
        )
    elif damage == "not_object":
        return json.dumps([doc_id, text], ensure_ascii=False).encode()
    return json.dumps(row, ensure_ascii=False).encode()


def _csv_row(doc_id: str, text: str, damage: str | None) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if damage == "field_count":
        writer.writerow([doc_id, text, "extra"])
    elif damage == "huge":
        writer.writerow([doc_id, text + " 指纹" * MAX_BYTES])
    elif damage == "empty_id":
        writer.writerow(["", text])
    elif damage == "no_terms":
        writer.writerow([doc_id, "，。"])
    else:
        writer.writerow([doc_id, text])
    raw = out.getvalue().encode()
    return raw.replace(b"\n", b"\xff\n") if damage == "bad_bytes" else raw


def _write_file(folder: Path, doc_id: str, text: str, damage: str | None) -> None:
    name = os.fsencode(doc_id) + (b"\xff" if damage == "bad_name" else b"") + b".txt"
    body = {
        "bad_bytes": text.encode("gbk", "replace") + b"\xff\xfe",
        "binary": b"\x00\x01" + text.encode(),
        "huge": (text + " 指纹" * MAX_BYTES).encode(),
        "no_terms": "，。！".encode(),
    }.get(damage or "", text.encode())
    with open(os.path.join(os.fsencode(folder), name), "wb") as f:
        f.write(body)


records = st.lists(
    st.tuples(ids, texts, st.booleans()), min_size=1, max_size=12, unique_by=lambda r: r[0]
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fmt=st.sampled_from(["jsonl", "csv", "folder"]),
    rows=records,
    damages=st.data(),
)
def test_ids_held_are_exactly_the_valid_ids(
    store_url: str,
    tmp_path: Path,
    fmt: str,
    rows: list[tuple[str, str, bool]],
    damages: st.DataObject,
) -> None:
    run = next(_runs)
    prefix = f"r{run}-"  # every example adds to the same index: ids are namespaced
    work = tmp_path / f"run{run}"
    work.mkdir()
    damage_of = {"jsonl": JSONL_DAMAGE, "csv": CSV_DAMAGE, "folder": FILE_DAMAGE}[fmt]
    valid, candidates = set(), []
    lines: list[bytes] = []
    for doc_id, text, damaged in rows:
        doc_id = prefix + doc_id
        damage = damages.draw(damage_of) if damaged else None
        candidates.append(doc_id)
        if damage is None:
            valid.add(doc_id)
        if fmt == "jsonl":
            lines.append(_jsonl_line(doc_id, text, damage))
        elif fmt == "csv":
            lines.append(_csv_row(doc_id, text, damage))
        else:
            _write_file(work, doc_id, text, damage)
    if fmt == "jsonl":
        path = work / "in.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
    elif fmt == "csv":
        path = work / "in.csv"
        path.write_bytes(b"id,text\n" + b"".join(lines))
    else:
        path = work
        candidates = [c + ".txt" for c in candidates]
        valid = {v + ".txt" for v in valid}
    with SimhashIndex.open(store_url) as index:
        summary = ingest(
            index, [str(path)], SourceOptions(max_bytes=MAX_BYTES), IngestOptions(batch_size=5)
        )
        held = set(index.get_many([c for c in candidates if len(c.encode()) <= 1024]))
    assert held == valid
    assert summary.added == len(valid)
    assert len(summary.skipped) == len(rows) - len(valid)


def _folder(root: Path, names: range, version: int = 1) -> None:
    for i in names:
        sub = root / f"part{i % 4}"
        sub.mkdir(parents=True, exist_ok=True)
        text = f"版本{version} 文档{i} 海量文本去重 指纹编号{i * 7919 + version} 抽屉原理"
        (sub / f"d{i:04}.txt").write_text(text, encoding="utf-8")


def _names(numbers: range) -> set[str]:
    return {f"part{i % 4}/d{i:04}.txt" for i in numbers}


def _held(store_url: str) -> set[str]:
    """The ids an index holds now; none before the ingest has created it."""
    try:
        with SimhashIndex.open(store_url, create=False) as index:
            return {d.doc_id for d in index.documents()}
    except ShdbError:
        return set()


def test_kill_and_resume_while_the_input_changes(store_url: str, tmp_path: Path) -> None:
    """SIGKILL mid-ingest; between runs files are added (in a subfolder), changed and
    removed. The re-run indexes the input as it is now; nothing is lost or stale."""
    root = tmp_path / "docs"
    # The kill comes at the first poll (every 50 ms) that finds 300 held: 1,700
    # more files are far more than any machine ingests between two polls (the
    # native segmenter does thousands a second), so it lands mid-run; the assert
    # below says so if it ever does not. (12,000 files proved no more, 6x slower.)
    total = 2_000
    _folder(root, range(total))
    cmd = [
        sys.executable,
        "-m",
        "simhash_hbase",
        "ingest",
        "--create",
        str(root),
        "-i",
        store_url,
        "--batch-size",
        "100",
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(_held(store_url)) < 300:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first_run = _names(range(total))
    not_yet = first_run - _held(store_url)
    assert not_yet, "the ingest finished before the kill: give it more input"
    _folder(root, range(total, total + 20))  # new files, in subfolders
    _folder(root, range(0, 10), version=2)  # changed files
    removed = max(not_yet)
    (root / removed).unlink()  # never indexed yet: it must not appear
    expected = (first_run | _names(range(total, total + 20))) - {removed}
    rerun = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    with SimhashIndex.open(store_url, create=False) as index:
        assert {d.doc_id for d in index.documents()} == expected
        changed = index.get("part0/d0000.txt")
        assert changed is not None
        assert changed.fingerprint == index.fingerprint(
            "版本2 文档0 海量文本去重 指纹编号2 抽屉原理"
        )
        assert verify(index).clean
