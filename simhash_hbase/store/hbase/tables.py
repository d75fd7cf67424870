"""HBase table definitions, read from ``schema/hbase-tables.json`` (the one source;
the wheel carries that folder as ``simhash_hbase.schema``).

The Thrift2 gateway creates tables with all of it. Thrift1 (what happybase
speaks) can create a family with VERSIONS, BLOOMFILTER, COMPRESSION and
BLOCKCACHE only: no block encoding, no row-prefix bloom filter, no split
points. For gateways that speak only Thrift1, :func:`shell_script` writes the
``hbase shell`` script that creates the tables whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.layout.nets import first_band_flag
from simhash_hbase.layout.plan import docs_split_keys, index_split_keys, plan
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, SCHEMES, Scheme

TABLES = ("index", "docs", "meta")
#: The tables whose cells a retained index's TTL expires (per document; never meta,
#: which holds the manifest and the locks).
EXPIRING = ("index", "index_buckets", "docs")


@cache
def load() -> dict[str, Any]:
    raw = resources.files("simhash_hbase.schema").joinpath("hbase-tables.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(raw)
    return schema


def table_name(prefix: str, table: str) -> str:
    return f"{prefix}_{table}"


def family_spec(table: str, ttl: int | None = None) -> tuple[str, dict[str, Any]]:
    """The column family of ``table`` and its attributes, as the shell names them;
    ``ttl``: a retained index's retention in seconds (the per-document tables' TTL)."""
    spec = load()["tables"][table]
    attributes = dict(spec["attributes"])
    if ttl is not None and table in EXPIRING:
        attributes["TTL"] = ttl
    return str(spec["family"]), attributes


def thrift1_family_options(table: str, ttl: int | None = None) -> dict[str, Any]:
    """ColumnDescriptor fields for Thrift1 createTable."""
    spec = load()["tables"][table]
    attrs = family_spec(table, ttl)[1]
    return {
        "name": f"{spec['family']}:".encode(),
        "maxVersions": attrs["VERSIONS"],
        "compression": attrs.get("COMPRESSION", "NONE"),
        "bloomFilterType": spec["thrift1_bloomfilter"],
        "blockCacheEnabled": attrs.get("BLOCKCACHE", True),
        **({"timeToLive": attrs["TTL"]} if "TTL" in attrs else {}),
    }


def split_points(table: str) -> list[bytes]:
    """The schema's default splits: even over the index keys' first bytes (uniform by
    docs/SPEC.md's left alignment); none for docs and meta. :class:`Sizing` plans others."""
    return index_split_keys(presplit_regions(table)) if table.startswith("index") else []


def presplit_regions(table: str) -> int:
    return max(int(load()["tables"][table]["presplit_regions"]), 1)


@dataclass(frozen=True)
class Sizing:
    """The regions of a new index's tables: the schema's defaults, or `shdb plan`'s
    for ``expected`` documents (``hbase://...?expect=N``). The index table gets the
    plan's regions, at least the schema's 16 (writes spread from the first
    document; the Spark bulk load writes a partition a region); the docs table the
    plan's, split at the quantiles of ``docs_sample`` (ids are user strings: without
    a sample it starts as one region and HBase splits it as it grows); meta one."""

    expected: int | None = None
    docs_sample: tuple[bytes, ...] = ()
    #: The scheme the index rows are of (None: the one `shdb plan` recommends for
    #: ``expected``; a new index's tables exist before its manifest names one).
    scheme: str | None = None

    @classmethod
    def of(cls, expected: int | None, docs_sample: str | None, scheme: str | None = None) -> Sizing:
        """From the URL's ``expect`` and ``docs_sample`` (a file of ids, one a line)."""
        if docs_sample is None:
            return cls(expected, scheme=scheme)
        try:
            with open(docs_sample, encoding="utf-8") as lines:
                ids = tuple(line.rstrip("\r\n").encode() for line in lines if line.strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidIndexUrl(
                f"docs_sample={docs_sample}: cannot read it ({exc}); give a UTF-8 file of "
                "document ids, one a line"
            ) from None
        return cls(expected, ids, scheme)

    def regions(self) -> dict[str, int]:
        """Regions per table (index, docs, meta)."""
        if self.expected is None:
            return {t: presplit_regions(t) for t in TABLES}
        return planned_regions(self.expected, self.scheme)

    def splits(self, table: str) -> list[bytes]:
        """Split keys of ``table`` (``index`` for either layout's index table)."""
        regions = self.regions()[table]
        if table == "index":
            return index_split_keys(regions)
        return docs_split_keys(self.docs_sample, regions) if table == "docs" else []

    def manifest(self) -> dict[str, Any]:
        """What a new index's manifest records of it (nothing for the defaults)."""
        if self.expected is None:
            return {}
        return {"hbase_plan": {"expected_documents": self.expected, "regions": self.regions()}}


def planned_regions(documents: int, scheme: str | None = None) -> dict[str, int]:
    """The regions `shdb plan` gives ``documents`` documents from their text (k = 3)
    in ``scheme``, else in the scheme it recommends (or that of fewest candidates
    when none fits)."""
    plans, best = plan(documents, index_floor=presplit_regions("index"))
    chosen = next((p for p in plans if p.scheme == scheme), None) or best
    chosen = chosen or min(plans, key=lambda p: p.candidates_per_query)
    return {"index": chosen.index_regions, "docs": chosen.docs_regions, "meta": 1}


def _ruby(value: Any) -> str:
    if isinstance(value, bool):
        return "'true'" if value else "'false'"
    if isinstance(value, dict):
        inner = ", ".join(f"'{k}' => {_ruby(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, int):
        return str(value)
    return f"'{value}'"


def _split_literal(point: bytes) -> str:
    return '"' + "".join(f"\\x{b:02X}" for b in point) + '"'


def namespace_of(prefix: str) -> str | None:
    """The HBase namespace of a table prefix ``NS:NAME`` (None: the default one)."""
    return prefix.split(":", 1)[0] if ":" in prefix else None


def layout_notes(scheme: Scheme, buckets: bool, ttl: int | None = None) -> list[str]:
    """What the bytes of each table's rows mean (docs/SPEC.md), as script comments."""
    flags = (
        f"1..{scheme.rows_per_fingerprint}: scheme {scheme.name}'s combinations, "
        f"then LSH bands from {first_band_flag(scheme)}"
    )
    index = (
        "index (bucket layout, manifest format 2): row key = 5 bytes: a 4-byte segment field "
        f"(left-aligned) and a 1-byte flag ({flags}); a column d:<8-byte fingerprint><id> a cell"
        if buckets
        else "index (rows layout): row key = 13 bytes: a 4-byte segment field (left-aligned), a "
        f"1-byte flag ({flags}), the 8-byte fingerprint; a column d:<id> a document"
    )
    return [
        index,
        "docs: row key = the document id (UTF-8); f:h fingerprint, f:text, f:meta, f:s sketch, "
        "f:b band keys, f:c cluster, f:t time, f:o owner token",
        "meta: row key = a record name (manifest, idf/..., lock/..., run-lock, state/...); m:json",
        f"TTL {ttl} s on index and docs: a retained index (docs/lifecycle.md); VERSIONS => 1"
        if ttl is not None
        else "no TTL: a document lives until removed (shdb remove --before TIME); VERSIONS => 1",
    ]


def shell_script(
    prefix: str,
    ttl: int | None = None,
    *,
    buckets: bool = False,
    scheme: str = DEFAULT_SCHEME,
    splits: Callable[[str], Sequence[bytes]] = Sizing().splits,
    notes: Sequence[str] = (),
) -> str:
    """An ``hbase shell`` script creating all tables exactly as schema/ says: the
    index table of the rows layout (what a Thrift1-only gateway needs created) or,
    with ``buckets``, of the bucket layout; split at ``splits(table)``; ``ttl``: a
    retained index's (see :func:`family_spec`); as comments first, ``notes`` and
    what the rows of ``scheme`` hold."""
    lines = [f"# simhash-hbase tables for prefix '{prefix}' (generated by `shdb schema`)"]
    lines += [f"# {note}" for note in [*notes, *layout_notes(SCHEMES[scheme], buckets, ttl)]]
    namespace = namespace_of(prefix)
    if namespace is not None:
        lines.append(f"create_namespace '{namespace}'")
    for table in TABLES:
        schema = "index_buckets" if table == "index" and buckets else table
        spec = load()["tables"][schema]
        attrs = ", ".join(f"{k} => {_ruby(v)}" for k, v in family_spec(schema, ttl)[1].items())
        line = f"create '{table_name(prefix, table)}', {{NAME => '{spec['family']}', {attrs}}}"
        points = splits(table)
        if points:
            line += ", SPLITS => [" + ", ".join(_split_literal(p) for p in points) + "]"
        lines.append(line)
    return "\n".join(lines) + "\n"
