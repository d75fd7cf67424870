"""Owner tokens of HBase docs rows (docs/SPEC.md, "Writers"): what a batch that
claims a row writes in its ``f:o`` cell, and what a token says of the version its
writer was putting. Used by :meth:`~.store._HBaseBatch.claim_docs`."""

from __future__ import annotations

from collections.abc import Mapping

from simhash_hbase.layout import codec
from simhash_hbase.records import Document

NONCE_BYTES = 8
INTENT_AT = 8 + NONCE_BYTES  # an owner token: stamp, nonce, then the version it writes


def owner_token(ts: int, nonce: bytes, doc: Document | None) -> bytes:
    """An owner token: the owning batch's put timestamp and nonce, then the
    fingerprint and band keys of the version it writes (none: a removal)."""
    token = ts.to_bytes(8, "big") + nonce
    if doc is not None:
        token += codec.fingerprint_to_bytes(doc.fingerprint) + (doc.bands or b"")
    return token


def unfinished(
    replaced: list[tuple[str, bytes]],
    intents: Mapping[str, Document | None],
    held: dict[bytes, Document | None],
) -> list[Document]:
    """The versions named by the tokens a batch claimed over whose cells are not
    dealt with otherwise: not the version held (the caller deletes its cells) nor
    the one the batch writes (its cells are put again)."""
    out = []
    for doc_id, token in replaced:
        doc = _intent(doc_id, token)
        if doc is None:
            continue
        others = (intents[doc_id], held.get(codec.encode_doc_id(doc_id)))
        if all(
            o is None or (o.fingerprint, o.bands) != (doc.fingerprint, doc.bands) for o in others
        ):
            out.append(doc)
    return out


def _intent(doc_id: str, token: bytes) -> Document | None:
    """The version an owner token says its batch writes (None: a removal)."""
    if len(token) < INTENT_AT + 8:
        return None
    fp = codec.fingerprint_from_bytes(token[INTENT_AT : INTENT_AT + 8])
    return Document(doc_id, fp, bands=token[INTENT_AT + 8 :] or None)
