"""Copy an embedded index into a new folder in the compact layout (format 3).

Indexes written before the compact layout (format 1: one LMDB key per cell,
~1,270 bytes a document) keep opening and answering as they are; this job is
how one is moved to format 3 (~150-200 bytes a document): its meta records
(manifest, custom IDF tables, job state) are copied, then its documents are bulk
loaded, so the new file is written in order, every page full. The source is
opened read-only and left as it was.
"""

from __future__ import annotations

from pathlib import Path

from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.store import local_path
from simhash_hbase.store.embedded import EmbeddedStore


def migrate(source: str, target: str) -> int:
    """Copy the embedded index at ``source`` into the new folder ``target``; the
    documents copied."""
    src, dst = local_path(source), local_path(target)
    if src is None or dst is None:
        raise InvalidIndexUrl("migrate copies an embedded index to a folder: give two folders")
    if dst.exists() and any(Path(dst).iterdir()):
        raise InvalidIndexUrl(f"{dst} is not empty; migrate writes into a new or empty folder")
    with EmbeddedStore(src, create=False, readonly=True) as old:
        with EmbeddedStore(dst) as new:
            for name, value in old.iter_meta():
                new.put_meta(name, value)
        with SimhashIndex.open(str(dst), create=False) as index:
            return index.bulk_load(old.iter_docs())
