"""Input readers: every bad record is named by file:line and the rest survive."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from simhash_hbase import BadRecord, InvalidInput, Record
from simhash_hbase.text.readers import SourceOptions, read_sources, read_text_file

GOOD = "海量文本去重的常用方法是 SimHash 指纹。"


def _read(paths: list[str], **opts: object) -> list[Record | BadRecord]:
    return list(read_sources(paths, SourceOptions(**opts)))  # type: ignore[arg-type]


def _jsonl(tmp_path: Path, lines: list[bytes], name: str = "in.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def _good(doc_id: str) -> bytes:
    return json.dumps({"id": doc_id, "text": GOOD}, ensure_ascii=False).encode()


def test_folder_gives_one_document_per_file_with_relative_ids(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text(GOOD, encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text(GOOD, encoding="utf-8")
    (tmp_path / ".hidden").write_text(GOOD, encoding="utf-8")
    records = _read([str(tmp_path)])
    assert [r.doc_id for r in records if isinstance(r, Record)] == ["a.txt", "sub/b.md"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"id": "x", "text": ', "malformed JSON"),
        (b'["not", "an", "object"]', "an array, not an object"),
        (b'{"text": "t"}', "no 'id' field (fields: text)"),
        (b'{"id": "x"}', "no 'text' field"),
        (b'{"id": 7, "text": "t"}', "field 'id' is a number, not a string"),
        (b'{"id": "x", "text": null}', "field 'text' is JSON null"),
        (b'{"id": "x", "text": true}', "field 'text' is JSON true, not a string"),
        (b'{"id": "x", "text": ["a"]}', "field 'text' is an array, not a string"),
        (b'{"id": "x", "text": {}}', "field 'text' is an object, not a string"),
        (b'{"id": "x", "text": 1.5}', "field 'text' is a number, not a string"),
        (b"null", "JSON null, not an object"),
        (b'"text"', "a string, not an object"),
        (b'{"id": "x", "text": "a\tb"}', "(control character U+0009 inside a string at column 23"),
        # the trial's "Invalid control character at column 58": a quote never closed
        (
            b'{"id": "x", "text": "cut short}',
            "(unterminated string: the line ends inside it at column 32 (close its quote",
        ),
        (b'{"id": "x", "text": "\xff\xfe bad"}', "invalid UTF-8"),
        (b'{"id": "x", "text": "a\x00b"}', "binary content"),
    ],
)
def test_bad_jsonl_line_is_named_and_neighbours_survive(
    tmp_path: Path, line: bytes, reason: str
) -> None:
    path = _jsonl(tmp_path, [_good("before"), line, b"", _good("after")])
    records = _read([path])
    assert [r.doc_id for r in records if isinstance(r, Record)] == ["before", "after"]
    bad = [r for r in records if isinstance(r, BadRecord)]
    assert len(bad) == 1 and bad[0].where == f"{path}:2"
    assert " at at " not in bad[0].reason and "Type" not in bad[0].reason
    assert reason in bad[0].reason


def test_jsonl_extra_fields_become_meta_and_bom_crlf_are_fine(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf" + json.dumps({"id": "a", "text": GOOD, "url": "u"}).encode() + b"\r\n"
    path = tmp_path / "x.jsonl"
    path.write_bytes(raw)
    (record,) = _read([str(path)])
    assert isinstance(record, Record) and record.meta == {"url": "u"} and record.doc_id == "a"


def test_custom_fields(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [json.dumps({"url": "u1", "body": GOOD}).encode()])
    (record,) = _read([path], id_field="url", text_field="body")
    assert isinstance(record, Record) and record.doc_id == "u1"


def test_oversized_jsonl_line_is_skipped_with_bounded_reads(tmp_path: Path) -> None:
    huge = json.dumps({"id": "big", "text": "字" * 5000}, ensure_ascii=False).encode()
    path = _jsonl(tmp_path, [_good("a"), huge, _good("b")])
    records = _read([path], max_bytes=2000)
    assert [r.doc_id for r in records if isinstance(r, Record)] == ["a", "b"]
    (bad,) = [r for r in records if isinstance(r, BadRecord)]
    assert bad.where.endswith(":2") and "over the 2000-byte limit" in bad.reason


def test_text_file_problems(tmp_path: Path) -> None:
    (tmp_path / "gbk.txt").write_bytes("中文".encode("gbk"))
    (tmp_path / "bin.txt").write_bytes(b"\x89PNG\x00\x00")
    (tmp_path / "big.txt").write_text("字" * 1000, encoding="utf-8")
    (tmp_path / "ok.txt").write_text(GOOD, encoding="utf-8")
    records = {Path(r.where.split(":")[0]).name: r for r in _read([str(tmp_path)], max_bytes=100)}
    assert isinstance(records["ok.txt"], Record)
    assert "invalid UTF-8 at byte 0" in records["gbk.txt"].reason  # type: ignore[union-attr]
    assert records["gbk.txt"].where.endswith("gbk.txt:1")
    assert "binary content" in records["bin.txt"].reason  # type: ignore[union-attr]
    assert "over the 100-byte limit (it is 3000 bytes)" in records["big.txt"].reason  # type: ignore[union-attr]


def test_unreadable_file_inside_a_folder(tmp_path: Path) -> None:
    """A dangling link fails to open even for root, like a file we may not read."""
    (tmp_path / "ok.txt").write_text(GOOD, encoding="utf-8")
    (tmp_path / "gone.txt").symlink_to(tmp_path / "deleted-target")
    records = _read([str(tmp_path)])
    assert [r.doc_id for r in records if isinstance(r, Record)] == ["ok.txt"]
    (bad,) = [r for r in records if isinstance(r, BadRecord)]
    assert bad.where.endswith("gone.txt") and "cannot read it" in bad.reason


def test_csv_reading_and_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(
        f'id,text,lang\nr1,{GOOD},zh\nr2,only-two\nr3,"{GOOD}",zh\n'.encode()
        + b"r4,\xff\xfe,zh\nr5,ok text here,en\n"
    )
    records = _read([str(path)])
    assert [r.doc_id for r in records if isinstance(r, Record)] == ["r1", "r3", "r5"]
    bad = {r.where: r.reason for r in records if isinstance(r, BadRecord)}
    assert "2 fields, the header has 3" in bad[f"{path}:3"]
    assert "invalid UTF-8" in bad[f"{path}:5"]
    assert records[0].meta == {"lang": "zh"}  # type: ignore[union-attr]


def test_csv_with_wrong_columns_names_them(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("key,body\n1,x\n\n2,y\n", encoding="utf-8")
    bad = _read([str(path)])  # each row one skipped record
    assert [b.where for b in bad] == [f"{path}:2", f"{path}:3", f"{path}:4"]
    assert all(isinstance(b, BadRecord) for b in bad)
    assert "no column 'id' in the header on line 1 (columns: key, body)" in bad[0].reason
    assert "empty CSV row" in bad[1].reason


def test_stdin_is_jsonl_by_default() -> None:
    stream = io.BytesIO(_good("s1") + b"\n" + b"{broken\n")
    records = list(read_sources(["-"], SourceOptions(), stdin=stream))
    assert isinstance(records[0], Record) and records[0].doc_id == "s1"
    assert isinstance(records[1], BadRecord) and records[1].where == "<stdin>:2"


def test_missing_path_and_unknown_format_fail_up_front(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"nope\.txt: no such file"):
        _read([str(tmp_path / "nope.txt")])
    with pytest.raises(InvalidInput, match="unknown format 'xml'"):
        SourceOptions(format="xml")
    with pytest.raises(InvalidInput, match="no input given"):
        _read([])


def test_empty_file_yields_nothing_or_an_empty_doc(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_bytes(b"")
    (tmp_path / "e.txt").write_bytes(b"")
    assert _read([str(tmp_path / "e.jsonl")]) == []
    (record,) = _read([str(tmp_path / "e.txt")])
    assert isinstance(record, Record) and record.text == ""


def test_read_text_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "q.txt"
    bad.write_bytes(b"ok\n\xff")
    with pytest.raises(InvalidInput, match=r"q.txt:2: invalid UTF-8"):
        read_text_file(str(bad))
