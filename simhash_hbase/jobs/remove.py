"""Bulk removal (``shdb remove --ids/--before/--id-prefix``): the documents chosen,
removed with all their cells in batches (:meth:`SimhashIndex.remove_many`).

Removing is idempotent, so a run cut short (a kill, a lost store) needs no
checkpoint: running it again removes what is left and counts the rest as gone.
Each batch is written as docs/lifecycle.md says (embedded: one transaction; HBase:
rows claimed, cells deleted, then docs rows), so a cut never leaves a cell that a
query counts without its document, and never touches a document not chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import IO

from simhash_hbase.errors import InvalidInput
from simhash_hbase.faults import fault
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.index.write import REMOVE_BATCH
from simhash_hbase.store.base import oldest_before


@dataclass
class RemoveSummary:
    asked: int = 0  # ids given or chosen
    removed: int = 0  # of them, held and removed (the rest were not held)


def id_lines(f: IO[str], name: str) -> Iterator[str]:
    """The ids of a file, one a line (blank lines skipped; the line end is not part
    of the id, other spaces are)."""
    for lineno, line in enumerate(f, 1):
        doc_id = line.rstrip("\r\n")
        if not doc_id:
            continue
        if not doc_id.isascii() and any("\udc80" <= c <= "\udcff" for c in doc_id):
            raise InvalidInput(f"{name}:{lineno}: the id is not UTF-8; ids are UTF-8 text")
        yield doc_id


def chosen(
    index: SimhashIndex, *, before: int | None = None, id_prefix: str | None = None
) -> list[str]:
    """The ids of the documents that arrived before ``before`` (ms since the epoch;
    a document without a time is never chosen) and whose id starts with
    ``id_prefix``, oldest first (ties by id): read whole before any is removed, so
    a run cut short has removed the oldest of them (what an expiry wants kept
    last goes last), and its re-run chooses the rest."""
    if before is None and id_prefix is None:
        raise InvalidInput("choose the documents to remove: ids, a time or an id prefix")
    docs = (d for d in index.documents() if id_prefix is None or d.doc_id.startswith(id_prefix))
    if before is not None:
        return oldest_before(docs, before)
    return [doc_id for _, doc_id in sorted((d.time or 0, d.doc_id) for d in docs)]


def remove_ids(
    index: SimhashIndex,
    doc_ids: Iterable[str],
    *,
    batch_size: int = REMOVE_BATCH,
    on_batch: Callable[[RemoveSummary], None] | None = None,
) -> RemoveSummary:
    """Remove ``doc_ids`` a batch at a time; ``on_batch`` sees the counts so far,
    after each batch is written (a progress bar; what a stop has kept)."""
    summary = RemoveSummary()
    items = iter(doc_ids)
    while chunk := list(islice(items, batch_size)):
        summary.asked += len(chunk)
        summary.removed += len(index.remove_many(chunk, batch_size=batch_size))
        fault("removed")
        if on_batch is not None:
            on_batch(summary)
    return summary
