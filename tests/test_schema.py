"""schema/ is the one source of the HBase schema: the JSON, the hbase-shell script and
the tables the code creates on a real HBase all say the same thing.

The JSON is read here straight from the top-level folder, not through the code
under test, and the script is parsed independently of the code that writes it.
"""

from __future__ import annotations

import ast
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from simhash_hbase.store import open_store
from simhash_hbase.store.hbase import tables as hbase_tables
from simhash_hbase.store.hbase.store import HBaseStore

from .conftest import gateway_address
from .test_cli import shdb

SCHEMA = Path(__file__).resolve().parent.parent / "schema"
CREATE = re.compile(
    r"^create '(?P<prefix>\w+)_(?P<table>\w+)', \{(?P<family>.*?)\}(?P<splits>, SPLITS => \[.*\])?$"
)


def _json() -> dict[str, Any]:
    tables: dict[str, Any] = json.loads((SCHEMA / "hbase-tables.json").read_text("utf-8"))["tables"]
    return tables


def _ruby(text: str) -> Any:
    """A value of the shell script (Ruby: 'str', 1, 'true', {'k' => 'v'}) as JSON has it."""
    value = ast.literal_eval(text.replace("=>", ":"))
    if value in ("true", "false"):
        return value == "true"
    return value


def _script() -> dict[str, dict[str, Any]]:
    """Table -> family name, attributes and split count, parsed from the committed script."""
    found = {}
    for line in (SCHEMA / "hbase-tables.hbase").read_text("utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = CREATE.match(line)
        assert match, f"not a create line: {line}"
        pairs = re.findall(r"(\w+) => ('[^']*'|\d+|\{[^}]*\})", match["family"])
        attributes = {key: _ruby(value) for key, value in pairs}
        splits = match["splits"].count('"') // 2 if match["splits"] else 0
        found[match["table"]] = {
            "family": attributes.pop("NAME"),
            "attributes": attributes,
            "splits": splits,
        }
    return found


def test_the_installed_schema_is_the_top_level_folder() -> None:
    installed = resources.files("simhash_hbase.schema")
    for name in ("hbase-tables.json", "hbase-tables.hbase"):
        assert installed.joinpath(name).read_bytes() == (SCHEMA / name).read_bytes()


def test_shdb_schema_names_the_folder_and_prints_the_committed_script() -> None:
    help_text = "".join(shdb("schema", "--help").stdout.split())  # wrapped anywhere
    assert "schema/hbase-tables.json" in help_text and "schema/hbase-tables.hbase" in help_text
    assert shdb("schema").stdout == (SCHEMA / "hbase-tables.hbase").read_text("utf-8")


def test_the_shell_script_creates_what_the_json_says() -> None:
    """The script is for Thrift1-only gateways: the rows layout's tables."""
    expected = {
        table: {
            "family": spec["family"],
            "attributes": spec["attributes"],
            "splits": max(spec["presplit_regions"] - 1, 0),
        }
        for table, spec in _json().items()
        if table in hbase_tables.TABLES
    }
    assert _script() == expected


@pytest.mark.hbase
def test_the_tables_the_code_creates_are_those_of_the_json(
    hbase_api: str, new_hbase_url: str
) -> None:
    """Each gateway creates what it can express of the JSON: Thrift2 all of it, Thrift1
    the family, VERSIONS, COMPRESSION, BLOCKCACHE and its bloom filter. A new index
    over Thrift2 has the bucket layout, whose index table is ``index_buckets``."""
    with open_store(new_hbase_url) as store:
        assert isinstance(store, HBaseStore)
        names = {
            table: name.decode() if isinstance(name, bytes) else name
            for table, name in store.tables.items()
        }
        buckets = store.layout == "buckets"
    assert buckets == (hbase_api == "thrift2")
    assert set(names) == set(hbase_tables.TABLES)
    described = _thrift2_tables(names) if hbase_api == "thrift2" else _thrift1_tables(names)
    for table in names:
        spec = _json()["index_buckets" if table == "index" and buckets else table]
        attributes = spec["attributes"]
        got = described[table]
        assert got["family"] == spec["family"]
        assert got["VERSIONS"] == attributes["VERSIONS"]
        assert got["COMPRESSION"] == attributes.get("COMPRESSION", "NONE")
        assert got["BLOCKCACHE"] == attributes.get("BLOCKCACHE", True)
        if hbase_api == "thrift1":
            assert got["BLOOMFILTER"] == spec["thrift1_bloomfilter"]
            continue
        assert got["BLOOMFILTER"] == attributes.get("BLOOMFILTER", "ROW")
        assert got["DATA_BLOCK_ENCODING"] == attributes.get("DATA_BLOCK_ENCODING", "NONE")
        assert got["CONFIGURATION"].items() >= attributes.get("CONFIGURATION", {}).items()
        assert got["regions"] == max(spec["presplit_regions"], 1)
        assert got["BLOCKSIZE"] == attributes.get("BLOCKSIZE", 65536)
        assert got["IN_MEMORY"] == attributes.get("IN_MEMORY", False)
        assert got["CACHE_DATA_ON_WRITE"] == attributes.get("CACHE_DATA_ON_WRITE", False)


def _thrift2_tables(names: dict[str, str]) -> dict[str, dict[str, Any]]:
    from simhash_hbase.store.hbase import thrift2 as hbase_thrift2

    idl = hbase_thrift2._IDL
    host, port = gateway_address("thrift2").rsplit(":", 1)
    client = hbase_thrift2.open_client(host, int(port), 30_000)
    enums = {
        "DATA_BLOCK_ENCODING": ("dataBlockEncoding", idl.TDataBlockEncoding),
        "BLOOMFILTER": ("bloomnFilterType", idl.TBloomFilterType),
        "COMPRESSION": ("compressionType", idl.TCompressionAlgorithm),
    }
    found = {}
    try:
        for table, name in names.items():
            desc = client.getTableDescriptor(idl.TTableName(qualifier=name.encode()))
            (column,) = desc.columns
            row = {
                key: _enum_name(enum, getattr(column, field))
                for key, (field, enum) in enums.items()
            }
            row.update(
                family=column.name.decode(),
                VERSIONS=column.maxVersions,
                BLOCKCACHE=column.blockCacheEnabled,
                CONFIGURATION=dict(column.configuration or {}),
                regions=len(client.getAllRegionLocations(name.encode())),
                BLOCKSIZE=column.blockSize,
                IN_MEMORY=bool(column.inMemory),
                CACHE_DATA_ON_WRITE=bool(column.cacheDataOnWrite),
            )
            found[table] = row
    finally:
        client.close()
    return found


def _enum_name(enum: Any, value: int) -> str:
    (name,) = [key for key in dir(enum) if not key.startswith("_") and getattr(enum, key) == value]
    return name


def _thrift1_tables(names: dict[str, str]) -> dict[str, dict[str, Any]]:
    import happybase

    host, port = gateway_address("thrift1").rsplit(":", 1)
    conn = happybase.Connection(host, int(port))
    try:
        found = {}
        for table, name in names.items():
            ((family, spec),) = conn.table(name).families().items()
            found[table] = {
                "family": family.decode().rstrip(":"),
                "VERSIONS": spec["max_versions"],
                "COMPRESSION": spec["compression"].decode(),
                "BLOCKCACHE": spec["block_cache_enabled"],
                "BLOOMFILTER": spec["bloom_filter_type"].decode(),
            }
        return found
    finally:
        conn.close()
