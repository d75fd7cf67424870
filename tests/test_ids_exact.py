"""Ids are exact (issue 22.3): no two distinct ids ever share a key, in either
store, and ``verify`` reports a row held under a key that is not its own.

The embedded store folds keys longer than LMDB's limit to a head and a digest;
the ids generated here sit around that limit, differ only at their ends, and
include the crafted kind: an id whose bytes are another id's folded key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import InvalidInput, SimhashIndex
from simhash_hbase.jobs.verify import verify
from simhash_hbase.layout import codec
from simhash_hbase.records import Document
from simhash_hbase.store.lmdb.columns import _encode_id, fold_key, pack_columns
from simhash_hbase.store.lmdb.store import EmbeddedStore

LIMIT = 511  # LMDB's key limit (the embedded store reads it from LMDB)
KEY_LENGTHS = st.integers(LIMIT - 40, LIMIT + 40)


def _crafted(raw: bytes) -> str:
    """The id whose bytes are ``raw`` (surrogates stand for bytes that are not
    UTF-8, as the store maps them back: the crafted 511-byte id of the issue)."""
    return raw.decode("utf-8", "surrogateescape")


@st.composite
def near_ids(draw: st.DrawFn) -> list[str]:
    """Ids around the key limit that share long heads and differ at the tail, or
    are the folded key of another (docs row key, or index key without its row)."""
    head = draw(st.sampled_from(["a", "é", "海", "\x00", "😀"]))
    size = draw(KEY_LENGTHS)
    stem = (head * LIMIT).encode()[: size - 4].decode("utf-8", "ignore")
    ids = [stem + tail for tail in draw(st.lists(st.text("ab\x00é", max_size=4), min_size=1))]
    row = codec.encode_rowkey(1, 1, 0)
    for doc_id in list(ids):
        raw = _encode_id(doc_id)
        ids.append(_crafted(fold_key(raw, LIMIT)[0]))
        ids.append(_crafted(fold_key(row + raw, LIMIT)[0][len(row) :]))
    return list(dict.fromkeys(ids))


@given(st.binary(min_size=LIMIT - 2, max_size=LIMIT + 2), KEY_LENGTHS)
def test_a_folded_key_is_never_another_keys_own_bytes(key: bytes, size: int) -> None:
    folded, was_folded = fold_key(key, LIMIT)
    assert was_folded == (len(key) >= LIMIT)
    assert (len(folded) == LIMIT) == was_folded  # only a fold is LIMIT bytes long
    crafted = folded[:size]
    if crafted != key:
        assert fold_key(crafted, LIMIT)[0] != folded


@given(ids=near_ids(), text=st.booleans())
def test_distinct_ids_never_share_a_key(
    tmp_path_factory: pytest.TempPathFactory, ids: list[str], text: bool
) -> None:
    """Written straight to the store (crafted ids are not valid UTF-8): every id
    reads back as itself, with its own fingerprint, text and index cells."""
    folder = tmp_path_factory.mktemp("ids")
    docs = [
        Document(doc_id, i * 0x0101_0101 + 1, f"t{i}" if text else None)
        for i, doc_id in enumerate(ids)
    ]
    row = codec.encode_rowkey(1, 1, 0)
    with EmbeddedStore(str(folder), create=True) as store:
        with store.batch() as batch:
            batch.put_docs(docs)
            batch.put_index([(row, d.doc_id) for d in docs])
        assert store.get_docs(ids) == {d.doc_id: d for d in docs}
        assert sorted(d.doc_id for d in store.iter_docs()) == sorted(ids)
        assert sorted(i for _, i in store.scan_prefixes([row[: codec.PREFIX_BYTES]])) == sorted(ids)


@given(ids=near_ids())
def test_valid_near_identical_ids_through_the_index(
    tmp_path_factory: pytest.TempPathFactory, ids: list[str]
) -> None:
    valid = [i for i in ids if _valid(i)]
    with SimhashIndex.open(str(tmp_path_factory.mktemp("ix"))) as index:
        index.add_documents([Document(d, n + 1) for n, d in enumerate(valid)])
        held = index.get_many(valid)
        assert {d: held[d].fingerprint for d in held} == {d: n + 1 for n, d in enumerate(valid)}
        assert verify(index).clean


def _valid(doc_id: str) -> bool:
    try:
        codec.encode_doc_id(doc_id)
    except InvalidInput:
        return False
    return True


def test_verify_reports_a_row_held_under_another_key(tmp_path: Path) -> None:
    """A docs row of an id of exactly the key limit stored under its own bytes (as
    the older layout did, which let another id's fold replace it) is reported,
    and repair removes it and its cells."""
    legacy = "x" * LIMIT
    EmbeddedStore(tmp_path / "ix", format=1).close()  # the layout with one key per cell
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        index.add_documents([Document("ok", 7), Document(legacy, 9)])
        store = index._store
        assert isinstance(store, EmbeddedStore)
        value = pack_columns(codec.doc_to_columns(Document(legacy, 9)))
        with store._env.begin(write=True) as txn:
            txn.delete(store._format1._doc_key(legacy), db=store._docs)
            txn.put(legacy.encode(), value, db=store._docs)
        report = verify(index)
        assert not report.clean and report.corrupt_documents == 1
        assert any("not its own" in e for e in report.examples)
        verify(index, repair=True)
        assert verify(index).clean
        assert set(index.get_many(["ok", legacy])) == {"ok"}


def _boundary_ids() -> list[str]:
    """Valid ids at every length near the embedded fold limits (the docs key and
    the index key, 13 bytes shorter) and the contract's 1024, sharing their heads
    and differing only in the last character; multi-byte characters too."""
    ids = []
    for size in (*range(LIMIT - 16, LIMIT - 9), *range(LIMIT - 3, LIMIT + 3), 1020, 1024):
        for head in ("a", "海"):
            stem = (head * size).encode()[: size - 1].decode("utf-8", "ignore")
            ids += [stem + tail for tail in ("x", "y")]
    return [i for i in dict.fromkeys(ids) if len(i.encode()) <= 1024]


def test_boundary_ids_stay_distinct_in_every_store(store_url: str) -> None:
    ids = _boundary_ids()
    with SimhashIndex.open(store_url) as index:
        index.add_documents([Document(d, n + 1) for n, d in enumerate(ids)])
        held = index.get_many(ids)
        assert {d: held[d].fingerprint for d in held} == {d: n + 1 for n, d in enumerate(ids)}
        assert sorted(d.doc_id for d in index.documents()) == sorted(ids)
        assert verify(index).clean
