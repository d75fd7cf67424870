"""The cluster a document added to an index joins (docs/nets.md, "Clusters").

The rule of :func:`~simhash_hbase.layout.pairs.stars` (``shdb dedup --clusters``),
one document at a time: a document identical to a held one (same fingerprint and
sketch) takes its cluster; else it joins the representative among its matches with
the highest estimated similarity (then the smaller distance, then the smaller id);
else it represents a cluster of its own. The cluster is kept in the document's
docs row (``f:c``, docs/SPEC.md; absent: its own), so every process and every
restart gives the same id. It is chosen among the matches the lookup returns (the
``limit`` nearest): a representative further down is not seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from simhash_hbase.records import Document, Matches
from simhash_hbase.store.base import Store


def assign(
    store: Store, docs: Sequence[Document], found: Sequence[Matches | None]
) -> list[Document]:
    """``docs`` (in the order they are written) with their clusters; each one's
    ``Matches.cluster`` set. ``found`` None: re-added unchanged (its held cluster
    stays). Reads the docs rows of the held matches (their clusters and sketches)."""
    wanted = {m.doc_id for matches in found if matches for m in matches}
    wanted |= {d.doc_id for d, matches in zip(docs, found) if matches is None}
    held = store.get_docs(sorted(wanted)) if wanted else {}
    earlier: dict[str, Document] = {}  # documents of this batch, as written

    def row(doc_id: str) -> Document | None:
        return earlier.get(doc_id) or held.get(doc_id)

    out = []
    for doc, matches in zip(docs, found):
        if matches is None:
            old = held.get(doc.doc_id)
            cluster = doc.doc_id if old is None else old.cluster or doc.doc_id
        else:
            cluster = _pick(doc, matches, row)
            matches.cluster = cluster
        done = dataclasses.replace(doc, cluster=None if cluster == doc.doc_id else cluster)
        earlier[doc.doc_id] = done
        out.append(done)
    return out


def _pick(doc: Document, matches: Matches, row: Callable[[str], Document | None]) -> str:
    def cluster_of(doc_id: str) -> str:
        held = row(doc_id)
        return doc_id if held is None or held.cluster is None else held.cluster

    for m in matches:  # nearest first: a copy's cluster is its own
        held = row(m.doc_id)
        if held is not None and (held.fingerprint, held.sketch) == (doc.fingerprint, doc.sketch):
            return cluster_of(m.doc_id)
    heads = [m for m in matches if cluster_of(m.doc_id) == m.doc_id]
    if not heads:
        return doc.doc_id
    best = min(
        heads, key=lambda m: (2.0 if m.similarity is None else -m.similarity, m.distance, m.doc_id)
    )
    return best.doc_id


def kept(doc: Document, held: Document | None) -> Document:
    """``doc`` as written over ``held``, its id's held version: written again unchanged
    (same fingerprint and sketch) without a cluster of its own (a plain add, a resumed
    ingest's batch written again), it keeps the held one's, as :func:`assign` would."""
    if doc.cluster is not None or held is None or held.cluster is None:
        return doc
    if (held.fingerprint, held.sketch) != (doc.fingerprint, doc.sketch):
        return doc
    return dataclasses.replace(doc, cluster=held.cluster)
