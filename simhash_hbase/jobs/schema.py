"""`shdb schema --index URL`: the hbase shell script of an existing HBase index's
tables as they are: its layout and scheme (from the manifest), its regions'
start keys (as the gateway locates them now) and its namespace."""

from __future__ import annotations

from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.census import ranges_of
from simhash_hbase.store.hbase.settings import BUCKETS, layout_of, parse_url
from simhash_hbase.store.hbase.tables import shell_script


def existing_schema(url: str) -> str:
    if not url.lower().startswith("hbase://"):
        raise InvalidIndexUrl(
            f"shdb schema --index {url}: HBase tables are described for an hbase:// index; "
            "an embedded index is a folder (shdb stats describes it)"
        )
    prefix = parse_url(url)["prefix"]
    with SimhashIndex.open(url, create=False, readonly=True) as index:
        manifest, scheme = index.manifest, index.scheme
        splits = {t: [start for start, _ in ranges_of(index, t)[1:]] for t in ("docs", "index")}
    buckets = layout_of(manifest) == BUCKETS
    regions = ", ".join(f"{t} {len(keys) + 1}" for t, keys in splits.items())
    notes = [f"as found at {url}: regions {regions}"]
    planned = manifest.get("hbase_plan")
    if planned:
        notes.append(f"created for {planned['expected_documents']:,} documents (shdb plan)")
    return shell_script(
        prefix,
        buckets=buckets,
        scheme=scheme.name,
        splits=lambda t: splits.get(t, []),
        notes=notes,
    )
