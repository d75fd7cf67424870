"""The client API: a near-duplicate index over any store.

with SimhashIndex.open("shdb-index") as index:
    index.add("doc-1", text)
    index.query(other_text, k=3)   # [Match(doc_id, fingerprint, distance)]
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

import numpy as np

from . import codec
from .dedup import near_duplicate_pairs
from .errors import EmptyDocument, InvalidInput
from .fingerprint import Fingerprinter, FingerprintParams
from .manifest import (
    MANIFEST,
    build_manifest,
    check_format,
    check_params,
    resolve_scheme,
    stored_params,
)
from .records import Document, Match
from .scheme import DEFAULT_SCHEME, Scheme, get_scheme
from .store import IndexCell, Store, open_store

DEFAULT_BATCH_SIZE = 1000
DEFAULT_K = 3
_SCALAR_MAX = 4  # below this many fingerprints, plain Python beats NumPy
# Precomputed fingerprints are ~100 bytes a record: batch at least this many, so a
# store writes few large sorted transactions (LMDB at 1 M: ~7x faster than 1,000).
_FINGERPRINT_BATCH = 50_000


class Record(NamedTuple):
    """One input document; ``where`` names its origin (file:line) for messages."""

    doc_id: str
    text: str
    meta: dict[str, Any] | None = None
    where: str = ""
    size: int = 0


class BadRecord(NamedTuple):
    """An input record that could not even be read; it is skipped or fails the run."""

    where: str
    reason: str
    size: int = 0


class Duplicate(NamedTuple):
    """A near-duplicate found while ingesting: ``doc_id`` is the new document."""

    doc_id: str
    existing_id: str
    distance: int


@dataclass
class IngestSummary:
    records: int = 0  # read from the input, good and bad
    added: int = 0
    duplicates: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    bytes_read: int = 0
    seconds: float = 0.0
    resumed_after: int = 0  # records an earlier, interrupted run had already done

    @property
    def docs_per_second(self) -> float:
        return self.added / self.seconds if self.seconds > 0 else 0.0


class SimhashIndex:
    """Pigeonhole SimHash index over a :class:`Store` (embedded LMDB or HBase)."""

    def __init__(
        self,
        store: Store,
        scheme: Scheme,
        manifest: dict[str, Any],
        params: FingerprintParams,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.store = store
        self.scheme = scheme
        self.manifest = manifest
        self.batch_size = batch_size
        self._params = params
        self._fingerprinter: Fingerprinter | None = None
        self._unreconciled: list[Document] = []

    # -- opening ----------------------------------------------------------------
    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        create: bool = True,
        scheme: str | None = None,
        params: FingerprintParams | None = None,
        idf_path: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        readonly: bool = False,
    ) -> SimhashIndex:
        """Open (or create) the index at ``url``; a manifest mismatch is an error.

        ``params``/``scheme`` left as None adopt what the index was built with.
        ``readonly`` creates nothing and takes no write locks (queries, stats).
        """
        create = create and not readonly
        store = open_store(url, create=create, readonly=readonly)
        try:
            return cls._from_store(store, create, scheme, params, idf_path, batch_size)
        except BaseException:
            store.close()
            raise

    @classmethod
    def _from_store(
        cls,
        store: Store,
        create: bool,
        scheme_name: str | None,
        params: FingerprintParams | None,
        idf_path: str | None,
        batch_size: int,
    ) -> SimhashIndex:
        stored = store.get_meta(MANIFEST)
        if stored is None:
            if not create:
                raise InvalidInput(f"{store.url} holds no shdb index manifest")
            scheme = get_scheme(scheme_name or DEFAULT_SCHEME)
            params = params or FingerprintParams(idf_path=idf_path)
            stored = build_manifest(scheme, params)
            store.put_meta(MANIFEST, stored)
            return cls(store, scheme, stored, params, batch_size=batch_size)
        check_format(stored, store.url)
        scheme = resolve_scheme(stored, scheme_name, store.url)
        if params is not None:
            check_params(stored, params, store.url)
        else:
            params = stored_params(stored, idf_path)
        return cls(store, scheme, stored, params, batch_size=batch_size)

    def close(self) -> None:
        try:
            self.reconcile()
        finally:
            self.store.close()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # the store may be what failed: do not mask the error with another
            self.store.close()

    @property
    def fingerprinter(self) -> Fingerprinter:
        """Built on first use: jieba takes ~1 s to load, fingerprint-only work skips it."""
        if self._fingerprinter is None:
            check_params(self.manifest, self._params, self.store.url)
            self._fingerprinter = Fingerprinter(self._params)
        return self._fingerprinter

    def fingerprint(self, text: str) -> int:
        return self.fingerprinter.fingerprint(text)

    # -- writing ----------------------------------------------------------------
    def add(
        self,
        doc_id: str,
        text: str,
        meta: dict[str, Any] | None = None,
        *,
        store_text: bool = False,
    ) -> int:
        """Index ``text`` under ``doc_id`` (replacing an earlier version); its fingerprint."""
        if not isinstance(text, str):
            raise InvalidInput(f"the text of {doc_id!r} is a {type(text).__name__}, not a string")
        fp = self.fingerprint(text)
        self.add_documents([Document(doc_id, fp, text if store_text else None, meta)])
        return fp

    def add_fingerprint(self, doc_id: str, fp: int, meta: dict[str, Any] | None = None) -> None:
        self.add_documents([Document(doc_id, _check_fingerprint(fp), None, meta)])

    def add_documents(
        self, docs: Sequence[Document], *, find_k: int | None = None
    ) -> list[Duplicate]:
        """Write one batch atomically per row; near-duplicates already held if ``find_k``.

        Order matters for crash safety: stale cells go first, then new cells, then
        the docs row, so a docs row never points at cells that are not there.
        """
        latest = {d.doc_id: d for d in docs}  # the same id twice: the last one wins
        found = self._find_at_insert(list(latest.values()), find_k) if find_k is not None else []
        # The previous batch is re-checked with the same read (see reconcile()).
        previous = [d for d in self._unreconciled if d.doc_id not in latest]
        with self.store.batch() as batch:
            state = batch.get_docs([*latest, *(d.doc_id for d in previous)])
            changed = [
                state[i]
                for i in latest
                if i in state and state[i].fingerprint != latest[i].fingerprint
            ]
            batch.delete_index(self.cells(changed))
            batch.put_index(self.cells(list(latest.values())))
            batch.put_docs(latest.values())
            batch.delete_index(self.cells(_replaced(previous, state)))
        if not self.store.atomic_batches:
            self._unreconciled = list(latest.values())
        return found

    def reconcile(self) -> None:
        """Drop this process's cells of documents another writer replaced meanwhile.

        HBase is atomic per row only: two processes re-adding one id at once both
        delete the cells they saw, and the loser's new cells would stay behind.
        Each batch is re-checked when the next batch reads its old versions (by
        then the other writer's docs row has landed), and at close. Queries never
        show such cells regardless: hits are confirmed against the docs row.
        """
        written, self._unreconciled = self._unreconciled, []
        if written:
            state = self.store.get_docs([d.doc_id for d in written])
            with self.store.batch() as batch:
                batch.delete_index(self.cells(_replaced(written, state)))

    def add_many(
        self,
        records: Iterable[Record | BadRecord | tuple[Any, ...]],
        *,
        workers: int = 1,
        store_text: bool = False,
        find_k: int | None = None,
        on_error: str = "skip",
        on_duplicate: Callable[[Duplicate], None] | None = None,
        on_progress: Callable[[IngestSummary], None] | None = None,
    ) -> IngestSummary:
        """Fingerprint and index a stream in batches; bad records are skipped or fatal.

        With ``on_error="fail"`` the valid records read before the bad one are
        still written, then :class:`InvalidInput` is raised naming the record.
        """
        stream = (_as_record(r) for r in records)
        chunks = (
            (
                [_to_document(record, fp, store_text) for record, fp in zip(chunk, fps)],
                sum(record.size for record in chunk),
            )
            for chunk, fps in fingerprint_chunks(
                stream, self.fingerprinter, workers, self.batch_size
            )
        )
        return self._write_stream(chunks, find_k, on_error, on_duplicate, on_progress)

    def add_fingerprints(
        self,
        items: Iterable[tuple[str, int] | BadRecord],
        *,
        find_k: int | None = None,
        on_error: str = "skip",
        on_duplicate: Callable[[Duplicate], None] | None = None,
        on_progress: Callable[[IngestSummary], None] | None = None,
    ) -> IngestSummary:
        """Like :meth:`add_many`, for precomputed (id, fingerprint) pairs."""
        size = max(self.batch_size, _FINGERPRINT_BATCH)
        chunks = (
            ([i if isinstance(i, BadRecord) else _checked(Document(*i)) for i in chunk], 0)
            for chunk in _chunks(iter(items), size)
        )
        return self._write_stream(chunks, find_k, on_error, on_duplicate, on_progress)

    def _write_stream(
        self,
        chunks: Iterable[tuple[list[Document | BadRecord], int]],
        find_k: int | None,
        on_error: str,
        on_duplicate: Callable[[Duplicate], None] | None,
        on_progress: Callable[[IngestSummary], None] | None,
    ) -> IngestSummary:
        if on_error not in ("skip", "fail"):
            raise InvalidInput(f"on_error must be 'skip' or 'fail', not {on_error!r}")
        if find_k is not None:
            self.scheme.check_k(find_k)
        summary = IngestSummary()
        started = time.perf_counter()
        for chunk, nbytes in chunks:
            summary.bytes_read += nbytes
            docs, failure = _split(chunk, summary, on_error)
            for dup in self.add_documents(docs, find_k=find_k):
                summary.duplicates += 1
                if on_duplicate is not None:
                    on_duplicate(dup)
            summary.added += len(docs)
            summary.seconds = time.perf_counter() - started
            if on_progress is not None:
                on_progress(summary)
            if failure is not None:
                raise failure
        summary.seconds = time.perf_counter() - started
        return summary

    def remove(self, doc_id: str) -> bool:
        """Delete a document and all its index cells; False if it was not there."""
        with self.store.batch() as batch:
            old = batch.get_docs([doc_id]).get(doc_id)
            if old is None:
                return False
            batch.delete_index(self.cells([old]))
            batch.delete_docs([doc_id])
        return True

    def cells(self, docs: Sequence[Document]) -> list[IndexCell]:
        """The index cells (row key, id) that ``docs`` own under this scheme."""
        if not docs:
            return []
        fps = np.fromiter((d.fingerprint for d in docs), dtype=np.uint64, count=len(docs))
        keys = codec.encode_rowkeys_many(fps, self.scheme.fields_many(fps))
        ids = [d.doc_id for d in docs for _ in range(self.scheme.rows_per_fingerprint)]
        return list(zip(keys, ids))

    # -- reading ----------------------------------------------------------------
    def get(self, doc_id: str) -> Document | None:
        return self.store.get_docs([doc_id]).get(doc_id)

    def query(self, text: str, k: int = DEFAULT_K) -> list[Match]:
        return self.query_fingerprint(self.fingerprint(text), k)

    def query_fingerprint(self, fp: int, k: int = DEFAULT_K) -> list[Match]:
        return self.query_fingerprints([fp], k)[0]

    def query_many(
        self, texts: Iterable[str], k: int = DEFAULT_K, *, workers: int = 1
    ) -> list[list[Match]]:
        """Queries in bulk: one round of scans and one multi-get per batch."""
        self.scheme.check_k(k)
        results: list[list[Match]] = []
        for chunk in _chunks(iter(texts), self.batch_size):
            (fps,) = self.fingerprinter.map([chunk], workers)
            for fp in fps:
                if isinstance(fp, EmptyDocument):
                    raise fp
            results += self.query_fingerprints(fps, k)  # type: ignore[arg-type]
        return results

    def query_fingerprints(self, fps: Sequence[int], k: int = DEFAULT_K) -> list[list[Match]]:
        """Exact for k <= the scheme's k: the pigeonhole scans, then a Hamming filter.

        Hits are confirmed against the docs table, so a cell left behind by an
        interrupted write never surfaces as a wrong fingerprint.
        """
        self.scheme.check_k(k)
        fps = [_check_fingerprint(fp) for fp in fps]
        prefixes = self._prefixes(fps)
        hits: list[dict[tuple[str, int], int]] = []
        for fp, cells in zip(fps, self.store.scan_prefixes_many(prefixes)):
            near: dict[tuple[str, int], int] = {}
            for row, doc_id in cells:
                cand = int.from_bytes(row[5:13], "big")
                dist = (cand ^ fp).bit_count()
                if dist <= k:
                    near[(doc_id, cand)] = dist
            hits.append(near)
        if self.store.atomic_batches:
            # Cells and their docs row commit in one transaction: no cell can
            # disagree with its document, so the confirming read is not needed.
            return [_ranked((doc_id, fp, dist) for (doc_id, fp), dist in n.items()) for n in hits]
        return self._confirm(hits)

    def _prefixes(self, fps: Sequence[int]) -> list[list[bytes]]:
        terms = self.scheme.prefix_terms
        if len(fps) <= _SCALAR_MAX and terms:  # NumPy's per-call cost would dominate
            return [codec.encode_prefixes(fp, terms) for fp in fps]
        return codec.encode_prefixes_many(self.scheme.fields_many(np.array(fps, dtype=np.uint64)))

    def _confirm(self, hits: list[dict[tuple[str, int], int]]) -> list[list[Match]]:
        ids = {doc_id for near in hits for doc_id, _ in near}
        docs = self.store.get_docs(sorted(ids)) if ids else {}
        return [
            _ranked(
                (doc_id, fp, dist)
                for (doc_id, fp), dist in near.items()
                if doc_id in docs and docs[doc_id].fingerprint == fp
            )
            for near in hits
        ]

    def _find_at_insert(self, docs: list[Document], k: int) -> list[Duplicate]:
        """Near-copies of each new doc among held docs and earlier docs of this batch."""
        found: list[Duplicate] = []
        held = self.query_fingerprints([d.fingerprint for d in docs], k)
        fps = np.fromiter((d.fingerprint for d in docs), dtype=np.uint64, count=len(docs))
        earlier: dict[int, list[tuple[int, int]]] = {}  # pigeonhole pairs: no n x n matrix
        for i, j, dist in near_duplicate_pairs(fps, k, self.scheme):
            earlier.setdefault(j, []).append((i, dist))
        for i, doc in enumerate(docs):
            for match in held[i]:
                if match.doc_id != doc.doc_id:
                    found.append(Duplicate(doc.doc_id, match.doc_id, match.distance))
            for j, dist in earlier.get(i, ()):
                found.append(Duplicate(doc.doc_id, docs[j].doc_id, dist))
        return found

    def stats(self) -> dict[str, Any]:
        stats = self.store.stats()
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


def _ranked(hits: Iterable[tuple[str, int, int]]) -> list[Match]:
    """Matches nearest first, then by id."""
    return [Match(doc_id, fp, dist) for doc_id, fp, dist in sorted(hits, key=_by_distance)]


def _by_distance(hit: tuple[str, int, int]) -> tuple[int, str]:
    return hit[2], hit[0]


def _replaced(written: Sequence[Document], state: dict[str, Document]) -> list[Document]:
    """Those of ``written`` whose docs row now holds another fingerprint, or none."""
    return [
        d for d in written if getattr(state.get(d.doc_id), "fingerprint", None) != d.fingerprint
    ]


def _check_fingerprint(fp: int) -> int:
    if not isinstance(fp, int) or not 0 <= fp < 1 << 64:
        raise InvalidInput(f"fingerprint {fp!r} is not an unsigned 64-bit integer")
    return fp


def _as_record(item: Record | BadRecord | tuple[Any, ...]) -> Record | BadRecord:
    if isinstance(item, (Record, BadRecord)):
        return item
    if isinstance(item, Document):
        raise InvalidInput(
            "add_many takes (id, text[, meta]) records; use add_documents for Documents"
        )
    if not isinstance(item, tuple) or len(item) not in (2, 3):
        raise InvalidInput(f"add_many takes (id, text[, meta]) tuples, got {item!r:.80}")
    return Record(*item)


def _to_document(
    record: Record | BadRecord, fp: int | EmptyDocument, store_text: bool
) -> Document | BadRecord:
    """A fingerprinted record as a Document, or why it cannot be one."""
    if isinstance(record, BadRecord):
        return record
    if not isinstance(record.text, str):
        reason = f"the text of {record.doc_id!r} is a {type(record.text).__name__}, not a string"
    elif isinstance(fp, EmptyDocument):
        reason = (
            f"document {record.doc_id!r} has no usable terms "
            "(empty, whitespace or punctuation only)"
        )
    else:
        doc = Document(record.doc_id, fp, record.text if store_text else None, record.meta)
        return _checked(doc, record.where)
    return BadRecord(record.where, reason)


def _checked(doc: Document, where: str = "") -> Document | BadRecord:
    """The document, or a BadRecord if its id breaks SPEC.md's rules."""
    try:
        codec.encode_doc_id(doc.doc_id)
        _check_fingerprint(doc.fingerprint)
    except InvalidInput as exc:
        return BadRecord(where or repr(doc.doc_id)[:60], str(exc))
    return doc


def _split(
    chunk: list[Document | BadRecord], summary: IngestSummary, on_error: str
) -> tuple[list[Document], InvalidInput | None]:
    """The chunk's documents up to the first bad record (``fail``), or all of them."""
    docs: list[Document] = []
    for item in chunk:
        summary.records += 1
        if isinstance(item, BadRecord):
            summary.skipped.append((item.where, item.reason))
            if on_error == "fail":
                return docs, InvalidInput(f"{item.where}: {item.reason}")
        else:
            docs.append(item)
    return docs, None


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(items, size)):
        yield chunk


def _text_of(record: Record | BadRecord) -> str:
    return record.text if isinstance(record, Record) and isinstance(record.text, str) else ""


def fingerprint_chunks(
    records: Iterable[Record | BadRecord], fingerprinter: Fingerprinter, workers: int, size: int
) -> Iterator[tuple[list[Record | BadRecord], list[int | EmptyDocument]]]:
    """Chunks of records with their fingerprints, in input order (``workers`` processes)."""
    pending: deque[list[Record | BadRecord]] = deque()

    def texts() -> Iterator[list[str]]:
        for chunk in _chunks(iter(records), size):
            pending.append(chunk)  # map() pulls a chunk before it yields its fps
            yield [_text_of(r) for r in chunk]

    for fps in fingerprinter.map(texts(), workers):
        yield pending.popleft(), fps
