"""A stream of records as prepared documents, in chunks and in input order: the
reading half of ``shdb ingest`` and ``shdb dedup``.

Each record goes through :func:`~simhash_hbase.layout.prepare.prepare`'s two
halves: the prints of its text in ``workers`` forked processes (each distinct
text of a chunk once: mass copies cost one), then :func:`assemble` here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from simhash_hbase.errors import WorkerDied
from simhash_hbase.layout.prepare import Prepared, Preparer, Prints, assemble, screen, text_of
from simhash_hbase.records import BadRecord, Record

#: A batch of documents ends early once its records hold this many bytes of input
#: (each byte costs ~30 in memory while indexed: ~2 GB at this, whatever the count).
BATCH_BYTES = 64 * 1024 * 1024

Records = list[Record | BadRecord]


def prepared_chunks(
    records: Iterable[Record | BadRecord | tuple[Any, ...]],
    preparer: Preparer,
    workers: int,
    size: int,
    store_text: bool = False,
) -> Iterator[tuple[Records, list[Prepared | BadRecord]]]:
    """Chunks of (screened) records with each one prepared, in input order. A
    worker that dies is :class:`WorkerDied` naming the document it held."""
    pending: deque[Records] = deque()
    firsts: deque[list[int]] = deque()
    spread: deque[list[int]] = deque()
    texts = _distinct(_texts(records, size, pending), firsts, spread)
    prints = _spread(preparer.map(texts, workers), firsts, spread)
    for chunk, found in _with_records(prints, pending):
        yield chunk, [assemble(r, p, store_text) for r, p in zip(chunk, found)]


def _distinct(
    chunks: Iterator[list[str]], firsts: deque[list[int]], spread: deque[list[int]]
) -> Iterator[list[str]]:
    """Each chunk's distinct texts; per chunk, where each distinct text first is
    (``firsts``) and which distinct text each position holds (``spread``)."""
    for texts in chunks:
        slot: dict[str, int] = {}
        first: list[int] = []
        where = []
        for at, text in enumerate(texts):
            if text not in slot:
                slot[text] = len(first)
                first.append(at)
            where.append(slot[text])
        firsts.append(first)
        spread.append(where)
        yield list(slot)


def _spread(
    results: Iterator[list[Prints]], firsts: deque[list[int]], spread: deque[list[int]]
) -> Iterator[list[Prints]]:
    """Each chunk's results back at every position; a worker that died holding a
    distinct text is said to hold its first position."""
    given = 0
    try:
        for found in results:
            firsts.popleft()
            yield [found[d] for d in spread.popleft()]
            given += 1
    except WorkerDied as exc:
        raise WorkerDied(exc.chunk, firsts[exc.chunk - given][exc.item], exc.how) from None


def _with_records(
    results: Iterator[list[Prints]], pending: deque[Records]
) -> Iterator[tuple[Records, list[Prints]]]:
    """Each chunk of records with its results; a worker that died names the
    document it held (its id and file:line)."""
    given = 0
    try:
        for result in results:
            yield pending.popleft(), result
            given += 1
    except WorkerDied as exc:
        record = pending[exc.chunk - given][exc.item]
        name = record.where if isinstance(record, BadRecord) else repr(record.doc_id)
        if isinstance(record, Record) and record.where:
            name += f" ({record.where})"
        raise exc.naming(f"document {name}") from None


def record_chunks(
    records: Iterable[Record | BadRecord], size: int, max_bytes: int = BATCH_BYTES
) -> Iterator[Records]:
    """Chunks of ``size`` records, or fewer once they hold ``max_bytes`` of input:
    a batch's memory is then bounded by bytes too, not by count x largest document."""
    chunk: Records = []
    held = 0
    for record in records:
        chunk.append(record)
        held += record.size
        if len(chunk) >= size or held >= max_bytes:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def _texts(
    records: Iterable[Record | BadRecord | tuple[Any, ...]], size: int, pending: deque[Records]
) -> Iterator[list[str]]:
    for chunk in record_chunks(map(screen, records), size):
        pending.append(chunk)  # map() pulls a chunk before it yields its results
        yield [text_of(r) for r in chunk]
