"""The client API: a near-duplicate index over a private store.

with SimhashIndex.open("shdb-index") as index:
    index.add("doc-1", text)
    index.query(other_text, k=3)   # Matches: the 10 nearest Match(doc_id, fingerprint,
                                   # distance), and .total / .total_exact

Streaming jobs (files, checkpoints, skip/fail policies) are built on top of this
in :mod:`simhash_hbase.jobs.ingest`; nothing here knows about files or flags.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

import numpy as np

from simhash_hbase.errors import (
    BatchRefused,
    EmptyDocument,
    IndexNotFound,
    InvalidInput,
    InvalidQuery,
    ShdbError,
    StoreCorrupt,
    StoreError,
)
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams, Signature
from simhash_hbase.fingerprint.probes import bound, check_probes
from simhash_hbase.fingerprint.simhash import (
    Fingerprinter,
    FingerprintParams,
    idf_table,
    register_idf,
)
from simhash_hbase.index.lookup import batch_near, bucket_docs, judged, with_times
from simhash_hbase.index.manifest import (
    MANIFEST,
    Wanted,
    check_environment,
    check_lsh_environment,
    nets_of,
    new_manifest,
    read_manifest,
    settle,
    validate,
)
from simhash_hbase.layout import codec
from simhash_hbase.layout.nets import check_nets, first_band_flag
from simhash_hbase.layout.prepare import Preparer, error_for, prepare
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    BadRecord,
    Document,
    Lookup,
    Match,
    Matches,
    Record,
    check_limit,
    now_ms,
    parse_time,
)
from simhash_hbase.store import CellBlock, IndexCell, Store, open_store
from simhash_hbase.store.lock import fingerprint_locks
from simhash_hbase.text.extract import to_text

DEFAULT_K = 3
#: Ids a batch of :meth:`SimhashIndex.remove_many` (one multi-get, one write).
REMOVE_BATCH = 10_000
# How many times this process has forked: an index opened before a fork refuses
# to be used in the child (see SimhashIndex._store).
_FORKS = [0]
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))
BULK_BATCH = 500_000  # documents a bulk load reads and spills at a time
QUERY_BATCH = 1000  # texts fingerprinted and looked up together by query_many
_SCALAR_MAX = 4  # below this many fingerprints, plain Python beats NumPy
_SCALAR_CANDIDATES = 24  # and below this many candidates of one query (~20 breaks even)
_STATE = "state/"  # meta records of jobs (e.g. ingest checkpoints) live under this
_IDF = "idf/"  # custom IDF tables, by digest
_LOCK_WAIT_S = 60.0  # at most this long for a fingerprint locked elsewhere (HBase)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold CPython's cyclic collector during one batch. A batch makes millions of
    container objects (documents, tuples of cells, lookups) that all live until it
    ends, so the collector promotes them and walks them all, again and again: at
    10 M documents ~11 full collections a batch, 28 % of a plain ingest's CPU time
    and ~25 % of a streaming dedup's (docs/embedded.md). Reference counting frees
    them as usual; cycles made meanwhile are collected by the first collection after
    the batch (the collector's counts run on). A no-op where the collector is off
    (the caller's choice, or an enclosing batch's pause)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass
class QueryCost:
    """What the lookups of this index object cost so far: queries (a text, or a new
    document checked at insert), prefix scans (after deduplicating the prefixes of a
    query's probes) and the index cells those scans returned (candidates)."""

    queries: int = 0
    scans: int = 0
    candidates: int = 0


class SimhashIndex:
    """Pigeonhole SimHash index over a store (embedded LMDB or HBase)."""

    def __init__(
        self,
        store: Store,
        scheme: Scheme,
        manifest: dict[str, Any],
        params: FingerprintParams,
        lsh: MinHashParams | None = None,
    ) -> None:
        self._held = store
        self._forks = _FORKS[0]  # forks of this process so far: a child sees more
        self.created = False  # True when this open wrote the manifest
        self.scheme = scheme
        self.manifest = manifest
        self.params = params
        #: The LSH net's settings; None: the pigeonhole net only (``nets = "simhash"``).
        self.lsh = lsh
        self._fingerprinter: Fingerprinter | None = None
        self._minhasher: MinHasher | None = None
        self.cost = QueryCost()
        self._encode_prefixes = codec.prefix_encoder()  # the one-query hot path's
        self._nonce = os.urandom(8).hex()  # names this handle's fingerprint locks

    # -- opening ----------------------------------------------------------------
    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        create: bool = True,
        scheme: str | None = None,
        params: Wanted = None,
        readonly: bool = False,
        nets: str | None = None,
        warm: bool = False,
    ) -> SimhashIndex:
        """Open (or create) the index at ``url``.

        ``scheme`` and ``params`` (a :class:`FingerprintParams`, or a mapping of
        only the fields that matter to the caller) left out mean "what the index
        was built with"; given ones must equal that (:class:`ManifestMismatch`),
        or, for a new index, are its settings (validated before anything is
        written; the manifest is written only if no other process was first).
        ``nets``: ``"simhash"`` (the pigeonhole only) or ``"simhash+lsh"`` (the
        default of a new index; docs/SPEC.md, "Nets"). ``warm``: :meth:`warm` it
        (a long-lived reader of a big embedded index).
        """
        validate(scheme, params)  # every setting given is valid, before any write
        if nets is not None:
            check_nets(nets)
        create = create and not readonly  # readonly: creates nothing, no write locks
        store = open_store(url, create=create, readonly=readonly)
        try:
            manifest = read_manifest(store)
            created = manifest is None
            if manifest is None:
                if not create:
                    raise IndexNotFound(store.url)
                manifest = cls._create(store, scheme, params, nets)
            found_scheme, held = settle(manifest, store.url, scheme, params)
            store.adopt(manifest)
            index = cls(store, found_scheme, manifest, held, nets_of(manifest, store.url, nets))
            index.created = created
            if warm:
                index.warm()
            return index
        except BaseException:
            store.close()
            raise

    @staticmethod
    def _create(
        store: Store, scheme: str | None, params: Wanted, nets: str | None
    ) -> dict[str, Any]:
        manifest = new_manifest(scheme, params, nets) | store.manifest_entries()
        digest = FingerprintParams.from_manifest(manifest["fingerprint"]).idf
        if digest is not None:  # the table travels with the index: no later --idf
            parts = codec.encode_blob_parts(idf_table(digest).raw)
            for i, part in enumerate(parts):
                store.put_meta(f"{_IDF}{digest}/{i}", part)
            store.put_meta(f"{_IDF}{digest}", {"parts": len(parts)})
        return store.put_meta_if_absent(MANIFEST, manifest)

    @property
    def _store(self) -> Store:
        """The store, in the process that opened it only: LMDB environments and
        HBase connections cannot cross ``fork()``, and fail obscurely if they do."""
        if self._forks != _FORKS[0]:
            raise StoreError(
                f"the index at {self._held.url} was opened before this process was forked "
                "from the one that opened it; an open index cannot be shared with a child "
                "process: open it again in the child (SimhashIndex.open), e.g. in a pool's "
                "initializer"
            )
        return self._held

    @_store.setter
    def _store(self, store: Store) -> None:  # tests wrap the store to count its calls
        self._held = store

    @property
    def url(self) -> str:
        return self._held.url

    def close(self) -> None:
        if self._forks != _FORKS[0]:
            return  # the parent's: closing it here would release the parent's locks
        self._store.close()

    def discard(self) -> bool:
        """Undo this open's creation of the index when it holds no document (an
        ingest that skipped every record): its manifest goes, so a later run may
        create it with other settings. The caller removes a local folder."""
        if not self.created or next(iter(self._store.iter_docs()), None) is not None:
            return False
        digest = self.params.idf
        if digest is not None:
            head = self._store.get_meta(f"{_IDF}{digest}") or {}
            for i in range(int(head.get("parts", 0))):
                self._store.delete_meta(f"{_IDF}{digest}/{i}")
            self._store.delete_meta(f"{_IDF}{digest}")
        self._store.delete_meta(MANIFEST)
        return True

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        elif self._forks == _FORKS[0]:  # the store may be what failed: do not mask it
            self._held.close()

    def to_text(self, raw: str | bytes, fmt: str = "auto") -> str:
        """``raw`` (a text, or an HTML page) as this index fingerprints it: the one
        conversion ingest uses (:func:`simhash_hbase.text.extract.to_text`), with the
        index's HTML mode, so ``index.query(index.to_text(page))`` finds an ingested page."""
        return to_text(raw, fmt, html=self.params.html)

    @property
    def fingerprinter(self) -> Fingerprinter:
        """Built on first use: jieba takes ~1 s to load, fingerprint-only work skips it."""
        if self._fingerprinter is None:
            self._load_idf()
            check_environment(self.manifest, self.params, self.url)
            self._fingerprinter = Fingerprinter(self.params)
        return self._fingerprinter

    def _load_idf(self) -> None:
        """Register the index's own custom IDF table, read from its meta table."""
        digest = self.params.idf
        if digest is None:
            return
        head = self._store.get_meta(f"{_IDF}{digest}")
        if head is None:
            raise StoreError(f"the IDF table {digest[:12]}... of {self.url} is missing")
        parts = []
        for i in range(head["parts"]):
            part = self._store.get_meta(f"{_IDF}{digest}/{i}")
            if part is None:
                raise StoreError(f"the IDF table {digest[:12]}... of {self.url} is incomplete")
            parts.append(part)
        table = register_idf(codec.decode_blob_parts(parts), f"IDF table of {self.url}")
        if table.digest != digest:
            raise StoreError(f"the IDF table {digest[:12]}... of {self.url} is corrupt")

    def fingerprint(self, text: str) -> int:
        return self.fingerprinter.fingerprint(text)

    @property
    def minhasher(self) -> MinHasher | None:
        """The LSH net's MinHash of texts (None: this index has the pigeonhole only)."""
        if self._minhasher is None and self.lsh is not None:
            check_lsh_environment(self.manifest, self.lsh, self.url)
            self._minhasher = MinHasher(self.lsh)
        return self._minhasher

    def signature(self, text: str) -> Signature | None:
        """The text's band keys and sketch; None without the LSH net or without a
        letter or digit in the text (it then joins the pigeonhole net only)."""
        hasher = self.minhasher
        return None if hasher is None else hasher.signature(text)

    def sole_writer(self, job: str, wait: float = 0.0) -> AbstractContextManager[None]:
        """Hold the index for one writing job (an ingest run) till the block ends:
        a second job is refused (after ``wait`` s) with :class:`IndexBusy`, which
        names the holder's pid and start time; readers never wait. Embedded only
        (:meth:`Store.run_lock`)."""
        return self._store.run_lock(job, wait)

    # -- job state (e.g. ingest checkpoints), small JSON records in the meta table -
    def get_state(self, name: str) -> dict[str, Any] | None:
        return self._store.get_meta(_STATE + name)

    def put_state(self, name: str, value: dict[str, Any]) -> None:
        self._store.put_meta(_STATE + name, value)

    def delete_state(self, name: str) -> None:
        self._store.delete_meta(_STATE + name)

    # -- writing ----------------------------------------------------------------
    def add(
        self,
        doc_id: str,
        text: str,
        meta: dict[str, Any] | None = None,
        *,
        store_text: bool = False,
        time: str | float | None = None,
    ) -> int:
        """Index ``text`` under ``doc_id`` (replacing an earlier version); its fingerprint.
        ``time``: when it arrived (RFC 3339, or seconds since the epoch; None: now).
        A record that cannot be indexed raises what :func:`prepare` found
        (:class:`InvalidInput`; no usable terms: :class:`EmptyDocument`)."""
        found = prepare(
            Record(doc_id, text, meta, time=None if time is None else parse_time(time)),
            Preparer(self.fingerprinter, self.minhasher),
            store_text=store_text,
        )
        if isinstance(found, BadRecord):
            raise error_for(found)
        self.add_documents([found.doc], checked=True)
        return found.doc.fingerprint

    def add_fingerprint(
        self,
        doc_id: str,
        fp: int,
        meta: dict[str, Any] | None = None,
        *,
        time: str | float | None = None,
    ) -> None:
        """Index a fingerprint under ``doc_id``; ``time`` as :meth:`add`'s."""
        when = now_ms() if time is None else parse_time(time)
        self.add_documents([Document(doc_id, check_fingerprint(fp), None, meta, time=when)])

    def add_documents(
        self,
        docs: Sequence[Document],
        *,
        find_k: int | None = None,
        probes: Sequence[Sequence[int]] | None = None,
        checked: bool = False,
        limit: int | None = DEFAULT_LIMIT,
        before_write: Callable[[list[Lookup]], None] | None = None,
    ) -> list[Lookup]:
        """Write one batch atomically per row; with ``find_k``, each new document
        that has near-copies among the held and the earlier documents of the batch,
        with at most ``limit`` of them (nearest first) and their count.

        ``before_write`` gets the near-duplicates found before anything is written:
        an ingest saves them durably there, so that a stop between the write and
        the report never loses them (see :mod:`simhash_hbase.jobs.ingest`).

        ``probes``, one list per document (its fingerprint first, see
        :mod:`simhash_hbase.fingerprint.probes`), makes that lookup a probed one.
        Every document must be valid (see :func:`codec.check_document`); ``checked``
        says the caller has checked each already (the ingest jobs do, per record),
        so they are not checked twice. Order matters for crash safety: stale cells
        go first, then new cells, then the docs row, so a docs row never points at
        cells that are not there.
        """
        if not checked:
            for doc in docs:
                codec.check_document(doc)
        if probes is not None and (
            len(probes) != len(docs)
            or any(not p or p[0] != d.fingerprint for d, p in zip(docs, probes))
        ):
            raise InvalidInput("each document needs its probe list, its own fingerprint first")
        check_limit(limit)
        with gc_paused(), self._store.write_section():  # lookups and write: one section
            latest = {d.doc_id: d for d in docs}  # the last one wins
            found: list[Lookup] = []
            if find_k is not None:
                lists = probes or [[d.fingerprint] for d in docs]
                last = {d.doc_id: p for d, p in zip(docs, lists)}
                pairs = [(d, last[i]) for i, d in latest.items()]
                found = self._find_at_insert(pairs, find_k, limit)
            if before_write is not None:
                before_write(found)
            self._write(latest)
        return found

    def check_and_add(
        self,
        docs: Sequence[Document],
        k: int = DEFAULT_K,
        *,
        probes: Sequence[Sequence[int]] | None = None,
        always: bool | Sequence[bool] = False,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[Matches]:
        """Each document's near-copies; those with none are new and written (and
        those ``always`` says, one flag for all or one per document), in one batch.

        Near-copies are found as ingest finds them (:meth:`_lookups`): among the
        held documents and the documents of this call before it that are written.
        Unlike ingest, a document's own held version counts: a re-submitted
        document (same id and text) is a near-copy of itself, so it is not new.
        Of many identical submissions exactly one is new, however they overlap:
        on the embedded store the lookups and the write are one critical section
        of every writer of the folder, threads and processes alike
        (:meth:`Store.write_section`); on HBase each fingerprint is locked across
        processes (:meth:`_add_exclusively`).
        Every document is checked first: a bad one raises :class:`BatchRefused`
        naming each, and nothing is written.
        """
        refused: dict[int, ShdbError] = {}
        for n, doc in enumerate(docs):
            try:
                codec.check_document(doc)
            except InvalidInput as exc:
                refused[n] = exc
        if refused:
            raise BatchRefused(refused, len(docs))
        check_limit(limit)
        lists = [list(p) for p in probes] if probes is not None else [[d.fingerprint] for d in docs]
        every = [always] * len(docs) if isinstance(always, bool) else list(always)
        if len(lists) != len(docs) or len(every) != len(docs):
            raise InvalidInput("give one probe list and always flag per document")
        if not docs:
            return []
        pairs: list[tuple[Document, Sequence[int]]] = list(zip(docs, lists))
        with self._store.write_section() as exclusive:
            if exclusive:
                found, written = self._lookups(pairs, k, limit, keep=every)
                if written:
                    self.add_documents([docs[j] for j in written], checked=True)
            else:
                found = self._add_exclusively(pairs, k, limit, every)
        return [m if m is not None else Matches() for m in found]

    def _add_exclusively(
        self,
        pairs: list[tuple[Document, Sequence[int]]],
        k: int,
        limit: int | None,
        every: list[bool],
    ) -> list[Matches | None]:
        """:meth:`check_and_add` where other processes may write at once (HBase,
        several ``shdb serve`` replicas): documents are looked up and written while
        this process holds the lock rows of their fingerprints, in rounds (those
        whose locks are held elsewhere wait for the next). Of identical documents
        submitted anywhere at once exactly one is new, and the others find it."""
        found: list[Matches | None] = [None] * len(pairs)
        pending = list(range(len(pairs)))
        deadline, pause = time.monotonic() + _LOCK_WAIT_S, 0.002
        while pending:
            fps = {pairs[j][0].fingerprint for j in pending}
            with fingerprint_locks(self._store, self._nonce, fps) as held:
                now = [j for j in pending if pairs[j][0].fingerprint in held]
                if now:
                    result, written = self._lookups(
                        [pairs[j] for j in now], k, limit, keep=[every[j] for j in now]
                    )
                    for j, matches in zip(now, result):
                        found[j] = matches
                    if written:
                        self.add_documents([pairs[now[i]][0] for i in written], checked=True)
            pending = [j for j in pending if pairs[j][0].fingerprint not in held]
            if pending and not now:  # every lock is held elsewhere: wait for a release
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.url}: fingerprint {pairs[pending[0]][0].fingerprint:016x} "
                        f"stayed locked by another writer for {_LOCK_WAIT_S:.0f} s"
                    )
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
        return found

    def check_and_add_texts(
        self,
        items: Sequence[tuple[str, str]],
        *,
        fmt: str = "auto",
        k: int = DEFAULT_K,
        probes: int = 0,
        limit: int | None = DEFAULT_LIMIT,
        always: bool = True,
    ) -> list[Matches]:
        """:meth:`check_and_add` of (id, raw text or HTML) items: each one's
        near-copies (none: it was new). ``always`` writes every item, as ingest
        does; else only the new ones. Every item is read before anything is written:
        a batch holding a bad one (a bad id, not text, no usable terms) raises
        :class:`BatchRefused` naming each, and writes nothing."""
        check_probes(probes)
        prepared, refused = [], {}
        for n, (doc_id, raw) in enumerate(items):
            try:
                prepared.append(self.prepare_text(doc_id, raw, fmt, probes))
            except InvalidInput as exc:
                refused[n] = exc
        if refused:
            raise BatchRefused(refused, len(items))
        docs, lists = [doc for doc, _ in prepared], [fps for _, fps in prepared]
        return self.check_and_add(docs, k, probes=lists, always=always, limit=limit)

    def prepare_text(
        self, doc_id: str, raw: str, fmt: str = "auto", probes: int = 0
    ) -> tuple[Document, list[int]]:
        """``raw`` as the document :meth:`check_and_add` takes, and its probe list:
        pure CPU (extraction, fingerprint, sketch), so a caller may run it in another
        process on an index opened read-only there. A bad id or text raises
        :class:`InvalidInput` (no usable terms: :class:`EmptyDocument`)."""
        found = prepare(
            Record(doc_id, raw),
            Preparer(self.fingerprinter, self.minhasher, probes),
            fmt=fmt,
        )
        if isinstance(found, BadRecord):
            raise error_for(found)
        return found.doc, found.probes

    def _write(self, latest: dict[str, Document]) -> None:
        """One batch of documents by id (see :meth:`add_documents`). The batch owns
        the docs rows it replaces (:meth:`StoreBatch.claim_docs`), so the cells it
        deletes are those of the version it replaces, even with other writers of the
        same ids at work."""
        with self._store.batch() as batch:
            state = batch.claim_docs(latest, self.cells)
            changed = [
                state[i]
                for i in latest
                if i in state
                and (state[i].fingerprint, state[i].bands)
                != (latest[i].fingerprint, latest[i].bands)
            ]
            batch.delete_index(self.cells(changed))
            new = list(latest.values())
            docs_first = self._store.index_follows_docs
            if docs_first:
                batch.put_docs(new)
            for block in self._cell_blocks(new):
                batch.put_index(block)
            if not docs_first:
                batch.put_docs(new)

    def remove(self, doc_id: str) -> bool:
        """Delete a document and all its index cells; False if it was not there."""
        return bool(self.remove_many([doc_id]))

    def remove_many(self, doc_ids: Iterable[str], *, batch_size: int = REMOVE_BATCH) -> list[str]:
        """Delete documents and all their index cells, ``batch_size`` ids a batch
        (one read of their docs rows, one write); the ids that were held, in order.

        A batch is written as an ingest's is (atomic on the embedded store; on
        HBase cells go before docs rows), and removing is idempotent: a run cut
        short is finished by running it again (the ids already gone are missing)."""
        removed: list[str] = []
        items = iter(doc_ids)
        while chunk := list(dict.fromkeys(islice(items, batch_size))):
            for doc_id in chunk:
                codec.encode_doc_id(doc_id)
            # HBase: claiming an id never held would leave a row of its owner token
            held = chunk if self._store.atomic_batches else self._store.doc_fingerprints(chunk)
            if not held:
                continue
            with self._store.write_section(), self._store.batch() as batch:
                # another writer may have removed some meanwhile: those are not held
                olds = batch.claim_docs(dict.fromkeys(held), self.cells)
                batch.delete_index(self.cells(list(olds.values())))
                batch.delete_docs(list(olds))
            removed += [doc_id for doc_id in chunk if doc_id in olds]
        return removed

    def write_cells(
        self,
        *,
        put: Sequence[IndexCell] = (),
        delete: Sequence[IndexCell] = (),
        drop_rows: Sequence[str] = (),
    ) -> None:
        """Raw cell edits, deletions first, and docs rows dropped outright (damaged
        ones found by ``verify``): for ``verify --repair`` and tests only."""
        with self._store.batch() as batch:
            batch.delete_docs(drop_rows)
            batch.delete_index(delete)
            batch.put_index(put)

    def cells(self, docs: Sequence[Document]) -> list[IndexCell]:
        """The index cells (row key, id) that ``docs`` own: the pigeonhole's under
        this scheme, and the LSH bands of those that have band keys."""
        return [cell for block in self._cell_blocks(docs) for cell in block]

    def _cell_blocks(self, docs: Sequence[Document]) -> list[CellBlock]:
        """:meth:`cells` as arrays, for a store to write in bulk: the pigeonhole's
        block (every document, in order), then the band rows of those of them that
        have band keys, if any (in order too)."""
        banded = self._band_block(docs)
        return [self._cell_block(docs), *([] if banded is None else [banded])]

    def _band_block(self, docs: Sequence[Document]) -> CellBlock | None:
        """The band rows of the documents that have band keys (flags after the
        combinations: docs/SPEC.md, "Nets"); None if none has."""
        banded = [d for d in docs if d.bands is not None]
        if not banded:
            return None
        fps = np.fromiter((d.fingerprint for d in banded), dtype=np.uint64, count=len(banded))
        keys = np.frombuffer(b"".join([d.bands for d in banded]), dtype=">u4")  # type: ignore[misc]
        first = first_band_flag(self.scheme)
        rows = codec.rowkeys_array(fps, keys.reshape(len(banded), -1), first)
        return CellBlock(rows, [d.doc_id for d in banded])

    def _cell_block(self, docs: Sequence[Document]) -> CellBlock:
        """:meth:`cells` as arrays, for a store to write in bulk."""
        fps = np.fromiter((d.fingerprint for d in docs), dtype=np.uint64, count=len(docs))
        rows = codec.rowkeys_array(fps, self.scheme.fields_many(fps))
        return CellBlock(rows, [d.doc_id for d in docs])

    def bulk_load(self, docs: Iterable[Document], *, batch_size: int = BULK_BATCH) -> int:
        """Fill an empty embedded index with ``docs`` (unique ids): a backfill that
        writes every page once, full, instead of inserting cell by cell
        (docs/embedded.md). The documents loaded; :class:`StoreError` if the index
        holds documents, InvalidInput on a store without bulk loads (HBase)."""
        load = getattr(self._store, "load", None)
        if load is None:
            raise InvalidInput(f"{self.url} has no bulk load (the embedded store has); ingest")
        items = iter(docs)

        def blocks() -> Iterator[tuple[list[CellBlock], list[Document]]]:
            while chunk := list(islice(items, batch_size)):
                codec.check_documents(chunk)
                yield self._cell_blocks(chunk), chunk

        with gc_paused():  # every block's documents and cells: see gc_paused
            return int(load(blocks()))

    def compact(self, on_part: Callable[[int, int, int], None] | None = None) -> int:
        """Merge an embedded index's fresh tier into its main one (docs/embedded.md,
        "Two tiers"): after a backfill or a burst of ingest, each query then reads
        one tier, not two. The index cells moved (0 where there is no fresh tier:
        format 1 or 2, HBase). Ingest merges by itself as the tier grows; this
        only chooses the moment. ``on_part(done, parts, moved)`` is called after
        each of the merge's commits (it moves one key range at a time)."""
        merge = getattr(self._store, "merge_fresh", None)
        if merge is None:
            return 0
        with gc_paused():  # the buckets of a key range at a time: see gc_paused
            return int(merge(on_part))

    def warm(self) -> int:
        """Map an embedded index's file into this process now, so that its first
        queries pay no page faults (docs/embedded.md, "Warm readers"): worth it in
        a reader that serves many queries, not in a one-shot CLI query. The bytes
        mapped (0 for HBase)."""
        warm = getattr(self._store, "warm", None)
        return 0 if warm is None else int(warm())

    # -- reading ----------------------------------------------------------------
    def get(self, doc_id: str) -> Document | None:
        return self.get_many([doc_id]).get(doc_id)

    def get_many(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        """Documents by id (those held); ids that could not be stored are not held."""
        for doc_id in doc_ids:
            codec.encode_doc_id(doc_id)
        return self._store.get_docs(doc_ids)

    def documents(
        self, on_corrupt: Callable[[str, StoreCorrupt], None] | None = None
    ) -> Iterator[Document]:
        """Every document, in id byte order; a damaged docs row raises
        :class:`StoreCorrupt`, or goes to ``on_corrupt(id, error)`` and is skipped."""
        return self._store.iter_docs(on_corrupt)

    def index_cells(self) -> Iterator[IndexCell]:
        """Every index cell, in row key order."""
        return self._store.iter_index()

    def query(
        self, text: str, k: int = DEFAULT_K, *, probes: int = 0, limit: int | None = DEFAULT_LIMIT
    ) -> Matches:
        """The ``limit`` documents nearest the text's fingerprint within ``k`` (None:
        all), and their count; with ``probes`` > 0 also those within ``k`` of its
        first ``probes`` flipped copies whose true distance is at most
        :func:`~simhash_hbase.fingerprint.probes.bound` (multi-probe)."""
        self.scheme.check_k(k)  # a usage error first, before the text is fingerprinted
        check_probes(probes)
        check_query_text(text)
        sig = self.signature(text)
        if probes == 0 and sig is None:
            return self.query_fingerprint(self.fingerprint(text), k, limit=limit)
        fps = self.fingerprinter.probes(text, probes) if probes else [self.fingerprint(text)]
        return self.query_probed([fps], k, limit=limit, sketches=[_keys_of(sig)])[0]

    def query_fingerprint(
        self, fp: int, k: int = DEFAULT_K, *, limit: int | None = DEFAULT_LIMIT
    ) -> Matches:
        self.scheme.check_k(k)
        check_limit(limit)
        fp = check_fingerprint(fp)
        found = self._query_one(fp, k, limit)
        return self._query_scanned([fp], k, limit)[0] if found is None else found

    def query_many(
        self,
        texts: Iterable[str],
        k: int = DEFAULT_K,
        *,
        workers: int = 1,
        probes: int = 0,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[Matches]:
        """Queries in bulk: one round of scans and one multi-get per batch."""
        self.scheme.check_k(k)
        check_probes(probes)
        check_limit(limit)
        results: list[Matches] = []
        items = iter(texts)
        while chunk := list(islice(items, QUERY_BATCH)):
            for text in chunk:
                check_query_text(text)
            (lists,) = self.fingerprinter.map_probes([chunk], probes, workers)
            for probe_list in lists:
                if isinstance(probe_list, EmptyDocument):
                    raise probe_list
            keys = [_keys_of(self.signature(t)) for t in chunk] if self.lsh else None
            results += self.query_probed(
                lists,  # type: ignore[arg-type]
                k,
                limit=limit,
                sketches=keys,
            )
        return results

    def query_fingerprints(
        self, fps: Sequence[int], k: int = DEFAULT_K, *, limit: int | None = DEFAULT_LIMIT
    ) -> list[Matches]:
        """Exact for k <= the scheme's k: the pigeonhole scans, then a Hamming filter;
        each result keeps its ``limit`` nearest (distance, then id) and the count.

        Where batches are not atomic (HBase), hits are confirmed against the docs
        table, so a cell left behind by an interrupted write never surfaces.
        This is :meth:`query_probed` without probes, on the shortest path: it is
        the one-query hot path (issue #13: compared with FAISS).
        """
        self.scheme.check_k(k)
        check_limit(limit)
        fps = [check_fingerprint(fp) for fp in fps]
        if len(fps) <= _SCALAR_MAX and self._store.atomic_batches:  # remote: one multi-get
            quick = [self._query_one(fp, k, limit) for fp in fps]
            if all(result is not None for result in quick):
                return quick  # type: ignore[return-value]
        return self._query_scanned(fps, k, limit)

    def _query_scanned(self, fps: list[int], k: int, limit: int | None) -> list[Matches]:
        """:meth:`query_fingerprints` through the scans and the confirmation."""
        if len(fps) > _SCALAR_MAX:
            hits, cells = self._near_many(fps, k, limit)
            cut = _cut_rows(cells, limit)
            candidates = len(cells)
        else:
            found = self._store.scan_prefixes_many(self._prefixes(fps), row_cap=limit)
            hits = [_near(fp, cells, k) for fp, cells in zip(fps, found)]
            cut = _cut_rows([c for cells in found for c in cells], limit)
            candidates = sum(map(len, found))
        self.cost.queries += len(fps)
        self.cost.scans += len(fps) * self.scheme.rows_per_fingerprint
        self.cost.candidates += candidates
        return self._confirm(hits, limit, cut)

    def _query_one(self, fp: int, k: int, limit: int | None) -> Matches | None:
        """One query on the store's one-query path (:meth:`Store.scan_documents`:
        the documents found, not a cell tuple each) where it has one and no cell
        can disagree with its docs row (no confirming read: batches are atomic, or
        the index follows the docs); None: take the plain path."""
        store = self._store
        terms = self.scheme.prefix_terms
        if terms is None or not (store.atomic_batches or store.index_follows_docs):
            return None
        found = store.scan_documents(self._encode_prefixes(fp, terms), limit)
        if found is None:
            return None
        docs, cells = found
        cost = self.cost
        cost.queries += 1
        cost.scans += self.scheme.rows_per_fingerprint
        cost.candidates += cells
        hits = [(i, cand, dist) for i, cand in docs if (dist := (cand ^ fp).bit_count()) <= k]
        hits.sort(key=_by_distance)
        return with_times(store, [Matches([Match(*hit) for hit in hits[:limit]], len(hits))])[0]

    def _near_many(
        self, fps: list[int], k: int, row_cap: int | None
    ) -> tuple[list[dict[tuple[str, int], int]], list[IndexCell]]:
        """:func:`_near` of many queries, and the cells their scans read.

        The batch's distinct prefixes go to the store as one list in key order
        (each seek then descends through pages the one before has just read),
        and each cell found is matched to the queries of its prefix and confirmed
        by XOR and popcount in NumPy, not by a Python call per candidate.
        """
        arr = np.array(fps, dtype=np.uint64)
        values = codec.prefix_values(self.scheme.fields_many(arr)).reshape(-1)
        unique, inverse = np.unique(values, return_inverse=True)
        (cells,) = self._store.scan_prefixes_many(
            [codec.encode_prefix_values(unique)], row_cap=row_cap
        )
        hits: list[dict[tuple[str, int], int]] = [{} for _ in fps]
        if not cells:
            return hits, cells
        rows = np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)
        slot = np.searchsorted(unique, codec.rowkey_prefix_values(rows))  # each cell's prefix
        # The queries holding distinct prefix u are owners[start[u] : start[u + 1]].
        owners = np.argsort(inverse, kind="stable") // self.scheme.rows_per_fingerprint
        start = np.zeros(len(unique) + 1, dtype=np.intp)
        np.cumsum(np.bincount(inverse, minlength=len(unique)), out=start[1:])
        per_cell = start[slot + 1] - start[slot]
        cell = np.repeat(np.arange(len(cells)), per_cell)
        first = np.cumsum(per_cell) - per_cell  # where each cell's pairs begin
        query = owners[np.repeat(start[slot] - first, per_cell) + np.arange(len(cell))]
        cands = rows["fp"].astype(np.uint64)[cell]
        dists = np.bitwise_count(cands ^ arr[query])
        keep = np.flatnonzero(dists <= k)
        for c, q, cand, dist in zip(
            cell[keep].tolist(), query[keep].tolist(), cands[keep].tolist(), dists[keep].tolist()
        ):
            hits[q][(cells[c][1], cand)] = dist
        return hits, cells

    def query_probed(
        self,
        probe_lists: Sequence[Sequence[int]],
        k: int = DEFAULT_K,
        *,
        limit: int | None = DEFAULT_LIMIT,
        sketches: Sequence[SketchKeys] | None = None,
    ) -> list[Matches]:
        """Multi-probe queries: each is a fingerprint followed by its probes.

        The pigeonhole's verdict on one is exactly the union of the exact
        k-searches of its probes, keeping the documents whose distance to the
        fingerprint itself is at most ``bound(k, probes)``; a match reports that
        true distance. The prefixes of all probes of all queries go to the store
        in one batched scan, each distinct prefix once per query.

        ``sketches`` (per query: its sketch and band keys, or (None, None)) adds
        the LSH net: the band prefixes go in the same scan, and every candidate
        is judged by :func:`~simhash_hbase.layout.nets.is_match` with the
        similarity of the sketches read with the docs rows.
        """
        self.scheme.check_k(k)
        check_limit(limit)
        lists = [list(probes) for probes in probe_lists]
        check_fingerprints(list(chain.from_iterable(lists)))
        if any(not probes for probes in lists):
            raise InvalidInput("a probed query needs at least its own fingerprint")
        nets = self.lsh is not None and sketches is not None and any(s for s, _ in sketches)
        if not nets and all(len(probes) == 1 for probes in lists):  # exact searches
            return self.query_fingerprints([probes[0] for probes in lists], k, limit=limit)
        flat = [fp for probes in lists for fp in probes]
        per_fp = self._prefixes(flat)
        prefix_lists, at = [], 0
        for probes in lists:
            unique = dict.fromkeys(p for pl in per_fp[at : at + len(probes)] for p in pl)
            prefix_lists.append(list(unique))
            at += len(probes)
        if nets:
            assert sketches is not None
            return self._query_nets(lists, prefix_lists, sketches, k, limit)
        found = self._store.scan_prefixes_many(prefix_lists, row_cap=limit)
        self.cost.queries += len(lists)
        self.cost.scans += sum(map(len, prefix_lists))
        self.cost.candidates += sum(map(len, found))
        cut = _cut_rows([c for cells in found for c in cells], limit)
        hits: list[dict[tuple[str, int], int]] = []
        for probes, cells in zip(lists, found):
            fp, flipped, widest = probes[0], probes[1:], bound(k, len(probes) - 1)
            near: dict[tuple[str, int], int] = {}
            for row, doc_id in cells:
                cand = codec.rowkey_fingerprint(row)
                dist = (cand ^ fp).bit_count()
                if dist <= k or (
                    dist <= widest and any((cand ^ p).bit_count() <= k for p in flipped)
                ):
                    near[(doc_id, cand)] = dist
            hits.append(near)
        return self._confirm(hits, limit, cut)

    def _query_nets(
        self,
        lists: list[list[int]],
        prefix_lists: list[list[bytes]],
        sketches: Sequence[SketchKeys],
        k: int,
        limit: int | None,
    ) -> list[Matches]:
        """:meth:`query_probed` with both nets: one scan for the pigeonhole's and the
        bands' prefixes, one multi-get of the candidates' docs rows (their sketches;
        on HBase the read that already confirms hits), then :func:`is_match`."""
        first = first_band_flag(self.scheme)
        for prefixes, (_, bands) in zip(prefix_lists, sketches):
            if bands is not None:
                prefixes += codec.band_prefixes(bands, first)
        read, found, partial, cells = bucket_docs(self._store, prefix_lists, limit)
        self.cost.queries += len(lists)
        self.cost.scans += sum(map(len, prefix_lists))
        self.cost.candidates += cells
        mine = [sketch for sketch, _ in sketches]
        return judged(self._store, self.lsh, lists, read, found, partial, mine, k, limit)

    def candidates(self, fps: Sequence[int]) -> list[list[IndexCell]]:
        """Every cell the pigeonhole scans of each fingerprint find (before the
        Hamming filter and the docs-row confirmation)."""
        return self._store.scan_prefixes_many(self._prefixes(fps))

    def _prefixes(self, fps: Sequence[int]) -> list[list[bytes]]:
        terms = self.scheme.prefix_terms
        if len(fps) <= _SCALAR_MAX and terms:  # NumPy's per-call cost would dominate
            return [self._encode_prefixes(fp, terms) for fp in fps]
        return codec.encode_prefixes_many(self.scheme.fields_many(np.array(fps, dtype=np.uint64)))

    def _confirm(
        self, hits: list[dict[tuple[str, int], int]], limit: int | None, cut: dict[int, bytes]
    ) -> list[Matches]:
        """Each query's hits ranked and cut to ``limit``, with their count.

        ``cut``: fingerprints whose rows the scan read only to ``limit`` cells (a
        row holds one fingerprint, so its first ids are the nearest of it); their
        documents are counted by :meth:`Store.row_sizes` where the store can, else
        the count is a lower bound.

        Where batches are not atomic, a hit is shown only if its docs row holds
        its fingerprint. Rows are read nearest first, only as far as it takes to
        fill ``limit`` (a hot query of 100,000 copies reads ~``limit`` rows); the
        hits further down are counted unread, so until ``verify --repair`` drops
        a cell an interrupted write left, it may count.
        """
        counts = self._counts(hits, cut)
        if self._store.atomic_batches or self._store.index_follows_docs:
            # Cells and their docs row commit in one transaction, or cells are
            # written after their docs row and deleted before it changes: no cell
            # can disagree with its document, so the confirming read is not needed.
            done = [_ranked(near, limit, *count) for near, count in zip(hits, counts)]
            return with_times(self._store, done)
        ranked = [sorted(near, key=_hit_order(near)) for near in hits]
        held: dict[str, int | None] = {}  # id -> fingerprint in its docs row (None: no row)
        while ask := sorted({i for order in ranked for i, _ in _unsure_head(order, held, limit)}):
            fps = self._store.doc_fingerprints(ask)
            held.update((i, fps.get(i)) for i in ask)
        results = []
        for near, order, (total, exact) in zip(hits, ranked, counts):
            stale = sum(1 for i, fp in order if i in held and held[i] != fp)
            shown = [(i, fp) for i, fp in order if held.get(i, fp) == fp][:limit]
            matches = (Match(i, fp, near[(i, fp)]) for i, fp in shown)
            results.append(Matches(matches, total - stale, exact))
        return with_times(self._store, results)

    def _counts(
        self, hits: list[dict[tuple[str, int], int]], cut: dict[int, bytes]
    ) -> list[tuple[int, bool]]:
        """(count, exact) of each query's hits, its cut fingerprints counted whole."""
        if not cut:
            return [(len(near), True) for near in hits]
        wanted = [{fp for _, fp in near} & cut.keys() for near in hits]
        sizes = self._store.row_sizes(sorted({cut[fp] for fps in wanted for fp in fps}))
        counts = []
        for near, fps in zip(hits, wanted):
            if not fps:
                counts.append((len(near), True))
            elif sizes is None:
                counts.append((len(near), False))
            else:
                rest = sum(1 for _, fp in near if fp not in fps)
                counts.append((rest + sum(sizes[cut[fp]] for fp in fps), True))
        return counts

    def _find_at_insert(
        self, docs: list[tuple[Document, Sequence[int]]], k: int, limit: int | None
    ) -> list[Lookup]:
        """Near-copies of each new doc among held docs and earlier docs of this batch
        (all written), for ingest: see :meth:`_lookups`. A document re-added
        unchanged (same id, same fingerprint) is not new: its pairs were reported
        when it or its partners were added, so it reports none."""
        found, _ = self._lookups(docs, k, limit)
        return [
            Lookup(doc.doc_id, matches)
            for (doc, _), matches in zip(docs, found)
            if matches is not None and matches.total
        ]

    def _lookups(
        self,
        docs: list[tuple[Document, Sequence[int]]],
        k: int,
        limit: int | None,
        *,
        keep: Sequence[bool] | None = None,
    ) -> tuple[list[Matches | None], list[int]]:
        """Each doc's near-copies among held docs and the earlier docs of the batch
        that are written, by the same rule as :meth:`query_probed` (each doc with
        its probe list): at most ``limit`` each, nearest first, and their count;
        and the positions of the docs written, in order.

        ``keep`` None (ingest): every doc is written; a doc re-added unchanged
        gets None (not new) and a changed one does not count its own old version.
        Else (check-and-add): a doc is written if ``keep`` says so or if it has no
        near-copy, and its own held version counts like any other document.
        Documents with one probe list (unprobed: one fingerprint) are looked up once,
        and the batch is compared by distinct lists, so a batch of mass copies costs
        one lookup and ``limit`` ids per copy, not a pair per copy and partner.
        """
        keys = [(tuple(probes), d.sketch, d.bands) for d, probes in docs]
        distinct = list(dict.fromkeys(keys))
        slot = {key: s for s, key in enumerate(distinct)}
        # One more than shown, so that dropping a document's own older version
        # still leaves ``limit``.
        held = self.query_probed(
            [key[0] for key in distinct],
            k,
            limit=None if limit is None else limit + 1,
            sketches=[key[1:] for key in distinct],
        )
        near, whole = batch_near(distinct, k, self.scheme, self.lsh)
        ingest = keep is None
        versions = self._own_versions(docs, [held[slot[key]] for key in keys]) if ingest else {}
        count = [0] * len(distinct)  # earlier documents of the batch written, by key
        nearest: list[list[str]] = [[] for _ in distinct]  # their first ids, sorted
        written: dict[str, tuple[int, int]] = {}  # id -> (position, key) of its version
        found: list[Matches | None] = []
        for j, ((doc, probes), key) in enumerate(zip(docs, keys)):
            old = versions.get(doc.doc_id)
            if ingest and old == doc.fingerprint:  # unchanged
                found.append(None)
                continue
            s = slot[key]
            result = held[s]
            total, hits = 0, list[Match]()
            if result.total or len(near[s]) > 1 or count[s] or old is not None:
                total, hits = self._batch_matches(result, doc, probes, old, written, ingest, k)
                for t, dist, sim in near[s]:
                    total += count[t]
                    hits += [
                        Match(i, distinct[t][0][0], dist, sim, docs[written[i][0]][0].time)
                        for i in nearest[t]
                    ]
                hits = sorted(hits, key=_match_order)[:limit]
            # else (most documents): nothing held near, nothing near in the batch so far
            # a key in a large group was judged against bounded neighbours: its count
            # is a lower bound, unless no earlier document of the batch is written
            exact = result.total_exact and (whole[s] or not written)
            found.append(Matches(hits, total, exact))
            if ingest or keep[j] or not total:  # type: ignore[index]
                if doc.doc_id in written:  # its earlier version of this batch is replaced
                    _, t = written[doc.doc_id]
                    count[t] -= 1
                    if doc.doc_id in nearest[t]:
                        nearest[t].remove(doc.doc_id)
                written[doc.doc_id] = (j, s)
                count[s] += 1
                bisect.insort(nearest[s], doc.doc_id)
                del nearest[s][len(nearest[s]) if limit is None else limit :]
        return found, [j for j, _ in written.values()]

    @staticmethod
    def _batch_matches(
        result: Matches,
        doc: Document,
        probes: Sequence[int],
        old: int | None,
        written: dict[str, tuple[int, int]],
        ingest: bool,
        k: int,
    ) -> tuple[int, list[Match]]:
        """A document's held matches as :meth:`_lookups` reports them: its own older
        version and the held versions of documents written earlier in the batch (they
        are counted among the batch's) left out; (their count, those shown)."""
        own = any(m.doc_id == doc.doc_id for m in result)
        total = result.total - (old is not None and (own or _within(old, probes, k)))
        total -= sum(m.doc_id in written for m in result)
        hits = [
            m for m in result if m.doc_id not in written and (m.doc_id != doc.doc_id or not ingest)
        ]
        return total, hits

    def _own_versions(
        self, docs: list[tuple[Document, Sequence[int]]], held: list[Matches]
    ) -> dict[str, int]:
        """The fingerprint each new document's id holds already, where it has one:
        seen in its lookup's matches, or read when a cut result may hide it."""
        versions: dict[str, int] = {}
        unsure = []
        for (doc, _), result in zip(docs, held):
            own = [m.fingerprint for m in result if m.doc_id == doc.doc_id]
            if own:
                versions[doc.doc_id] = own[0]
            elif result.total > len(result):
                unsure.append(doc.doc_id)
        if unsure:
            versions.update((i, d.fingerprint) for i, d in self._store.get_docs(unsure).items())
        return versions

    def stats(self) -> dict[str, Any]:
        stats = self._store.stats()
        docs = stats.get("documents") or 0
        stats.update(
            scheme=self.scheme.name,
            rows_per_fingerprint=self.scheme.rows_per_fingerprint,
            exact_for_k=self.scheme.k,
            fingerprint=self.manifest["fingerprint"],
        )
        if docs and "disk_bytes" in stats:
            stats["disk_bytes_per_document"] = round(stats["disk_bytes"] / docs, 1)
        return stats


def _near(fp: int, cells: Sequence[IndexCell], k: int) -> dict[tuple[str, int], int]:
    """The cells within ``k`` of ``fp``: {(id, fingerprint): distance}."""
    if len(cells) > _SCALAR_CANDIDATES:  # one XOR and popcount in NumPy (4x4 at 1 M: ~60)
        rows = np.frombuffer(b"".join([row for row, _ in cells]), dtype=codec.ROWKEY_DTYPE)
        cands = rows["fp"].astype(np.uint64)
        dists = np.bitwise_count(cands ^ np.uint64(fp))
        keep = np.flatnonzero(dists <= k).tolist()
        return {(cells[i][1], int(cands[i])): int(dists[i]) for i in keep}
    near: dict[tuple[str, int], int] = {}
    for row, doc_id in cells:
        cand = codec.rowkey_fingerprint(row)
        dist = (cand ^ fp).bit_count()
        if dist <= k:
            near[(doc_id, cand)] = dist
    return near


def _cut_rows(cells: Sequence[IndexCell], cap: int | None) -> dict[int, bytes]:
    """{fingerprint: its row} of the rows a scan with ``row_cap=cap`` may have cut."""
    if cap is None or len(cells) < cap:
        return {}
    counts = Counter(row for row, _ in cells)
    return {codec.rowkey_fingerprint(row): row for row, n in counts.items() if n >= cap}


def _ranked(
    near: dict[tuple[str, int], int], limit: int | None, total: int, exact: bool
) -> Matches:
    """The ``limit`` nearest hits (distance, then id) of {(id, fingerprint): distance}."""
    if not near:  # most lookups of a batch
        return Matches((), total, exact)
    hits = ((doc_id, fp, dist) for (doc_id, fp), dist in near.items())
    if limit is None or len(near) <= limit:
        top = sorted(hits, key=_by_distance)
    else:  # a hot query: no sort of every copy
        top = heapq.nsmallest(limit, hits, key=_by_distance)
    return Matches((Match(*hit) for hit in top), total, exact)


def _unsure_head(
    order: list[tuple[str, int]], held: dict[str, int | None], limit: int | None
) -> Iterator[tuple[str, int]]:
    """The unread hits among the first ones that would fill ``limit`` if all were good."""
    good = 0
    for doc_id, fp in order:
        if limit is not None and good >= limit:
            return
        if doc_id not in held:
            yield doc_id, fp
            good += 1
        elif held[doc_id] == fp:
            good += 1


def _by_distance(hit: tuple[Any, ...]) -> tuple[int, str]:
    return hit[2], hit[0]


#: A new document's lookup: its probe list, sketch and band keys.
#: A query's (sketch, band keys as stored), or (None, None) without them.
SketchKeys = tuple[bytes | None, bytes | None]


def _keys_of(sig: Signature | None) -> SketchKeys:
    return (None, None) if sig is None else (sig.sketch, codec.encode_bands(sig.bands))


def _hit_order(near: dict[tuple[str, int], int]) -> Callable[[tuple[str, int]], tuple[int, str]]:
    """Sort key of the hits of ``near``: distance, then id."""
    return lambda hit: (near[hit], hit[0])


def _match_order(match: Match) -> tuple[int, str]:
    return match.distance, match.doc_id


def _within(cand: int, probes: Sequence[int], k: int) -> bool:
    """Whether a probed lookup finds ``cand`` (see :meth:`SimhashIndex.query_probed`)."""
    dist = (cand ^ probes[0]).bit_count()
    return dist <= k or (
        dist <= bound(k, len(probes) - 1) and any((cand ^ p).bit_count() <= k for p in probes[1:])
    )


def check_query_text(text: object) -> None:
    """:class:`InvalidQuery` unless ``text`` is a string (None, bytes: a caller's slip)
    of Unicode characters."""
    if not isinstance(text, str):
        raise InvalidQuery(
            f"a query text must be a str, not {type(text).__name__} ({text!r:.40}); "
            "decode bytes first, or query a fingerprint with query_fingerprint()"
        )
    try:
        check_text(text, "the query text")
    except InvalidInput as exc:
        raise InvalidQuery(str(exc)) from None


def check_text(text: object, what: str) -> str:
    """``text`` if it is a string the fingerprint can read: a lone surrogate (from
    ``errors="surrogateescape"``, or a JSON escape) is not a character, and would fail
    deep in the segmenter (OpenCC) as a UnicodeEncodeError."""
    if not isinstance(text, str):
        raise InvalidInput(f"{what} is a {type(text).__name__}, not a string")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(
                f"{what} holds a lone surrogate ({text[exc.start]!r} at character "
                f"{exc.start}), not Unicode text: decode its source with errors='replace'"
            ) from None
    return text


def check_fingerprints(fps: list[int]) -> None:
    """:func:`check_fingerprint` of each: a list of ints in range in a few C-level
    passes (a batch's lookups), else one by one (the error names the first bad one)."""
    if set(map(type, fps)) <= {int} and (not fps or (min(fps) >= 0 and max(fps) < 1 << 64)):
        return
    for fp in fps:
        check_fingerprint(fp)


def check_fingerprint(fp: int) -> int:
    if isinstance(fp, bool) or not isinstance(fp, int) or not 0 <= fp < 1 << 64:
        raise InvalidInput(f"fingerprint {fp!r} is not an unsigned 64-bit integer")
    return fp
