"""Text -> document: the one preparer every surface uses.

The library (``add``, ``prepare_text``), ``shdb ingest`` and ``shdb dedup``,
``shdb serve``, the Spark executors and the Scrapy index process all turn a
record into a storable :class:`Document` here, so a record gets the same
fingerprint, sketch and band keys, and a bad one the same :class:`BadRecord`
(the same :class:`Problem` and message), whichever door it came through.

The work is cut in two so that worker processes can do the CPU-heavy half:
:meth:`Preparer.prints` (text -> probe list, sketch and band keys; pure CPU,
what :func:`~simhash_hbase.fingerprint.workers.map_chunks` runs in forked
workers) and :func:`assemble` (those prints and the record -> the checked
document, or why it cannot be one). :func:`prepare` is both in one call.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from simhash_hbase.errors import EmptyDocument, InvalidInput, ShdbError
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams, register_idf
from simhash_hbase.layout import codec
from simhash_hbase.records import BadRecord, Document, Problem, Record, now_ms
from simhash_hbase.text.extract import to_text

#: What a text costs to prepare, computed once (in a worker, say): its probe list
#: (the fingerprint first), its sketch and band keys (None: no LSH net, or no
#: letter or digit in the text); or the message of its :class:`EmptyDocument`.
Prints = tuple[list[int], bytes | None, bytes | None] | str


class Prepared(NamedTuple):
    """A record ready to store or look up: its document and its probe list."""

    doc: Document
    probes: list[int]


@dataclass(frozen=True)
class Preparer:
    """What preparing needs of an index: its fingerprinter (and its HTML mode), its
    LSH net's MinHash (None: the pigeonhole only) and the probes a lookup wants."""

    fingerprinter: Fingerprinter
    hasher: MinHasher | None = None
    probes: int = 0

    def prints(self, text: str) -> Prints:
        """The text's probe list, sketch and band keys (or why it has none)."""
        try:
            if self.probes:
                found = self.fingerprinter.probes(text, self.probes)
            else:
                found = [self.fingerprinter.fingerprint(text)]
        except EmptyDocument as exc:
            return str(exc)
        sig = None if self.hasher is None else self.hasher.signature(text)
        if sig is None:
            return found, None, None
        return found, sig.sketch, codec.encode_bands(sig.bands)

    def prints_of(self, texts: Sequence[str], _arg: Any = None) -> list[Prints]:
        """:meth:`prints` of each text (the chunk a worker does)."""
        return [self.prints(text) for text in texts]

    def map(self, chunks: Iterable[Sequence[str]], workers: int = 1) -> Iterator[list[Prints]]:
        """:meth:`prints_of` of chunks of texts, in order, in ``workers`` forked
        processes (:mod:`simhash_hbase.fingerprint.workers`); they inherit this
        preparer, its loaded dictionary and IDF table, so none reloads them."""
        if workers <= 1:
            yield from map(self.prints_of, chunks)
            return
        from simhash_hbase.fingerprint import segment
        from simhash_hbase.fingerprint.workers import map_chunks

        if self.fingerprinter.params.features == "words":
            segment.preload()
        work = ((chunk, None) for chunk in chunks)
        yield from map_chunks(work, workers, _nothing, self.prints_of)


@functools.cache
def preparer_of(
    params: FingerprintParams, lsh: MinHashParams | None = None, idf_table: bytes | None = None
) -> Preparer:
    """The preparer of these settings, built once a process (jieba's dictionary
    takes ~1 s to load): a Spark worker runs many tasks one after another. A
    custom IDF table (``idf_table``, or one registered before) is the params'."""
    if idf_table is not None:
        register_idf(idf_table, "the job's IDF table")
    return Preparer(Fingerprinter(params), None if lsh is None else MinHasher(lsh))


def _nothing() -> None:
    """A forked worker needs no set-up: it inherited the preparer."""


def screen(item: Record | BadRecord | tuple[Any, ...]) -> Record | BadRecord:
    """A record as read, or why it cannot even be fingerprinted: its text is not a
    string of valid Unicode. Library callers may pass plain (id, text[, meta]) tuples."""
    if isinstance(item, BadRecord):
        return item
    if not isinstance(item, Record):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            return BadRecord(
                repr(item)[:60], "not an (id, text[, meta]) record", 0, Problem.INVALID
            )
        item = Record(*item)
    where = item.where or repr(item.doc_id)[:60]
    if not isinstance(item.text, str):
        reason = f"the text of {item.doc_id!r} is a {type(item.text).__name__}, not a string"
        return BadRecord(where, reason, item.size, Problem.WRONG_TYPE)
    if not item.text.isascii():
        try:
            item.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            reason = (
                f"the text of {item.doc_id!r} is not valid Unicode (a lone surrogate "
                f"{item.text[exc.start]!r} at character {exc.start}): decode its source "
                "with errors='replace'"
            )
            return BadRecord(where, reason, item.size, Problem.NOT_UTF8)
    return item


def text_of(record: Record | BadRecord) -> str:
    """What :meth:`Preparer.prints` reads of a screened record ("" for a bad one)."""
    return record.text if isinstance(record, Record) else ""


def assemble(
    record: Record | BadRecord, prints: Prints, store_text: bool = False, *, lookup: bool = False
) -> Prepared | BadRecord:
    """A screened record and its text's prints as a checked document, or why it
    cannot be one. A ``lookup`` (a text checked, never stored) needs no valid id."""
    if isinstance(record, BadRecord):
        return record
    where = record.where or repr(record.doc_id)[:60]
    if isinstance(prints, str):
        reason = (
            prints
            if lookup
            else (
                f"document {record.doc_id!r} has no usable terms "
                "(empty, or only whitespace, punctuation or stop words)"
            )
        )
        return BadRecord(where, reason, record.size, Problem.NO_TERMS)
    probes, sketch, bands = prints
    text = record.text if store_text else None
    # every stored document knows when it arrived: its input's time, else now
    when = None if lookup else now_ms() if record.time is None else record.time
    doc = Document(record.doc_id, probes[0], text, record.meta, sketch, bands, time=when)
    if lookup:
        return Prepared(doc, probes)
    found = checked(doc, where, record.size)
    return found if isinstance(found, BadRecord) else Prepared(found, probes)


def checked(doc: Document, where: str = "", size: int = 0) -> Document | BadRecord:
    """The document, or a BadRecord if it cannot be stored (id, text, meta)."""
    try:
        codec.check_document(doc)
    except InvalidInput as exc:
        problem = Problem.BAD_META if "meta" in str(exc) else Problem.BAD_ID
        problem = Problem.WRONG_TYPE if "the time of" in str(exc) else problem
        return BadRecord(where or repr(doc.doc_id)[:60], str(exc), size, problem)
    return doc


def prepare(
    item: Record | BadRecord | tuple[Any, ...] | str,
    preparer: Preparer,
    *,
    store_text: bool = False,
    fmt: str | None = None,
) -> Prepared | BadRecord:
    """A record (or a bare text: a lookup, with no id) as its :class:`Prepared`,
    or the :class:`BadRecord` saying why it cannot be indexed. With ``fmt``
    ("auto", "text", "html") the record's text is raw input, read first by
    :func:`~simhash_hbase.text.extract.to_text` in the index's HTML mode."""
    lookup = isinstance(item, str)
    record = Record("", item) if isinstance(item, str) else item
    if fmt is not None and isinstance(record, Record) and isinstance(record.text, str | bytes):
        try:
            text = to_text(record.text, fmt, html=preparer.fingerprinter.params.html)
        except InvalidInput as exc:
            return BadRecord(record.where or repr(record.doc_id)[:60], str(exc), record.size)
        record = record._replace(text=text)
    screened = screen(record)
    return assemble(screened, preparer.prints(text_of(screened)), store_text, lookup=lookup)


def error_for(bad: BadRecord) -> ShdbError:
    """The exception a library call raises for a record it cannot index:
    :class:`EmptyDocument` for no usable terms, else :class:`InvalidInput`."""
    if bad.problem is Problem.NO_TERMS:
        return EmptyDocument(bad.reason)
    return InvalidInput(bad.reason)
