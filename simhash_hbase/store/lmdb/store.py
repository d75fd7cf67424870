"""The default store: LMDB on local disk, no server.

Why LMDB: a B+tree with byte-ordered keys (prefix scans are a cursor seek),
crash-safe copy-on-write commits, and many reader processes beside one writer
without corruption (writers queue on LMDB's own lock). Measured here on 2M keys,
Python loop included: LMDB ~49k queries/s, SQLite WITHOUT ROWID ~13k, RocksDB ~10k.

Layout: named databases ``index``, ``docs`` and ``meta`` hold the same logical
tables as HBase. An index cell is flattened to the key ``row key + doc id`` with
an empty value, as HBase's KeyValues are; a docs row is ``doc id -> columns``.

Every LMDB error leaves this module as a :class:`StoreError` naming the folder
(:meth:`EmbeddedStore._error` is the one place that translates them), and the
file is checked against its own header before LMDB maps it: a truncated file
would otherwise kill the process with SIGBUS on first access.
"""

from __future__ import annotations

import errno
import heapq
import os
import shutil
import struct
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

from simhash_hbase.errors import (
    IndexNotFound,
    InvalidIndexUrl,
    StoreClosed,
    StoreCorrupt,
    StoreError,
)
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.base import WHOLE, CellBlock, DocStream, IndexCell, KeyRange, OnCorrupt
from simhash_hbase.store.lmdb import free as lmdb_free
from simhash_hbase.store.lmdb import pages, times
from simhash_hbase.store.lmdb.cells import (
    ALL_TABLES,
    FORMAT,
    STATE,
    TABLES,
    TIMES,
    Helpers,
    Txn,
    new_state,
)
from simhash_hbase.store.lmdb.columns import (
    _REBUILD,
    _decode_id,
    _encode_id,
    fold_key,
    pack_columns,
    unpack_columns,
)
from simhash_hbase.store.lmdb.commit import CompactBatch
from simhash_hbase.store.lmdb.format1 import TABLES as FORMAT1_TABLES
from simhash_hbase.store.lmdb.format1 import Format1, Format1Batch
from simhash_hbase.store.lmdb.load import bulk_load
from simhash_hbase.store.lmdb.merge import OnMergePart, merge_fresh
from simhash_hbase.store.lmdb.tables import Tables
from simhash_hbase.store.lock import RunLock, RunLocks, WriteSection, is_lock_file

_MAP_SIZE = 1 << 40  # address space only; the file grows as data is written
#: Under an address-space limit (``ulimit -v``) the map is halved down to the file's
#: size plus this much room to write (_open_env).
_MAP_ROOM = 1 << 30
#: A read-only store maps the file's cached pages in the background from this
#: query on (pages.Populator): a one-shot query never pays for it, and a process
#: that asks more starts it at once (from the 16th, the first fifth of a 3 M
#: index's cold pass paid ~10 page faults a query; docs/embedded.md).
POPULATE_AFTER = 2
_DATA_FILE = pages.DATA_FILE
_LOCK_FILE = "lock.mdb"
_WIDE = 256  # a list of more prefixes than this is scanned without a Python loop per prefix

# LMDB's data file starts with two meta pages (mdb.c, MDB_meta after a 16-byte
# page header, 64-bit little-endian builds). The newest by txn id is current.
_MAGIC = 0xBEEFC0DE
_DATA_VERSION = 1
_META_HEAD = struct.Struct("<II8xQI")  # at 16: magic, version, (address), map size, page size
_FREE_ROOT = struct.Struct("<Q")  # at 80: the free list's root page (MDB_db's md_root)
_META_TAIL = struct.Struct("<QQ")  # at 136: last page number in use, txn id
_META_END = 152
# LMDB reports a short write (what a full disk gives) as EIO.
_FULL_DISK = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO}
_NO_WRITE = {errno.EACCES, errno.EPERM, errno.EROFS}
_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.VersionMismatchError,
    lmdb.IncompatibleError,
    lmdb.BadChecksumError,
)
_LOAD_SCRATCH = ".load-"  # a bulk load's scratch folders in the index folder


class _Meta(NamedTuple):
    page_size: int
    last_page: int
    txn_id: int
    free_root: int


def _capped(cells: list[IndexCell], row_cap: int | None) -> list[IndexCell]:
    """Each row's ``row_cap`` smallest ids (the contract of a capped scan)."""
    if row_cap is None or len(cells) <= row_cap:
        return cells
    if max(Counter(map(itemgetter(0), cells)).values()) <= row_cap:  # most often: none is cut
        return cells
    rows: dict[bytes, list[IndexCell]] = {}
    for cell in cells:
        rows.setdefault(cell[0], []).append(cell)
    return [c for row in rows.values() for c in heapq.nsmallest(row_cap, row, key=_id_bytes)]


def _id_bytes(cell: IndexCell) -> bytes:
    return _encode_id(cell[1])


def _errno_of(exc: BaseException) -> int | None:
    """The OS error behind an LMDB error (lmdb reports them as text)."""
    text = str(exc)
    for code in _FULL_DISK | _NO_WRITE:
        if text.endswith(os.strerror(code)):
            return code
    return None


class EmbeddedStore:
    """LMDB environment at ``path`` (a directory holding data.mdb and lock.mdb).

    ``readonly`` opens without taking write locks or creating anything, so an
    index in a folder this user cannot write can still be read.
    """

    atomic_batches = True
    index_follows_docs = False  # nothing is seen before the transaction commits
    expires_itself = False  # a retention's expiry: due() then the index removes them

    def manifest_entries(self) -> dict[str, Any]:
        """Nothing: the file records its own format (meta row ``store/embedded``)."""
        return {}

    def adopt(self, manifest: dict[str, Any]) -> None:
        """A retained index keeps its time order (times.py; format 1, always older, none)."""
        if codec.RETAIN in manifest and self._compact and not self._env.flags()["readonly"]:
            self._compact.keep_times()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        readonly: bool = False,
        format: int = FORMAT,
    ) -> None:
        self.path = Path(path)
        self.url = str(self.path)
        self._closed = False
        self.map_size = _MAP_SIZE  # smaller under an address-space limit (_open_env)
        self._reads: list[None] = []  # one item a read under way (see _reading)
        # counted up to POPULATE_AFTER; a writer starts there (its batches map what they touch)
        self._queries = 0 if readonly else POPULATE_AFTER
        self._populator: pages.Populator | None = None
        self._starting = threading.Lock()
        self._compact: Tables | None = None  # formats 2 to 4
        self._tables: Tables | Format1  # the file's format's (set by _open_tables)
        self._format1: Format1  # format 1 only
        self._section = WriteSection(self.path)
        self._run = RunLocks(lambda key: RunLock(self.path, key))
        if format not in (1, FORMAT):
            raise ValueError(f"the embedded store has formats 1 and {FORMAT}")
        created = self._prepare(create and not readonly)
        try:
            self._env = self._open_env(readonly)
            try:
                self._open_tables(readonly, format)
            except BaseException:
                self._env.close()
                raise
        except lmdb.Error as exc:
            self._remove(created)
            raise self._error(exc, "open") from exc
        except BaseException:
            self._remove(created)
            raise
        self._max_key = self._env.max_key_size()

    # -- opening --------------------------------------------------------------
    def _prepare(self, create: bool) -> list[Path]:
        """Check the folder before LMDB touches it; the paths a creation will make."""
        data, lock = self.path / _DATA_FILE, self.path / _LOCK_FILE
        try:
            if self.path.exists() and not self.path.is_dir():
                raise InvalidIndexUrl(f"{self.path} is a file, not an index directory")
            if data.is_dir():  # LMDB's own error would be "Is a directory", at open
                raise StoreCorrupt(
                    f"{data} is a folder, not an LMDB file: the index's data file was "
                    f"replaced or never written; {_REBUILD}"
                )
            if data.exists() and self._committed(data):
                return []
            if not create:
                raise IndexNotFound(self.url)
            # lock.mdb and an empty data.mdb are what a failed creation can leave.
            if self.path.exists() and any(
                p.name not in (_DATA_FILE, _LOCK_FILE) and not is_lock_file(p.name)
                for p in self.path.iterdir()
            ):
                raise InvalidIndexUrl(
                    f"{self.path} is a non-empty directory that is not an shdb index; "
                    "give a new or empty directory"
                )
            created = [p for p in (data, lock) if not p.exists()]
            if not self.path.exists():
                self.path.mkdir(parents=True)
                created.append(self.path)
        except OSError as exc:
            raise StoreError(f"cannot create the index folder {self.path}: {exc.strerror}") from exc
        return created

    def _committed(self, data: Path) -> bool:
        """True if data.mdb holds committed data, after checking it against its header.

        LMDB maps the file at the size its header claims; pages beyond a truncated
        end raise SIGBUS when touched, so a short file must be refused here. The
        header is read before the size: a commit writes its pages, then the header.
        A file may end before the header's last page where those pages are free
        (:func:`lmdb_free.tail_is_free`): that is not a truncation.
        """
        with data.open("rb") as f:
            first = self._read_meta(data, f.read(_META_END))
            if first is None:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return False  # a creation that failed before LMDB wrote anything
                raise StoreCorrupt(f"{data} is truncated or not an LMDB file ({size} bytes)")
            f.seek(first.page_size)
            second = self._read_meta(data, f.read(_META_END))
            current = max((first, second) if second else (first,), key=lambda m: m.txn_id)
            size = os.fstat(f.fileno()).st_size
            needed = (current.last_page + 1) * current.page_size
            if size < needed and not lmdb_free.tail_is_free(
                f, current.page_size, current.free_root, current.last_page, size
            ):
                raise StoreCorrupt(
                    f"{data} is truncated: it has {size} bytes, its header says at least "
                    f"{needed}; {_REBUILD}"
                )
        return current.txn_id > 0

    @staticmethod
    def _read_meta(data: Path, raw: bytes) -> _Meta | None:
        """One meta page of the header; None if the file ends before it."""
        if len(raw) < _META_END:
            return None
        magic, version, _map_size, page_size = _META_HEAD.unpack_from(raw, 16)
        if magic != _MAGIC:
            raise StoreCorrupt(
                f"{data} is not an LMDB data file (or was written on another kind of machine)"
            )
        if version != _DATA_VERSION or page_size & (page_size - 1) or not 512 <= page_size <= 65536:
            raise StoreCorrupt(
                f"{data} has an LMDB header this version cannot read "
                f"(format {version}, page size {page_size}); {_REBUILD}"
            )
        last_page, txn_id = _META_TAIL.unpack_from(raw, 136)
        return _Meta(page_size, last_page, txn_id, _FREE_ROOT.unpack_from(raw, 80)[0])

    def _open_env(self, readonly: bool) -> lmdb.Environment:
        """The environment at the largest map the process may reserve: 1 TiB, or
        halved down to the file plus :data:`_MAP_ROOM` under ``ulimit -v``."""
        data = self.path / _DATA_FILE
        floor = (data.stat().st_size if data.exists() else 0) + _MAP_ROOM
        self.map_size = _MAP_SIZE
        while True:
            try:
                return self._open_mapped(readonly)
            except lmdb.MemoryError as exc:
                if self.map_size // 2 < floor:
                    raise StoreError(
                        f"cannot map the embedded index at {self.path}: the process may not "
                        f"reserve {floor} bytes of address space ({exc}); raise the limit "
                        "(ulimit -v, or the memory limit of the container or service)"
                    ) from exc
                self.map_size //= 2

    def _open_mapped(self, readonly: bool) -> lmdb.Environment:
        def open_(lock: bool) -> lmdb.Environment:
            return lmdb.open(
                str(self.path),
                map_size=self.map_size,
                max_dbs=len(ALL_TABLES) + 1,  # and TIMES
                create=not readonly,
                readonly=readonly,
                lock=lock,
                readahead=False,
                # One fsync per commit instead of two: a system crash may undo
                # the last commit, never corrupt the file (LMDB's MDB_NOMETASYNC).
                metasync=False,
            )

        try:
            env = open_(lock=True)
        except lmdb.ReadonlyError:
            if not readonly:
                raise
            # A folder we may not write (read-only media, another user's index):
            # LMDB cannot open its lock file, so read without locking.
            return open_(lock=False)
        env.reader_check()  # frees reader slots of killed processes
        return env

    def _open_tables(self, readonly: bool, format: int) -> None:
        """Open the tables of the file's format (a new index: ``format``); refuse,
        untouched, an LMDB file that is not ours."""
        with self._env.begin() as txn:
            names = {bytes(key) for key, _ in txn.cursor()}
        if names - {*ALL_TABLES, TIMES}:
            shown = ", ".join(sorted(n.decode("utf-8", "replace") for n in names)[:8])
            raise StoreCorrupt(
                f"{self.path} holds an LMDB database that is not an shdb index "
                f"(its tables: {shown}); it was left untouched: give a new or empty directory"
            )
        with self._env.begin() as txn:
            entries = {
                name: txn.stat(self._env.open_db(name, txn=txn, create=False))["entries"]
                for name in names
            }
        if not entries.get(b"meta") and (entries.get(b"index") or entries.get(b"docs")):
            raise StoreCorrupt(
                f"{self.path} holds LMDB tables named like shdb's but no index manifest; "
                "it was left untouched: give a new or empty directory"
            )
        if b"names" in names or (format == FORMAT and names <= {b"meta"}):
            self._open_compact(names, readonly)
            return
        if names != set(FORMAT1_TABLES):
            if readonly:
                raise IndexNotFound(self.url)  # its creation never completed
            with self._env.begin(write=True) as txn:  # all tables in one commit
                self._index, self._docs, self._meta = (
                    self._env.open_db(name, txn=txn) for name in FORMAT1_TABLES
                )
        else:
            self._index, self._docs, self._meta = (
                self._env.open_db(name, create=False) for name in FORMAT1_TABLES
            )
        self._tables = self._format1 = Format1(
            self.path, self._env.max_key_size(), self._corrupt_row, self._index, self._docs
        )

    def _open_compact(self, names: set[bytes], readonly: bool) -> None:
        """Formats 2 to 4 (tables.py); a new index records its format in
        meta; a format 2 or 3 file opened for writing becomes format 4 in place
        (the tables it lacks are added empty: fresh tier, hot rows, filters; each
        tier's filter is made in one pass; no cell moves)."""
        create = not names >= set(TABLES)
        if create and readonly:
            raise IndexNotFound(self.url)
        upgrade = create or (not readonly and not names >= set(ALL_TABLES))
        max_key = self._env.max_key_size()
        helpers = Helpers(
            path=self.path,
            max_key=max_key,
            fold=lambda raw: fold_key(raw, max_key)[0],
            pack_columns=pack_columns,
            unpack_columns=unpack_columns,
            corrupt_row=self._corrupt_row,
            rebuild=_REBUILD,
        )
        if not create:
            self._check_format()
        if upgrade:
            with self._env.begin(write=True) as txn:
                handles = Tables.open(self._env, txn)
                if create:
                    state = codec.encode_json(new_state())
                    txn.put(STATE.encode(), state, db=handles[b"meta"])
                self._tables = self._compact = Tables(self._env, handles, helpers)
                self._compact.upgrade(txn)
        else:
            handles = Tables.open(self._env)
            self._tables = self._compact = Tables(self._env, handles, helpers)
            if readonly:  # a reader refuses a bulk load cut short; a writer may load again
                with self._env.begin() as txn:
                    self._compact.state(txn)
        self._index, self._docs, self._meta = handles[b"index"], handles[b"docs"], handles[b"meta"]

    def _check_format(self) -> None:
        """Refuse, before any write, a record of a store format this shdb cannot
        read (a newer shdb's, or a hand edit)."""
        with self._env.begin() as txn:
            meta = self._env.open_db(b"meta", txn=txn, create=False)
            raw = txn.get(STATE.encode(), db=meta)
        state = None if raw is None else codec.decode_json(raw)
        found = state.get("format") if isinstance(state, dict) else state
        if type(found) is int and 2 <= found <= FORMAT:
            return
        why, fix = (f"its record {STATE!r} has no known store format (found {found!r})", _REBUILD)
        if type(found) is int and found > FORMAT:
            why = f"written by a newer shdb (store format {found}; this shdb reads up to {FORMAT})"
            fix = "upgrade shdb"
        raise StoreCorrupt(f"the embedded index at {self.path}: {why}; nothing was written: {fix}")

    @staticmethod
    def _remove(created: list[Path]) -> None:
        """Undo a failed creation, so that it cannot block the next try."""
        for path in created:
            with suppress(OSError):  # a courtesy: what stays is a valid leftover
                path.rmdir() if path.is_dir() else path.unlink()

    # -- errors ---------------------------------------------------------------
    def _error(self, exc: lmdb.Error, action: str) -> StoreError:
        """The one translation of LMDB errors: what failed, where, and what to do."""
        where = f"the embedded index at {self.path}"
        if self._closed:
            return StoreClosed(f"{where} is closed; open it again to {action} it")
        if isinstance(exc, _CORRUPT):
            return StoreCorrupt(f"{where} is damaged ({exc}); {_REBUILD}")
        if isinstance(exc, lmdb.MapFullError):
            limited = "" if self.map_size == _MAP_SIZE else " (halved under ulimit -v: raise it)"
            return StoreError(f"{where} reached LMDB's map size of {self.map_size}{limited}: {exc}")
        if isinstance(exc, lmdb.ReadersFullError):
            return StoreError(f"too many processes have {where} open at once: {exc}")
        code = _errno_of(exc)
        if code in _FULL_DISK:
            return StoreError(
                f"cannot {action} {where}: the disk is full or failing ({os.strerror(code)}); "
                "free space and write again: what was committed is kept"
            )
        if isinstance(exc, lmdb.ReadonlyError) or code in _NO_WRITE:
            return StoreError(
                f"cannot {action} {where}: the folder or its files are read-only for this "
                f"user ({exc}); reading it still works"
            )
        return StoreError(f"LMDB failed to {action} {where}: {exc}")

    def _corrupt_row(self, exc: StoreError) -> StoreCorrupt:
        return StoreCorrupt(
            f"{exc}, in the embedded index at {self.path}; verifying it with repair "
            "removes the row and its cells"
        )

    # -- protocol -------------------------------------------------------------
    def get_meta(self, name: str) -> dict[str, Any] | None:
        try:
            with self._reading(db=self._meta) as txn:
                raw = txn.get(name.encode())
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc
        return None if raw is None else codec.decode_json(raw)

    def put_meta(self, name: str, value: dict[str, Any]) -> None:
        try:
            with self._env.begin(write=True, db=self._meta) as txn:
                txn.put(name.encode(), codec.encode_json(value))
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc

    def delete_meta(self, name: str) -> None:
        try:
            with self._env.begin(write=True, db=self._meta) as txn:
                txn.delete(name.encode())
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc

    def iter_meta(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every meta record (name, value) but the store's own (a copy takes these)."""
        try:
            with self._env.begin(db=self._meta) as txn:
                for key, value in txn.cursor():
                    name = bytes(key).decode("utf-8", "replace")
                    if name != STATE:
                        yield name, codec.decode_json(bytes(value))
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def put_meta_if_absent(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        try:
            with self._env.begin(write=True, db=self._meta) as txn:  # one writer at a time
                raw = txn.get(name.encode())
                if raw is None:
                    txn.put(name.encode(), codec.encode_json(value))
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc
        return value if raw is None else codec.decode_json(raw)

    def swap_meta(
        self, items: Sequence[tuple[str, dict[str, Any] | None, dict[str, Any]]]
    ) -> list[bool]:
        """All in one write transaction, which no other writer interleaves with."""
        done = []
        try:
            with self._env.begin(write=True, db=self._meta) as txn:
                for name, old, new in items:
                    raw = txn.get(name.encode())
                    ok = (None if raw is None else codec.decode_json(raw)) == old
                    if ok:
                        txn.put(name.encode(), codec.encode_json(new))
                    done.append(ok)
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc
        return done

    @property
    def format(self) -> int:
        """The file's layout: 1 (a key per cell), 2 (compact, tables.py), 3
        (compact with a fresh tier) or 4 (3 with the tiers' prefix filters)."""
        if self._compact is None:
            return 1
        if self._compact.tier() is None:
            return 2
        return 3 if self._compact.kept is None else FORMAT

    def write_section(self) -> AbstractContextManager[WriteSection]:
        return self._section.held()

    def run_lock(
        self, job: str, wait: float = 0.0, key: str = "index"
    ) -> AbstractContextManager[None]:
        return self._run.held(job, wait, key)

    @contextmanager
    def batch(self) -> Iterator[Format1Batch | CompactBatch]:
        try:
            if self._compact is not None:
                batch = CompactBatch(self._compact)
                yield batch
                batch.commit()
                return
            with self._env.begin(write=True) as txn:
                yield Format1Batch(self._format1, txn)
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc

    def warm(self) -> int:
        """Map every page of the file into this process now; the bytes mapped (0
        where the OS does not say where the file is mapped: Linux only).

        LMDB reads through mmap, and a process's first touch of each page costs a
        page fault (and a disk read where the page is not in the page cache): a
        reader that just opened a big index pays them on its first thousands of
        queries (docs/embedded.md, "Warm readers"). The file is first read in
        order (the page cache filled at the disk's sequential speed: faulted in one
        by one, the pages of a file not in the cache came at ~5 MB/s here), then
        Linux 5.14+ maps them all in one ``madvise(MADV_POPULATE_READ)``; before
        it, one byte of each page is read.
        """
        start = pages.mapped_at(self.path / _DATA_FILE)
        if start is None:
            return 0
        with self._starting:
            self._queries = POPULATE_AFTER  # mapped here: no background pass
            if self._populator is not None:
                self._populator.stop()
        size = self._mapped_size()
        with open(self.path / _DATA_FILE, "rb", buffering=0) as data:
            chunk = bytearray(1 << 20)
            while data.readinto(chunk):
                pass
        if not pages.populate(start, size):
            pages.touch(start, size)
        if self._compact is not None and self._compact.kept is None:  # no persisted filters
            try:
                with self._reading() as txn:
                    self._compact.filter = self._compact.filters(txn)
            except lmdb.Error as exc:
                raise self._error(exc, "read") from exc
        return size

    def _mapped_size(self) -> int:
        """The bytes of the file in use (LMDB's map reaches past its end)."""
        return int((self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"])

    def _counted(self) -> None:
        """Count a query; at the :data:`POPULATE_AFTER`-th of a read-only store, map the file's
        cached pages in the background (a writer's file changes under it, its batches map)."""
        self._queries += 1
        if self._queries < POPULATE_AFTER:
            return
        with self._starting:  # threads may share a store
            if self._populator is not None or self._closed:
                return
            start = pages.mapped_at(self.path / _DATA_FILE)
            if start is not None:
                self._populator = pages.Populator(start, self._mapped_size())

    def merge_fresh(self, on_part: OnMergePart | None = None) -> int:
        """Merge the fresh tier into the index now (format 3; see
        :func:`.merge.merge_fresh`): the cells moved, 0 in other formats."""
        if self._compact is None or self._compact.fresh is None:
            return 0
        try:
            return merge_fresh(self._compact, force=True, on_part=on_part)
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc

    def load(self, blocks: Iterable[tuple[Sequence[CellBlock], Sequence[Document]]]) -> int:
        """Bulk load an empty index (a backfill): see :func:`.load.bulk_load`.
        Scratch files go in a folder inside the index, removed at the end."""
        if self._compact is None:
            raise StoreError(
                f"the embedded index at {self.path} is in format 1, which has no bulk load; "
                "load into a new folder (docs/embedded.md, migration)"
            )
        for stale in self.path.glob(f"{_LOAD_SCRATCH}*"):  # of a load that was killed
            shutil.rmtree(stale, ignore_errors=True)
        try:
            with tempfile.TemporaryDirectory(prefix=_LOAD_SCRATCH, dir=self.path) as work:
                return bulk_load(self._compact, blocks, Path(work))
        except lmdb.Error as exc:
            raise self._error(exc, "write to") from exc
        except OSError as exc:
            raise StoreError(f"cannot bulk load {self.path}: {exc}") from exc

    def due(self, before: int, limit: int) -> list[str]:
        """From the time order (times.py); none in an index without one."""
        try:
            with self._reading() as txn:
                return times.due(self._compact, txn, before, limit) if self._compact else []
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def doc_fingerprints(self, doc_ids: Sequence[str]) -> dict[str, int]:
        return {doc_id: doc.fingerprint for doc_id, doc in self.get_docs(doc_ids).items()}

    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        try:
            with self._reading() as txn:
                return self._tables.get_docs(txn, doc_ids)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[IndexCell]:
        return self.scan_prefixes_many([prefixes])[0]

    def scan_prefixes_many(
        self, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        # Hot path: one read transaction and one cursor for all scans; most
        # prefixes match nothing, so the common case is one seek per prefix.
        # Prefixes given in key order (the index sorts a batch's) make each
        # seek descend through pages the one before has just read.
        if self._queries < POPULATE_AFTER:
            self._counted()
        try:
            with self._reading(db=self._index) as txn:
                if self._compact is not None:
                    return self._compact_scan(txn, prefix_lists, row_cap)
                return self._format1.scan(txn, prefix_lists, row_cap)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def scan_documents(
        self, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """One query's hot path in formats 2 and 3 (:meth:`.tables.Tables.scan_documents`);
        None in format 1 or where the plain scan is needed."""
        if self._compact is None:
            return None
        if self._queries < POPULATE_AFTER:
            self._counted()
        self._reads.append(None)  # inline: the hot path pays no context manager
        try:
            if self._closed:
                raise self._error(lmdb.Error("closed"), "read")
            with self._env.begin() as txn:
                return self._compact.scan_documents(txn, prefixes, row_cap)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc
        finally:
            self._reads.pop()

    def _compact_scan(
        self, txn: lmdb.Transaction, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None
    ) -> list[list[IndexCell]]:
        """Format 2 buckets are not in id order: a capped scan reads each distinct
        prefix of all the lists once (many lookups of one batch share a hot row),
        cuts each row to its ``row_cap`` smallest ids, then hands each list its own."""
        assert self._compact is not None
        if len(prefix_lists) == 1 and len(prefix_lists[0]) > _WIDE:
            wide = self._compact.scan_wide(txn, prefix_lists[0], row_cap)
            return [wide if row_cap is None else _capped(wide, row_cap)]
        if row_cap is None or len(prefix_lists) <= 1:
            found = self._compact.scan(txn, prefix_lists, row_cap)
            return found if row_cap is None else [_capped(c, row_cap) for c in found]
        distinct = list(dict.fromkeys(p for prefixes in prefix_lists for p in prefixes))
        (cells,) = self._compact.scan(txn, [distinct], row_cap)
        by_prefix: dict[bytes, list[IndexCell]] = {}
        for cell in _capped(cells, row_cap):
            by_prefix.setdefault(cell[0][: codec.PREFIX_BYTES], []).append(cell)
        return [[c for p in prefixes for c in by_prefix.get(p, ())] for prefixes in prefix_lists]

    def row_sizes(self, rows: Sequence[bytes]) -> dict[bytes, int]:
        """Cells per index row, by walking its keys without decoding them (a row of
        100,000 copies: ~10 ms, against ~0.3 s to read and decode its cells)."""
        try:
            with self._reading(db=self._index) as txn:
                if self._compact is not None:
                    return {row: self._compact.row_size(txn, row) for row in rows}
                return self._format1.row_sizes(txn, rows)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def iter_docs(self, on_corrupt: OnCorrupt = None, key_range: KeyRange = WHOLE) -> DocStream:
        """Every document; a damaged row raises, or goes to ``on_corrupt(id, error)``."""
        try:
            with self._env.begin(db=self._docs) as txn:
                for key, doc in self._doc_items_of(txn):
                    if isinstance(doc, StoreCorrupt):
                        if on_corrupt is None:
                            raise doc
                        on_corrupt(_decode_id(key), doc)
                        continue
                    yield doc
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def _doc_items_of(self, txn: Txn) -> Iterator[tuple[bytes, Document | StoreCorrupt]]:
        yield from self._tables.iter_docs(txn)

    def iter_index(self, key_range: KeyRange = WHOLE) -> Iterator[IndexCell]:
        try:
            with self._env.begin(db=self._index) as txn:
                yield from self._tables.iter_index(txn)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc

    def key_ranges(self, table: str) -> None:  # read whole: so only ever given WHOLE above
        return None  # its keys are folded, not in id or row-key order

    def stats(self, counts: bool = True) -> dict[str, Any]:  # counted as written
        try:
            with self._reading() as txn:
                fresh = None
                docs, cells = self._tables.counts(txn)
                if self._compact is not None and self._compact.tier(txn) is not None:
                    fresh = self._compact.state(txn).get("fresh", 0)
        except lmdb.Error as exc:
            raise self._error(exc, "read") from exc
        return {
            "store": "embedded (LMDB)",
            "format": self.format,
            "path": str(self.path),
            "documents": docs,
            "index_cells": cells,
            # format 3: cells in the fresh tier, merged by ingest or `shdb compact`
            **({} if fresh is None else {"fresh_cells": fresh}),
            "disk_bytes": (self.path / _DATA_FILE).stat().st_size,
        }

    @contextmanager
    def _reading(self, **kwargs: Any) -> Iterator[Any]:  # an lmdb.Transaction
        """A read transaction that :meth:`close` waits for: LMDB reads the map with
        the GIL released, and a map unmapped under them crashes the process. Not for
        generators: one left unfinished would hold close() for good."""
        self._reads.append(None)  # a list's append and pop are atomic under the GIL
        try:
            if self._closed:
                raise self._error(lmdb.Error("closed"), "read")
            with self._env.begin(**kwargs) as txn:
                yield txn
        finally:
            self._reads.pop()

    def close(self) -> None:
        """Close; reads under way in other threads finish first, later ones get
        :class:`StoreClosed` (threads may share a store)."""
        with self._starting:
            self._closed = True  # before the count is read: a read counted after sees it
            if self._populator is not None:
                self._populator.stop()  # before the file is unmapped
        while self._reads:
            time.sleep(0.001)
        self._env.close()
        self._section.close()
        self._run.close()

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
