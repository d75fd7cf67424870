"""Inputs read by their content, not only their name (issue 43.1, 43.6, 43.8, 39):
every suffix x content kind x compression gives the records it holds, or a clear
error naming file:line; no traceback anywhere."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidInput
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers import SourceOptions, check_paths, read_sources
from simhash_hbase.text.readers.sniff import kind_of

COMPRESS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "none": ("", lambda b: b),
    "gzip": (".gz", gzip.compress),
    "zstd": (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    "bz2": (".bz2", bz2.compress),
    "xz": (".xz", lzma.compress),
}
SUFFIXES = [".json", ".jsonl", ".ndjson", ".txt", "", ".csv"]
KINDS = ["array", "jsonl", "text", "csv"]
WORDS = ["海量文本", "去重", "指纹", "抽屉原理", "网页", "爬虫", "相似", "摘要"]

texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=12).map("".join)
records = st.lists(texts, min_size=1, max_size=8).map(
    lambda ts: [(f"http://x/{i}", t) for i, t in enumerate(ts)]
)


def content(kind: str, rows: list[tuple[str, str]]) -> bytes:
    objects = [{"url": u, "body": t} for u, t in rows]
    if kind == "array":  # as Scrapy's -o items.json writes it
        return (
            "[\n" + ",\n".join(json.dumps(o, ensure_ascii=False) for o in objects) + "\n]"
        ).encode()
    if kind == "jsonl":
        return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects).encode()
    if kind == "csv":
        return ("url,body\n" + "".join(f"{u},{t}\n" for u, t in rows)).encode()
    return "\n".join(t for _, t in rows).encode()


def expected_kind(kind: str, suffix: str) -> str:
    """What the file is read as: records (JSON or CSV) or one text document."""
    if kind in ("array", "jsonl") or (kind == "csv" and suffix == ".csv"):
        return "records"
    if suffix == ".csv":
        return "csv-misread"
    return "lines" if suffix in (".jsonl", ".ndjson") else "document"


def read(path: Path, opts: SourceOptions) -> list[Record | BadRecord]:
    check_paths([str(path)], opts)
    return list(read_sources([str(path)], opts))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(KINDS),
    suffix=st.sampled_from(SUFFIXES),
    compression=st.sampled_from(list(COMPRESS)),
    named=st.booleans(),
    fields=st.booleans(),
    rows=records,
)
def test_every_suffix_kind_and_compression_gives_its_records_or_a_clear_error(
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    suffix: str,
    compression: str,
    named: bool,
    fields: bool,
    rows: list[tuple[str, str]],
) -> None:
    ext, compress = COMPRESS[compression]
    path = tmp_path_factory.mktemp("in") / f"feed{suffix}{ext if named else ''}"
    path.write_bytes(compress(content(kind, rows)))
    opts = SourceOptions(id_field="url", text_field="body", fields_given=fields)
    want = expected_kind(kind, suffix)
    if fields and want == "document":
        with pytest.raises(InvalidInput, match=r"not as records: --id-field"):
            read(path, opts)
        return
    items = read(path, opts)
    if want == "records":
        assert [(r.doc_id, r.text) for r in items if isinstance(r, Record)] == rows, items
        assert not [b for b in items if isinstance(b, BadRecord)]
    elif want == "document":
        (doc,) = items
        assert isinstance(doc, Record) and doc.doc_id == str(path)
        assert doc.text == content(kind, rows).decode().strip() or kind == "csv"
    else:  # read as records it does not hold: every bad one names file:line
        assert items and all(isinstance(b, BadRecord) for b in items)
        assert all(b.where.startswith(f"{path}:") for b in items), items


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    compression=st.sampled_from([c for c in COMPRESS if c != "none"]),
    kind=st.sampled_from(["array", "jsonl"]),
    cut=st.floats(0.05, 0.95),
    corrupt=st.booleans(),
)
def test_a_damaged_compressed_file_keeps_the_records_before_and_names_the_damage(
    tmp_path_factory: pytest.TempPathFactory, compression: str, kind: str, cut: float, corrupt: bool
) -> None:
    rows = [(f"http://x/{i}", f"第{i}篇 海量文本去重 指纹{i * 7919} 抽屉原理") for i in range(3000)]
    ext, compress = COMPRESS[compression]
    blob = compress(content(kind, rows))
    at = max(16, int(len(blob) * cut))
    damaged = blob[:at] + bytes(64) + blob[at + 64 :] if corrupt else blob[:at]
    path = tmp_path_factory.mktemp("in") / f"feed.json{ext}"
    path.write_bytes(damaged)
    items = list(read_sources([str(path)], SourceOptions(id_field="url", text_field="body")))
    good = [(r.doc_id, r.text) for r in items if isinstance(r, Record)]
    damage = [b for b in items if isinstance(b, BadRecord) and b.problem is Problem.DAMAGED]
    if not corrupt:  # a cut file: the records read are the first ones, whole
        assert good == rows[: len(good)]
        assert len(damage) == 1 and items[-1] is damage[0]
    if damage:
        (bad,) = damage
        assert bad.where.startswith(f"{path}:")
        assert f"the {compression} data is" in bad.reason
        assert "truncated" in bad.reason or "corrupt" in bad.reason
        assert "records before were read" in bad.reason


def test_a_bad_array_element_is_named_by_line_and_index_and_its_neighbours_are_read(
    tmp_path: Path,
) -> None:
    lines = [
        '{"url": "a", "body": "海量文本去重"}',
        '{"url": "b", "body": broken}',
        "42",
        '{"url": 7, "body": "指纹"}',
        '{"url": "e", "body": "抽屉原理"}',
        '{"url": "f", "title": "no body"}',
        '{"url": "g", "body": "近似重复检测"}',
    ]
    path = tmp_path / "items.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", "utf-8")
    items = list(read_sources([str(path)], SourceOptions(id_field="url", text_field="body")))
    assert [r.doc_id for r in items if isinstance(r, Record)] == ["a", "e", "g"]
    bad = {b.where: b.reason for b in items if isinstance(b, BadRecord)}
    assert "element 1: malformed JSON" in bad[f"{path}:3"]
    assert bad[f"{path}:4"] == "element 2: a number, not an object"
    assert bad[f"{path}:5"].startswith("element 3: ") and "'url' is a number" in bad[f"{path}:5"]
    assert bad[f"{path}:7"].startswith("element 5: no 'body' field")


def test_a_cut_array_keeps_its_elements_and_says_it_is_not_closed(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text('[{"url": "a", "body": "海量文本去重"},\n{"url": "b", "bo', "utf-8")
    items = list(read_sources([str(path)], SourceOptions(id_field="url", text_field="body")))
    assert [r.doc_id for r in items if isinstance(r, Record)] == ["a"]
    assert any(isinstance(b, BadRecord) and b.where == f"{path}:2" for b in items)


@pytest.mark.parametrize(
    ("head", "suffix", "kind"),
    [
        (b"[1] Introduction\n", ".txt", "text"),
        (b"[\n  {", "", "json"),
        (b"{not json at all", ".txt", "text"),
        (b'{"a": 1}\n{"a": 2}\n', "", "jsonl"),
        (b'{\n  "a": 1\n}\n', ".json", "json"),
        (b"WARC/1.1\r\n", ".gz", "warc"),
        (b"id,text\n", ".csv", "csv"),
        (b"\xef\xbb\xbf[{", ".txt", "json"),
        (b'["a", "b"]\n{"id": "c"}\n', ".jsonl", "jsonl"),
        (b'[\n{"id": "c"}\n]', ".jsonl", "json"),
    ],
)
def test_the_content_decides_where_it_can(head: bytes, suffix: str, kind: str) -> None:
    assert kind_of(head, suffix) == kind


def _warc(path: Path, pages: list[tuple[str, str, bytes]], *, compress: bool) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=compress)
        for uri, content_type, body in pages:
            headers = StatusAndHeaders("200 OK", [("Content-Type", content_type)], "HTTP/1.1")
            record = writer.create_warc_record(
                uri, "response", payload=io.BytesIO(body), http_headers=headers
            )
            writer.write_record(record)


@pytest.mark.parametrize("name", ["crawl.warc", "crawl.warc.gz", "crawl-no-suffix"])
def test_warc_response_pages_are_documents_named_by_their_uri(tmp_path: Path, name: str) -> None:
    page = "<html><body><article><p>海量文本去重的常用方法是指纹。</p></article></body></html>"
    pages = [
        ("http://a/1", "text/html; charset=utf-8", page.encode()),
        ("http://a/logo.png", "image/png", b"\x89PNG\r\n"),
        ("http://a/2", "text/html; charset=gbk", page.replace("指纹", "抽屉").encode("gbk")),
    ]
    path = tmp_path / name
    _warc(path, pages, compress=name != "crawl.warc")
    items = list(read_sources([str(path)], SourceOptions()))
    assert [(r.doc_id, r.text) for r in items if isinstance(r, Record)] == [
        ("http://a/1", "海量文本去重的常用方法是指纹。"),
        ("http://a/2", "海量文本去重的常用方法是抽屉。"),
    ]
    assert all(isinstance(r, Record) for r in items)


def test_a_headerless_csv_is_read_with_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text('1,海量文本去重\n2,"两行的\n文本"\n3,x,extra\n', "utf-8")
    opts = SourceOptions(columns=("id", "text"), fields_given=True)
    items = list(read_sources([str(path)], opts))
    assert [(r.doc_id, r.text) for r in items if isinstance(r, Record)] == [
        ("1", "海量文本去重"),
        ("2", "两行的\n文本"),
    ]
    (bad,) = [b for b in items if isinstance(b, BadRecord)]
    assert bad.where == f"{path}:4" and "3 fields" in bad.reason


def test_a_csv_without_a_header_points_at_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text('1,"第一行\n第二行"\n', "utf-8")
    (bad,) = read_sources([str(path)], SourceOptions())
    assert isinstance(bad, BadRecord) and "--columns" in bad.reason and "\n" not in bad.reason


runner = CliRunner()


def shdb(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_cli_reads_jsonl_named_json_and_refuses_fields_for_a_text(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl.json"
    rows = [
        {"url": f"http://x/{i}", "body": f"第{i}篇 海量文本去重 指纹{i * 7919}"} for i in range(5)
    ]
    crawl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    index = str(tmp_path / "ix")
    done = shdb("ingest", str(crawl), "--id-field", "url", "--text-field", "body", "-i", index)
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    assert "added 5 documents" in done.stderr  # type: ignore[attr-defined]
    plain = tmp_path / "notes.txt"
    plain.write_text("海量文本去重的常用方法\n", "utf-8")
    refused = shdb("ingest", str(plain), "--id-field", "url", "-i", str(tmp_path / "ix2"))
    assert refused.exit_code == 2
    assert "not as records" in refused.stderr and "Traceback" not in refused.output  # type: ignore[attr-defined]
    assert not (tmp_path / "ix2").exists()


def test_cli_columns_must_name_the_id_and_text(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("1,海量文本去重\n", "utf-8")
    result = shdb("ingest", str(path), "--columns", "a,b", "-i", str(tmp_path / "ix"))
    assert result.exit_code == 2 and "--columns" in result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("compression", [c for c in COMPRESS if c != "none"])
@pytest.mark.parametrize("suffix", [".txt", ".html", ""])
def test_query_and_fingerprint_file_read_compressed_text_as_ingest_does(
    tmp_path: Path, compression: str, suffix: str
) -> None:
    """``--file`` of one compressed text gives what the plain file gives; a cut one is
    a clear error naming the damage, not "binary content" (issue 43.6)."""
    text = "<html><body><p>" + "海量文本去重，指纹与抽屉原理。" * 8 + "</p></body></html>"
    plain, (ending, pack) = tmp_path / f"doc{suffix}", COMPRESS[compression]
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / f"doc{suffix}{ending}"
    packed.write_bytes(pack(text.encode("utf-8")))
    want = shdb("fingerprint", "--file", str(plain))
    got = shdb("fingerprint", "--file", str(packed))
    assert got.exit_code == 0 and got.stdout == want.stdout, got.output  # type: ignore[attr-defined]
    cut = tmp_path / f"cut{suffix}{ending}"
    cut.write_bytes(packed.read_bytes()[: len(packed.read_bytes()) // 2])
    done = shdb("fingerprint", "--file", str(cut))
    assert done.exit_code == 2 and "binary" not in done.output  # type: ignore[attr-defined]
    assert compression.replace("zstd", "zst")[:2] in done.output.lower()  # type: ignore[attr-defined]


def test_one_run_ingests_a_mixed_folder_with_fields_for_its_records(tmp_path: Path) -> None:
    """The trial's folder of pages, texts, a WARC and JSON Lines took two runs: the
    fields skipped every whole-file document, leaving them out skipped the records.
    The fields apply to the record files; the others are read as they are."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "page.html").write_text(
        "<html><body><article><p>网页里的海量文本去重方法。</p></article></body></html>", "utf-8"
    )
    (mixed / "notes.txt").write_text("纯文本笔记：抽屉原理与指纹。\n", "utf-8")
    page = "<html><body><article><p>归档网页：相似文本的摘要。</p></article></body></html>"
    _warc(mixed / "crawl.warc", [("http://a/1", "text/html", page.encode())], compress=False)
    rows = [{"url": f"http://x/{i}", "body": f"第{i}篇 爬虫抓取的记录 {i * 79}"} for i in range(3)]
    (mixed / "feed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    index = str(tmp_path / "ix")
    done = shdb("ingest", str(mixed), "--id-field", "url", "--text-field", "body", "-i", index)
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    assert "added 6 documents" in done.stderr, done.stderr  # type: ignore[attr-defined]
    assert "not as records" not in done.output  # type: ignore[attr-defined]
    # a file named as input still holds what the fields name, or is refused
    refused = shdb("ingest", str(mixed / "notes.txt"), "--id-field", "url", "-i", index)
    assert refused.exit_code == 2 and "not as records" in refused.stderr  # type: ignore[attr-defined]
