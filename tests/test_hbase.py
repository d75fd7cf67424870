"""HBase specifics: the on-disk format read by plain happybase, errors, URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhash_hbase import InvalidIndexUrl, SimhashIndex, StoreUnavailable
from simhash_hbase.store import hbase_tables as schema

from .test_cli import shdb

SPEC_5X10 = {  # docs/SPEC.md, written out independently of simhash_hbase.scheme
    1: "AB",
    2: "AC",
    3: "AD",
    4: "AE",
    5: "BC",
    6: "BD",
    7: "BE",
    8: "CD",
    9: "CE",
    10: "DE",
}


def _spec_segments(fp: int) -> dict[str, tuple[int, int]]:
    return {
        "A": (fp >> 51, 13),
        "B": ((fp >> 38) & 0x1FFF, 13),
        "C": ((fp >> 25) & 0x1FFF, 13),
        "D": ((fp >> 12) & 0x1FFF, 13),
        "E": (fp & 0xFFF, 12),
    }


@pytest.mark.hbase
def test_tables_decode_by_spec_alone(hbase_url: str) -> None:
    import happybase

    address, prefix = hbase_url.removeprefix("hbase://").split("?prefix=")
    fps = {"doc-1": 0x0123456789ABCDEF, "文档-2": 0xFEDCBA9876543210, "dup": 0x0123456789ABCDEF}
    with SimhashIndex.open(hbase_url) as index:
        for doc_id, fp in fps.items():
            index.add_fingerprint(doc_id, fp, meta={"n": 1})
    host, port = address.rsplit(":", 1)
    conn = happybase.Connection(host, int(port), table_prefix=prefix)
    try:
        seen: dict[tuple[str, int], int] = {}
        for key, data in conn.table("index").scan():
            assert len(key) == 13
            field, flag, fp = int.from_bytes(key[:4], "big"), key[4], int.from_bytes(key[5:], "big")
            segs = _spec_segments(fp)
            (x, wx), (y, wy) = (segs[c] for c in SPEC_5X10[flag])
            assert field == ((x << wy) | y) << (32 - wx - wy)
            for column, value in data.items():
                assert column.startswith(b"d:") and value == b""
                doc_id = column[2:].decode()
                assert fps[doc_id] == fp
                seen[(doc_id, flag)] = fp
        assert len(seen) == 3 * 10
        docs = dict(conn.table("docs").scan())
        assert {k.decode(): int.from_bytes(v[b"f:h"], "big") for k, v in docs.items()} == fps
        assert json.loads(docs[b"doc-1"][b"f:meta"]) == {"n": 1}
        manifest = json.loads(conn.table("meta").row(b"manifest")[b"m:json"])
        assert manifest["scheme"] == "5x10" and manifest["format_version"] == 1
        families = conn.table("index").families()
        assert families[b"d"]["max_versions"] == 1
    finally:
        conn.close()


def test_unreachable_hbase_says_what_to_do() -> None:
    with pytest.raises(StoreUnavailable) as info:
        SimhashIndex.open("hbase://127.0.0.1:1?prefix=x&timeout=2000")
    assert "HBase at 127.0.0.1:1 is not reachable" in str(info.value)
    result = shdb("stats", "-i", "hbase://127.0.0.1:1?prefix=x&timeout=2000")
    assert result.exit_code == 2 and "scripts/hbase start" in result.stderr  # the CLI's hint


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("hbase://", "not of the form"),
        ("hbase://h:9090?prefix=bad name", "not of the form"),
        ("hbase://h:9090?colour=red", "unknown parameter 'colour'"),
        ("hbase://h:99999", "index URL"),
        ("hbase://h:9090?pool=0", "not of the form"),
    ],
)
def test_bad_hbase_urls(url: str, message: str) -> None:
    with pytest.raises(InvalidIndexUrl, match=message):
        SimhashIndex.open(url)


def test_shell_script_in_schema_is_generated_from_the_json() -> None:
    committed = Path(__file__).resolve().parents[1] / "schema" / "create-tables.hbase"
    assert committed.read_text(encoding="utf-8") == schema.shell_script("shdb"), (
        "regenerate with: shdb schema > schema/create-tables.hbase"
    )


def test_split_points_are_even_on_the_first_byte() -> None:
    points = schema.split_points("index")
    assert points == [bytes([16 * i]) for i in range(1, 16)]
    assert schema.split_points("docs") == []
