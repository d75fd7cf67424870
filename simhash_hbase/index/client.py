"""The client API: a near-duplicate index over a private store.

with SimhashIndex.open("shdb-index") as index:
    index.add("doc-1", text)
    index.query(other_text, k=3)   # Matches: the 10 nearest Match(doc_id, fingerprint,
                                   # distance), and .total / .total_exact

Streaming jobs (files, checkpoints, skip/fail policies) are built on top of this
in :mod:`simhash_hbase.jobs.ingest`; nothing here knows about files or flags.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from itertools import islice
from typing import Any, cast

from simhash_hbase.errors import (
    BatchRefused,
    EmptyDocument,
    IndexNotFound,
    InvalidInput,
    InvalidSetting,
    StoreCorrupt,
    StoreError,
)
from simhash_hbase.fingerprint.minhash import (
    MinHasher,
    MinHashParams,
    Signature,
)
from simhash_hbase.fingerprint.probes import check_probes
from simhash_hbase.fingerprint.simhash import (
    Fingerprinter,
    FingerprintParams,
)
from simhash_hbase.index.lookup import Finder, SketchKeys, keys_of
from simhash_hbase.index.manifest import (
    Wanted,
    check_environment,
    check_lsh_environment,
    drop_manifest,
    load_idf,
    nets_of,
    read_manifest,
    retain_of,
    settle,
    store_manifest,
    validate,
)
from simhash_hbase.index.write import BULK_BATCH, REMOVE_BATCH, Writer, gc_paused
from simhash_hbase.layout import codec
from simhash_hbase.layout.codec import RETAIN, check_fingerprint
from simhash_hbase.layout.nets import check_nets
from simhash_hbase.layout.prepare import Preparer, error_for, prepare
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.layout.window import Window
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    BadRecord,
    Document,
    Lookup,
    Matches,
    Record,
    Time,
    Written,
    check_limit,
    now_ms,
    parse_time,
)
from simhash_hbase.store import IndexCell, Store, open_store
from simhash_hbase.store.base import WHOLE, KeyRange, Section
from simhash_hbase.text.extract import check_query_text, to_text

DEFAULT_K = 3
OnCorrupt = Callable[[str, StoreCorrupt], None] | None
DocStream = Iterator[Document]  # documents read in order, as a scan gives them
# How many times this process has forked: an index opened before a fork refuses
# to be used in the child (see SimhashIndex._store).
_FORKS = [0]
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))
QUERY_BATCH = 1000  # texts fingerprinted and looked up together by query_many
_STATE = "state/"  # meta records of jobs (e.g. ingest checkpoints) live under this


class _Judged:
    """The handles of an index judged at a caller's similarity, or answering in a
    caller's time window (:class:`SimhashIndex`): views on the same store whose
    one :class:`Finder` differs; caches and cost are shared."""

    def at_similarity(self, similarity: float | None) -> SimhashIndex:
        """This index judged at ``similarity`` (None: as is): a handle on the same store
        whose LSH threshold is the caller's (docs/nets.md, "The similarity"), for a run
        or a request that asks for its own. Close the index, never the handle."""
        index = cast("SimhashIndex", self)  # the one subclass
        if similarity is None:
            return index
        if index.lsh is None:
            raise InvalidSetting(
                "similarity",
                f"the index at {index.url} has the pigeonhole net only (nets: simhash): it "
                "keeps no sketches to judge a similarity by; leave similarity out, or "
                "ingest into a new index (both nets, the default)",
            )
        lsh = index.lsh.at_similarity(similarity)
        index._minhasher = index.minhasher  # built once, shared: the view hashes as the index
        finder = copy.copy(index._finder)  # caches and cost shared
        finder.lsh = lsh
        view = self._view(finder)
        view.lsh = lsh
        return view

    def within(self, window: Window | None) -> SimhashIndex:
        """This index answering in ``window`` (None, or both sides open: as is): a
        handle on the same store whose every lookup (queries, check-and-add,
        ingest's report) matches only the documents inside it; a document of the
        batch being written counts as "now" (docs/lifecycle.md, "A window").
        Close the index, never the handle."""
        index = cast("SimhashIndex", self)
        if window is None or not window.bounded:
            return index
        finder = copy.copy(index._finder)  # caches and cost shared
        finder.window = window
        return self._view(finder)

    def _view(self, finder: Finder) -> SimhashIndex:
        index = cast("SimhashIndex", self)
        view = copy.copy(index)
        view._finder = finder
        view._writer = copy.copy(index._writer)
        view._writer.finder = view._finder
        return view


class _Upkeep:
    """What an index keeps between runs: job state, and a retained index's expiry
    (:class:`SimhashIndex`)."""

    _store: Store
    _writer: Writer
    #: The retention in whole seconds (docs/lifecycle.md); None: every document is kept.
    retain: int | None

    def write_section(self) -> AbstractContextManager[Section]:
        """Hold the index's write section (:meth:`Store.write_section`) around a write
        made outside this client that other writers' batches must come wholly
        before or after: a Spark bulk load's HFiles (docs/spark.md)."""
        return self._store.write_section()

    # job state (e.g. ingest checkpoints): small JSON records in the meta table
    def get_state(self, name: str) -> dict[str, Any] | None:
        return self._store.get_meta(_STATE + name)

    def put_state(self, name: str, value: dict[str, Any]) -> None:
        self._store.put_meta(_STATE + name, value)

    def delete_state(self, name: str) -> None:
        self._store.delete_meta(_STATE + name)

    def expired(self, now: int | None = None) -> int:
        """The time (ms) before which a document has expired: ``now`` (default: the
        clock) minus the retention. :class:`InvalidSetting` if the index has none."""
        if self.retain is None:
            raise InvalidSetting(
                "retain",
                f"the index at {self._store.url} was created without a retention: nothing "
                "expires (remove documents with remove_many, or shdb remove --before)",
            )
        return (now_ms() if now is None else now) - self.retain * 1000

    def expire(
        self,
        *,
        now: int | None = None,
        batch_size: int = REMOVE_BATCH,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Remove every expired document with all its cells (:meth:`expired`), oldest
        first, ``batch_size`` a batch, ``on_batch`` seeing the count so far: the
        documents removed. Idempotent: a run cut short is finished by the next."""
        before = self.expired(now)
        return self._writer.expire(self._store, before, None, batch_size, on_batch)

    def due(self, now: int | None = None, limit: int = 2**62) -> list[str]:
        """The ids of the expired documents still held (at most ``limit``), oldest
        first on the embedded store: what :meth:`expire` would remove."""
        return self._store.due(self.expired(now), limit)


class SimhashIndex(_Upkeep, _Judged):
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
        self.retain = manifest.get(RETAIN)
        self._finder = Finder(scheme, lsh, self.retain)  # every lookup
        self.cost = self._finder.cost
        self._writer = Writer(scheme, self._finder)  # every write

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
        similarity: float | None = None,
        retain: int | None = None,
    ) -> SimhashIndex:
        """Open (or create) the index at ``url``. ``scheme`` and ``params`` (a
        :class:`FingerprintParams`, or a mapping of only the fields that matter)
        left out mean "what the index was built with"; given ones must equal that
        (:class:`ManifestMismatch`), or, for a new index, are its settings.
        ``nets``: ``"simhash"`` (the pigeonhole only) or ``"simhash+lsh"`` (the
        default; docs/SPEC.md, "Nets"). ``warm``: :meth:`warm` it (a long-lived
        reader of a big embedded index). ``similarity``: :meth:`at_similarity` (new: kept).
        ``retain``: a new index's retention in seconds (docs/lifecycle.md); given, the index's."""
        validate(scheme, params, similarity, retain)  # every setting given is valid, first
        if nets is not None:
            check_nets(nets)
        create = create and not readonly  # readonly: creates nothing, no write locks
        store = open_store(url, create=create, readonly=readonly, retain=retain)
        try:
            manifest = read_manifest(store)
            created = manifest is None
            if manifest is None:
                if not create:
                    raise IndexNotFound(store.url)
                manifest = store_manifest(store, scheme, params, nets, similarity, retain)
            found_scheme, held = settle(manifest, store.url, scheme, params)
            retain_of(manifest, store.url, retain)
            store.adopt(manifest)
            index = cls(store, found_scheme, manifest, held, nets_of(manifest, store.url, nets))
            index.created = created
            if warm:
                index.warm()
            return index.at_similarity(similarity)
        except BaseException:
            store.close()
            raise

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
        if self._forks == _FORKS[0]:  # in a forked child, closing would free the parent's locks
            self._store.close()

    def discard(self) -> bool:
        """Undo this open's creation of an index that holds no document (an ingest that
        skipped every record), in the write section: another writer's document keeps it,
        and a later write finds no manifest (:meth:`Writer.add_documents`)."""
        if self.created:
            with self._store.write_section():
                if next(iter(self._store.iter_docs()), None) is None:
                    drop_manifest(self._store, self.params.idf)
                    return True
        return False

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        elif self._forks == _FORKS[0]:  # the store may be what failed: do not mask it
            self._held.close()

    def to_text(self, raw: str | bytes, fmt: str = "auto") -> str:
        """``raw`` (a text, or an HTML page) as ingest fingerprints it (the index's HTML
        mode), so ``index.query(index.to_text(page))`` finds an ingested page."""
        return to_text(raw, fmt, html=self.params.html)

    @property
    def fingerprinter(self) -> Fingerprinter:
        """Built on first use: jieba takes ~1 s to load, fingerprint-only work skips it."""
        if self._fingerprinter is None:
            load_idf(self._store, self.params.idf, self.url)
            check_environment(self.manifest, self.params, self.url)
            self._fingerprinter = Fingerprinter(self.params)
        return self._fingerprinter

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

    def sole_writer(
        self, job: str, wait: float = 0.0, key: str = "index"
    ) -> AbstractContextManager[None]:
        """Hold lock ``key`` (an ingest: its checkpoint's; ``index``: the whole index's)
        till the block ends: a second job of that key gets :class:`IndexBusy` naming the
        holder after ``wait`` s; other keys and readers never wait (:meth:`Store.run_lock`)."""
        return self._store.run_lock(job, wait, key)

    def add(
        self,
        doc_id: str,
        text: str,
        meta: dict[str, Any] | None = None,
        *,
        store_text: bool = False,
        time: Time = None,
    ) -> int:
        """Index ``text`` under ``doc_id`` (replacing an earlier version; ``time``: when it
        arrived, RFC 3339 or epoch seconds, default now); its fingerprint. A bad record raises
        what :func:`prepare` found (:class:`InvalidInput`; no terms: :class:`EmptyDocument`)."""
        found = prepare(
            Record(doc_id, text, meta, time=None if time is None else parse_time(time)),
            Preparer(self.fingerprinter, self.minhasher),
            store_text=store_text,
        )
        if isinstance(found, BadRecord):
            raise error_for(found)
        self.add_documents([found.doc], checked=True)
        return found.doc.fingerprint

    def add_fingerprint(self, doc_id: str, fp: int, meta: dict[str, Any] | None = None) -> None:
        self.add_documents([Document(doc_id, check_fingerprint(fp), None, meta, time=now_ms())])

    def add_documents(
        self,
        docs: Sequence[Document],
        *,
        find_k: int | None = None,
        probes: Sequence[Sequence[int]] | None = None,
        checked: bool = False,
        limit: int | None = DEFAULT_LIMIT,
        before_write: Callable[[list[Lookup]], None] | None = None,
        tally: Written | None = None,
    ) -> list[Lookup]:
        """Write one batch atomically per row; with ``find_k``, each new document with
        near-copies among the held and the earlier documents of the batch, with at most
        ``limit`` of them (nearest first) and their count, handed to ``before_write`` before
        the write, and ``tally`` counting those added, replaced and held unchanged."""
        return self._writer.add_documents(
            self._store, docs, find_k, probes, checked, limit, before_write, tally
        )

    def check_and_add(
        self,
        docs: Sequence[Document],
        k: int = DEFAULT_K,
        *,
        probes: Sequence[Sequence[int]] | None = None,
        always: bool | Sequence[bool] = False,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[Matches]:
        """Each document's near-copies; those with none are new and written (and those
        ``always`` says, one flag for all or one per document), in one batch. A re-submitted
        document is a near-copy of itself; of identical submissions exactly one is new, however
        they overlap. A bad one raises :class:`BatchRefused`, and nothing is written."""
        return self._writer.check_and_add(self._store, docs, k, probes, always, limit)

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
        """``raw`` as the document :meth:`check_and_add` takes, and its probe list: pure CPU
        (extraction, fingerprint, sketch), so another process may run it on an index opened
        read-only there. A bad id or text raises :class:`InvalidInput` (or EmptyDocument)."""
        found = prepare(
            Record(doc_id, raw),
            Preparer(self.fingerprinter, self.minhasher, probes),
            fmt=fmt,
        )
        if isinstance(found, BadRecord):
            raise error_for(found)
        return found.doc, found.probes

    def remove(self, doc_id: str) -> bool:
        """Delete a document and all its index cells; False if it was not there."""
        return bool(self.remove_many([doc_id]))

    def remove_many(self, doc_ids: Iterable[str], *, batch_size: int = REMOVE_BATCH) -> list[str]:
        return self._writer.remove_many(self._store, doc_ids, batch_size)

    def write_cells(
        self,
        *,
        put: Sequence[IndexCell] = (),
        delete: Sequence[IndexCell] = (),
        drop_rows: Sequence[str] = (),
    ) -> None:
        """Raw cell edits, deletions first, and docs rows dropped outright (damaged
        ones found by ``verify``): for ``verify --repair`` and tests only."""
        self._writer.write_cells(self._store, put, delete, drop_rows)

    def cells(self, docs: Sequence[Document]) -> list[IndexCell]:
        """The index cells (row key, id) that ``docs`` own: the pigeonhole's under
        this scheme, and the LSH bands of those that have band keys."""
        return self._writer.cells(docs)

    def bulk_load(self, docs: Iterable[Document], *, batch_size: int = BULK_BATCH) -> int:
        """Fill an empty embedded index with ``docs`` (unique ids), every page written
        once, full (docs/embedded.md): the documents loaded. :class:`StoreError` if
        it holds documents; :class:`InvalidInput` on HBase (:meth:`Store.load`)."""
        return self._writer.bulk_load(self._store, docs, batch_size)

    def compact(self, on_part: Callable[[int, int, int], None] | None = None) -> int:
        """Merge an embedded index's fresh tier into its main one now, so that each
        query reads one tier (docs/embedded.md, "Two tiers"; ingest merges as the
        tier grows): the index cells moved. See :meth:`Store.merge_fresh`."""
        with gc_paused():  # the buckets of a key range at a time: see gc_paused
            return int(self._store.merge_fresh(on_part))

    def warm(self) -> int:
        """Map an embedded index's file into this process now: a reader serving many
        queries then pays no page faults (docs/embedded.md, "Warm readers")."""
        return int(self._store.warm())

    def get(self, doc_id: str) -> Document | None:
        return self.get_many([doc_id]).get(doc_id)

    def get_many(self, doc_ids: Sequence[str]) -> dict[str, Document]:
        """Documents by id (those held); ids that could not be stored are not held."""
        for doc_id in doc_ids:
            codec.encode_doc_id(doc_id)
        return self._store.get_docs(doc_ids)

    def documents(self, on_corrupt: OnCorrupt = None, key_range: KeyRange = WHOLE) -> DocStream:
        """Every document (of ``key_range``: :meth:`key_ranges`), in id order; a damaged row
        raises, or goes to ``on_corrupt(id, error)`` (:class:`StoreCorrupt`) and is skipped."""
        return self._store.iter_docs(on_corrupt, key_range)

    def index_cells(self, key_range: KeyRange = WHOLE) -> Iterator[IndexCell]:
        return self._store.iter_index(key_range)  # in row key order

    def key_ranges(self, table: str) -> list[KeyRange] | None:
        return self._store.key_ranges(table)  # docs or index: HBase's regions

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
        return self.query_probed([fps], k, limit=limit, sketches=[keys_of(sig)])[0]

    def query_fingerprint(
        self, fp: int, k: int = DEFAULT_K, *, limit: int | None = DEFAULT_LIMIT
    ) -> Matches:
        return self._finder.find(self._store, [[fp]], k, limit, alone=True)[0]

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
            keys = [keys_of(self.signature(t)) for t in chunk] if self.lsh else None
            results += self.query_probed(lists, k, limit=limit, sketches=keys)  # type: ignore[arg-type]
        return results

    def query_fingerprints(
        self, fps: Sequence[int], k: int = DEFAULT_K, *, limit: int | None = DEFAULT_LIMIT
    ) -> list[Matches]:
        """Exact for k <= the scheme's k: each result keeps its ``limit`` nearest
        (distance, then id) and the count; :meth:`query_probed` without probes, on
        the shortest path (the hot path, compared with FAISS in issue #13)."""
        return self._finder.find(self._store, [[fp] for fp in fps], k, limit)

    def query_probed(
        self,
        probe_lists: Sequence[Sequence[int]],
        k: int = DEFAULT_K,
        *,
        limit: int | None = DEFAULT_LIMIT,
        sketches: Sequence[SketchKeys] | None = None,
    ) -> list[Matches]:
        """Multi-probe queries: each a fingerprint followed by its probes; ``sketches``
        (per query: its sketch and band keys, or (None, None)) adds the LSH net. See
        :meth:`~simhash_hbase.index.lookup.Finder.find`."""
        return self._finder.find(self._store, probe_lists, k, limit, sketches)

    def candidates(self, fps: Sequence[int]) -> list[list[IndexCell]]:
        """Every cell the pigeonhole scans of each fingerprint find (unfiltered)."""
        return self._store.scan_prefixes_many(self._finder.prefixes(fps))

    def stats(self, counts: bool = True) -> dict[str, Any]:
        stats, scheme = self._store.stats(counts), self.scheme
        docs = stats.get("documents") or 0
        stats.update(scheme=scheme.name, rows_per_fingerprint=scheme.rows_per_fingerprint)
        stats.update(exact_for_k=scheme.k, fingerprint=self.manifest["fingerprint"])
        if self.retain is not None:
            stats[RETAIN] = self.retain
        if docs and "disk_bytes" in stats:
            stats["disk_bytes_per_document"] = round(stats["disk_bytes"] / docs, 1)
        return stats
