"""Section 5: bytes per document on disk, per store and scheme.

Embedded: data.mdb's size over the documents (taken at each N of section 2).
HBase, on the tables section 2 built, in three states:

1. flushed: memstores flushed to HFiles (Admin.flush, as a clean stop does);
2. major-compacted: one HFile per store;
3. schema settings: the data block encoding and bloom filters schema/hbase-tables.json
   intends (FAST_DIFF; a 5-byte row-prefix bloom on the index), which Thrift1 cannot
   set; the families are altered and major-compacted again, so every HFile is
   rewritten with them. Section 2 then queries these tables once more.

All three go through HBaseAdminTool.java (the Java Admin API on the same jars):
Thrift1 cannot set an encoding, and its majorCompact runs a minor compaction in
HBase 2.6.1 (see that file), which leaves a single flushed HFile untouched.
"""

from __future__ import annotations

import time
from typing import Any

from .common import log

_TABLES = ("index", "docs")
STATES = ("flushed", "major_compacted", "schema_compacted")


def _tables(prefixes: dict[str, str]) -> dict[str, str]:
    """'5x10/index' -> HBase table name, for each scheme and table."""
    return {
        f"{scheme}/{t}": f"{prefix}_{t}" for scheme, prefix in prefixes.items() for t in _TABLES
    }


def _schema(table: str) -> dict[str, Any]:
    from simhash_hbase.store import hbase_schema as schema

    return schema.load()["tables"][table]  # type: ignore[no-any-return]


def schema_spec(key: str, table: str) -> str:
    """TABLE:FAMILY:BLOOM[:PREFIX_LENGTH] as schema/hbase-tables.json intends it."""
    spec = _schema(key.split("/")[1])
    attrs = spec["attributes"]
    parts = [table, spec["family"], attrs.get("BLOOMFILTER", "ROW")]
    length = attrs.get("CONFIGURATION", {}).get("RowPrefixBloomFilter.prefix_length")
    return ":".join([*parts, length] if length else parts)


def _per_doc(sizes: dict[str, int], docs: int) -> dict[str, dict[str, float]]:
    return {key: {"bytes": b, "bytes_per_doc": b / docs} for key, b in sizes.items()}


def _compacted(hbase: Any, tables: dict[str, str], *admin_args: str) -> dict[str, int]:
    """Run an admin command that major-compacts; the live bytes once files settle."""
    since = time.time()
    hbase.admin(*admin_args)
    for table in tables.values():
        hbase.wait_compacted(table, since)
    return {key: hbase.live_bytes_after_major(t) for key, t in tables.items()}


def run_hbase(hbase: Any, prefixes: dict[str, str], docs: int) -> dict[str, Any]:
    tables = _tables(prefixes)
    log("hbase storage: flush ...")
    hbase.admin("flush", *tables.values())
    time.sleep(2)  # a flush is acknowledged before its file is renamed into place
    sizes = {"flushed": {key: hbase.table_bytes(t) for key, t in tables.items()}}
    log("hbase storage: major compaction ...")
    sizes["major_compacted"] = _compacted(hbase, tables, "compact", *tables.values())
    encoding = str(_schema("index")["attributes"]["DATA_BLOCK_ENCODING"])
    specs = [schema_spec(k, t) for k, t in tables.items()]
    log(f"hbase storage: {encoding} and the schema's bloom filters, major compaction ...")
    sizes["schema_compacted"] = _compacted(hbase, tables, "encode", encoding, *specs)
    out: dict[str, Any] = {state: _per_doc(sizes[state], docs) for state in STATES}
    out.update(docs=docs, encoding=encoding, schema_specs=specs)
    per_doc = [out[s]["5x10/index"]["bytes_per_doc"] for s in STATES]
    log("hbase 5x10 index B/doc: flushed {:.0f}, compacted {:.0f}, schema {:.0f}".format(*per_doc))
    return out


def embedded(query_results: dict[str, Any]) -> dict[str, Any]:
    """Bytes/doc of data.mdb at each N, from the query section's indexes."""
    return {
        scheme: [
            {"n": s["n"], "bytes": s["disk_bytes"], "bytes_per_doc": s["disk_bytes"] / s["n"]}
            for s in steps
        ]
        for scheme, steps in query_results["schemes"].items()
    }
