"""`shdb migrate OLD NEW`: copy an index into the current format of its store.

Embedded: an index is copied into a new folder in the compact layout (format 4).
Indexes written before it (format 1: one LMDB key per cell, ~1,270 bytes a
document) keep opening and answering as they are; this job is how one is moved
to format 4 (~150-220 bytes a document): its meta records (manifest, custom IDF
tables, job state) are copied, then its documents are bulk loaded, so the new file
is written in order, every page full.

HBase: an index is copied into a new one (another prefix) in the layout the new
store gives a new index, the bucket layout over Thrift2 (docs/SPEC.md, "index"):
its manifest (with the target's format) and custom IDF table, then its documents,
written as ingest writes them. Job state (checkpoints, locks) is not copied.

The source is opened read-only and left as it was.
"""

from __future__ import annotations

import shutil
from itertools import islice
from pathlib import Path

from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.manifest import FORMAT_VERSION, MANIFEST
from simhash_hbase.store import local_path, open_store
from simhash_hbase.store.lmdb.store import EmbeddedStore

_HBASE_BATCH = 5_000  # documents per write batch of an HBase copy


def migrate(source: str, target: str) -> int:
    """Copy the index at ``source`` into the new index ``target`` of the same store
    kind (two folders, or two HBase URLs); the documents copied."""
    src, dst = local_path(source), local_path(target)
    if src is None and dst is None:
        return _migrate_hbase(source, target)
    if src is None or dst is None:
        raise InvalidIndexUrl(
            "migrate copies an embedded index to a folder, or an HBase index to a new "
            "HBase index: give two folders or two hbase:// URLs"
        )
    _check_folders(src, dst)
    made = not dst.exists()
    done = False
    try:
        with EmbeddedStore(src, create=False, readonly=True) as old:
            with EmbeddedStore(dst) as new:
                for name, value in old.iter_meta():
                    new.put_meta(name, value)
            with SimhashIndex.open(str(dst), create=False) as index:
                copied = index.bulk_load(old.iter_docs())
        done = True
        return copied
    finally:
        if not done:  # failed or interrupted: NEW goes back to what it was, so a re-run can go
            _empty(dst, made)


def _empty(folder: Path, remove: bool) -> None:
    """Remove what a copy left in ``folder`` (and ``folder`` itself if it made it)."""
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir() if folder.is_dir() else ():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _check_folders(src: Path, dst: Path) -> None:
    """NEW is a new or empty folder outside OLD (inside it, a copy would be a second
    LMDB file in OLD's folder, taken for OLD's own and copied by a backup of it)."""
    old, new = src.resolve(), dst.resolve()
    if new == old:
        raise InvalidIndexUrl(f"{dst} is the index to copy; give migrate a new folder")
    if old in new.parents:
        raise InvalidIndexUrl(f"{dst} is inside {src}; give migrate a folder outside it")
    if dst.exists() and any(Path(dst).iterdir()):
        raise InvalidIndexUrl(f"{dst} is not empty; migrate writes into a new or empty folder")


def _migrate_hbase(source: str, target: str) -> int:
    with SimhashIndex.open(source, create=False, readonly=True) as old:
        with open_store(source, create=False, readonly=True) as held, open_store(target) as new:
            if new.get_meta(MANIFEST) is not None:
                raise InvalidIndexUrl(f"{target} holds an index; migrate writes into a new one")
            fingerprint = old.manifest["fingerprint"]
            if fingerprint.get("idf") == "custom":  # the table travels with the index
                name = f"idf/{fingerprint['idf_digest']}"
                record = held.get_meta(name) or {"parts": 0}
                for i in range(int(record["parts"])):
                    new.put_meta(f"{name}/{i}", held.get_meta(f"{name}/{i}") or {})
                new.put_meta(name, record)
            store_made = ("hbase_index", "hbase_plan")  # the new store says its own
            manifest = {k: v for k, v in old.manifest.items() if k not in store_made}
            manifest["format_version"] = FORMAT_VERSION
            new.put_meta_if_absent(MANIFEST, manifest | new.manifest_entries())
        copied = 0
        docs = old.documents()
        with SimhashIndex.open(target, create=False) as index:
            while batch := list(islice(docs, _HBASE_BATCH)):
                index.add_documents(batch, checked=True)
                copied += len(batch)
        return copied
