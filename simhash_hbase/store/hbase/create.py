"""Creating a new index's tables: its HBase namespace, then the tables of
``schema/hbase-tables.json``, split as :class:`~.tables.Sizing` plans.

Apart from :mod:`.store` so that what a new index's tables look like is read in
one place, beside `shdb schema`'s script of the same tables (:mod:`.tables`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simhash_hbase.errors import StoreError
from simhash_hbase.store.hbase.settings import BUCKETS
from simhash_hbase.store.hbase.tables import Sizing, namespace_of
from simhash_hbase.store.hbase.transport import Transport


def create_tables(
    transport: Transport,
    names: Mapping[str, bytes],
    missing: Sequence[str],
    *,
    prefix: str,
    layout: str,
    sizing: Sizing,
    url: str,
    ttl: int | None = None,
) -> None:
    """Create the ``missing`` tables (in the order given: meta last, its presence
    marks a complete index), and first their namespace when the prefix names one;
    ``ttl``: a retained index's (:func:`~.tables.family_spec`)."""
    namespace = namespace_of(prefix)
    if namespace is not None and missing:
        try:
            transport.create_namespace(namespace)
        except StoreError as exc:
            raise StoreError(
                f"index {url}: cannot create the HBase namespace {namespace!r} ({exc}). "
                f"Ask an HBase admin to run `create_namespace '{namespace}'` in the hbase shell "
                f"and grant you create rights in it (`grant 'USER', 'RWXC', '@{namespace}'`), "
                "or use a prefix without a namespace"
            ) from exc
    for table in missing:
        schema = "index_buckets" if table == "index" and layout == BUCKETS else table
        try:
            transport.create_table(names[table], schema, sizing.splits(table), ttl)
        except StoreError as exc:
            if "NamespaceNotFound" not in str(exc):
                raise
            raise StoreError(
                f"index {url}: the HBase namespace {namespace!r} does not exist, and a "
                f"{transport.api} gateway cannot create one: run `create_namespace "
                f"'{namespace}'` in the hbase shell (or give the Thrift2 gateway's port)"
            ) from exc
