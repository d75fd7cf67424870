"""The store protocol: what the index needs from HBase and from the embedded store.

It is shaped by HBase's semantics: atomicity only per row, mutations in batches,
keys-only prefix scans, multi-gets. A batch flushes index cells before docs rows,
so a docs row (the commit record of a document) never exists without its cells;
or, where ``index_follows_docs`` (HBase's bucket layout), stale cells go before the
docs row changes and new ones come after it, so no cell disagrees with its row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from simhash_hbase.errors import StoreCorrupt
from simhash_hbase.layout import codec
from simhash_hbase.records import Document

#: One cell of the index table: (13-byte row key, document id qualifier).
IndexCell = tuple[bytes, str]


class CellBlock:
    """The index cells of many documents, without a tuple per cell: document i
    (id ``doc_ids[i]``) owns the row keys ``rows[i]`` of an (n, c) array of
    :data:`codec.ROWKEY_DTYPE`. A store may write it in bulk (the embedded store
    builds its keys in NumPy); iterating gives the cells, document by document."""

    def __init__(self, rows: np.ndarray, doc_ids: Sequence[str]) -> None:
        self.rows = rows
        self.doc_ids = doc_ids

    def __len__(self) -> int:
        return int(self.rows.size)

    def __iter__(self) -> Iterator[IndexCell]:
        rows = np.ascontiguousarray(self.rows).reshape(-1).view(f"V{codec.ROWKEY_BYTES}")
        per_doc = self.rows.shape[1] if self.rows.ndim == 2 else 0
        ids = (doc_id for doc_id in self.doc_ids for _ in range(per_doc))
        return zip(rows.tolist(), ids)


#: A range of a table's row keys: (start, inclusive; stop, exclusive); ``b""`` leaves
#: that end open.
KeyRange = tuple[bytes, bytes]
WHOLE: KeyRange = (b"", b"")


#: What a store's ``iter_docs`` is given for damaged rows, and what it yields.
OnCorrupt = Callable[[str, StoreCorrupt], None] | None
DocStream = Iterator[Document]


#: The index cells of documents (a store needs them to undo a lost claim).
CellsOf = Callable[[Sequence[Document]], Iterable[IndexCell]]


class StoreBatch(Protocol):
    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]: ...
    def claim_docs(
        self, intents: Mapping[str, Document | None], cells_of: CellsOf
    ) -> dict[str, Document]:
        """The held versions of the ids of ``intents`` (id -> the version this batch
        writes, None: a removal), whose docs rows this batch now owns: of concurrent
        writers of one id exactly one owns it at a time, and each replaces the
        version the one before it wrote, so the cells to delete are those of the
        versions returned. Called before the batch writes anything. (LMDB: a write
        transaction owns everything; HBase: a checkAndPut of each row's owner token,
        docs/SPEC.md "Writers".)"""
        ...

    def put_index(self, cells: Iterable[IndexCell]) -> None: ...
    def delete_index(self, cells: Iterable[IndexCell]) -> None: ...
    def put_docs(self, docs: Iterable[Document]) -> None: ...
    def delete_docs(self, doc_ids: Iterable[str]) -> None: ...


class Maintenance(Protocol):
    """The upkeep of an index's files: bulk loads, tier merges, warming. A store
    where one means nothing (HBase) still answers: :meth:`load` refuses clearly,
    :meth:`merge_fresh` and :meth:`warm` do nothing."""

    def load(self, blocks: Iterable[tuple[Sequence[CellBlock], Sequence[Document]]]) -> int:
        """Fill an empty index with the documents and cells of ``blocks`` (a
        backfill writing every page once); the documents loaded.
        :class:`InvalidInput` where the store has no bulk load."""
        ...

    def merge_fresh(self, on_part: Callable[[int, int, int], None] | None = None) -> int:
        """Merge the fresh tier into the main one now; the index cells moved (0
        without a fresh tier). ``on_part(done, parts, moved)`` after each commit."""
        ...

    def warm(self) -> int:
        """Map the index's file into this process now; the bytes mapped (0: none)."""
        ...


class Section(Protocol):
    """A held write section (:meth:`Store.write_section`)."""

    def kept(self) -> bool:
        """Whether the section is still its holder's alone: no other writer can have
        entered it since it was taken. Always on a folder (``flock``); on HBase, False
        once a holder stalled past its lease finds that another took it (docs/SPEC.md,
        "Concurrent writers": what a writer then does)."""
        ...


class Store(Maintenance, Protocol):
    url: str

    #: True when a batch commits all or nothing (LMDB); HBase is atomic per row only.
    atomic_batches: bool
    #: True when a retained index's store drops what outlives the retention by itself
    #: (HBase: the tables' TTL), so writes leave expiry to it (docs/lifecycle.md).
    expires_itself: bool

    @property
    def index_follows_docs(self) -> bool:
        """True when a batch writes a document's index cells after its docs row and
        deletes stale cells before it (HBase's bucket layout), so every cell a query
        reads agrees with its docs row: the caller puts docs before their cells."""
        ...

    def manifest_entries(self) -> dict[str, Any]:
        """Entries a new index's manifest gets from the store (its HBase layout)."""
        ...

    def adopt(self, manifest: dict[str, Any]) -> None:
        """Serve the index the way its manifest says (or refuse, clearly)."""
        ...

    def get_meta(self, name: str) -> dict[str, Any] | None:
        """A small JSON record of the meta table ("manifest", ingest checkpoints)."""
        ...

    def put_meta(self, name: str, value: dict[str, Any]) -> None: ...
    def put_meta_if_absent(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        """Write ``value`` only if ``name`` holds nothing, atomically (two processes
        creating one index agree on one manifest); returns what is held after."""
        ...

    def swap_meta(
        self, items: Sequence[tuple[str, dict[str, Any] | None, dict[str, Any]]]
    ) -> list[bool]:
        """For each (name, expected, value): write ``value`` only if ``name`` holds
        ``expected`` (None: nothing), atomically per name; whether each was written.
        A False may hide a write whose reply was lost (HBase): read it back."""
        ...

    def delete_meta(self, name: str) -> None: ...
    def write_section(self) -> AbstractContextManager[Section]:
        """Hold the critical section of a write that decides by lookups (an ingest
        batch's lookups and write, a check-and-add, a removal): one holder at a time
        among every writer of the index, threads and processes alike, so that a
        writer's lookups see every batch committed before its own (docs/SPEC.md,
        "Concurrent writers": every near-copy pair reported once, exactly one new).
        Embedded: a lock of the handle's threads and ``flock`` on the folder's
        ``shdb-write.lock``; HBase: a lock of the handle's threads and a lease row
        in meta (:class:`~simhash_hbase.store.lock.LeaseSection`)."""
        ...

    def run_lock(
        self, job: str, wait: float = 0.0, key: str = "index"
    ) -> AbstractContextManager[None]:
        """Hold the lock ``key`` of the index for one writing job till the block ends:
        an ingest run holds its checkpoint's (the digest of its input), so two runs of
        one input never share a checkpoint, while runs of other inputs write at once
        (the write section keeps their answers exact); ``index``, the default, is the
        whole index's (a Spark ingest). Another holder of ``key`` makes
        this wait up to ``wait`` s, then raise :class:`IndexBusy` naming its pid and
        start time. Readers never wait for it. Embedded: ``flock`` on
        ``shdb-run-KEY.lock`` (a killed holder leaves none); HBase: the lease row
        ``run-lock/KEY`` in meta (:class:`~simhash_hbase.store.lock.LeaseLock`: a
        killed holder's lease ends within a minute, at once for a run on its host)."""
        ...

    def batch(self) -> AbstractContextManager[StoreBatch]: ...
    def get_docs(self, doc_ids: Sequence[str]) -> dict[str, Document]: ...
    def doc_fingerprints(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """The fingerprint each held document's row holds: a query's confirming read,
        which needs nothing else of the row (no text or meta crosses the wire)."""
        ...

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[IndexCell]:
        """Every index cell whose row key starts with one of ``prefixes``."""
        ...

    def scan_prefixes_many(
        self, prefix_lists: Sequence[Sequence[bytes]], row_cap: int | None = None
    ) -> list[list[IndexCell]]:
        """:meth:`scan_prefixes` of each list. With ``row_cap``, each row key gives at
        most that many cells, those of the smallest ids (a hot row of 100,000 copies
        is read page by page only as far as a bounded query needs); a row that gives
        ``row_cap`` cells may hold more (:meth:`row_sizes`)."""
        ...

    def scan_documents(
        self, prefixes: Sequence[bytes], row_cap: int | None = None
    ) -> tuple[list[tuple[str, int]], int] | None:
        """One query's :meth:`scan_prefixes_many`, as the distinct documents its
        cells name ((id, fingerprint)) and how many cells that is: the one-query
        hot path without a tuple per cell. None: the store has no such path, or
        its answer would differ (a row the cap may cut); call the plain scan."""
        ...

    def row_sizes(self, rows: Sequence[bytes]) -> dict[bytes, int] | None:
        """How many cells each index row holds, where the store can count without
        reading them (None: it cannot, and a cut row's count is a lower bound)."""
        ...

    def iter_docs(
        self,
        on_corrupt: Callable[[str, StoreCorrupt], None] | None = None,
        key_range: KeyRange = WHOLE,
    ) -> Iterator[Document]:
        """Every document (whose docs key, the encoded id, is in ``key_range``, one of
        :meth:`key_ranges`: a store that has none is only given :data:`WHOLE`); a
        damaged row raises, or goes to ``on_corrupt(id, error)``."""
        ...

    def iter_index(self, key_range: KeyRange = WHOLE) -> Iterator[IndexCell]:
        """Every index cell (whose row key is in ``key_range``), in row key order."""
        ...

    def key_ranges(self, table: str) -> list[KeyRange] | None:
        """``table``'s keys (``docs`` or ``index``) cut into ranges that can be read
        apart and at once, in key order, covering every key: HBase's regions (each
        scanned on its own connection). None: the table is read in one pass only (the
        embedded store: its keys are not held in id or row-key order, so a range
        would be a filter over a whole pass)."""
        ...

    def stats(self, counts: bool = True) -> dict[str, Any]:
        """What the store holds; ``counts=False``: without the counts that take a
        scan (HBase's: None; `shdb stats` then counts region by region)."""
        ...

    def due(self, before: int, limit: int) -> list[str]:
        """The ids of at most ``limit`` documents whose time is before ``before`` (ms):
        the embedded store's oldest first from a retained index's time order (a seek;
        an index without one: none), HBase's from a scan of its docs."""
        ...

    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc: object) -> None: ...


def oldest_before(docs: Iterable[Document], before: int, limit: int | None = None) -> list[str]:
    """The ids of at most ``limit`` (None: all) of ``docs`` whose time is before
    ``before``, oldest first, ties by id (:meth:`Store.due` of a store without a time
    order; ``shdb remove --before``)."""
    aged = [(d.time, d.doc_id) for d in docs if d.time is not None and d.time < before]
    return [doc_id for _, doc_id in sorted(aged)[:limit]]
