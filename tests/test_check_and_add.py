"""SimhashIndex.check_and_add: one writer's answers equal a document-by-document
oracle, however the submissions are grouped into calls (the group commit of
`shdb serve` relies on that)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.errors import InvalidInput

K = 3
BASES = [0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x0F0F0F0F0F0F0F0F]

# A submission: (id number, base fingerprint, bits flipped, always written?).
submission = st.tuples(
    st.integers(0, 5),
    st.sampled_from(BASES),
    st.lists(st.integers(0, 63), max_size=5, unique=True),
    st.booleans(),
)


def _doc(n: int, base: int, flips: list[int]) -> Document:
    fp = base
    for bit in flips:
        fp ^= 1 << bit
    return Document(f"doc-{n}", fp)


def _oracle(subs: list[tuple[int, int, list[int], bool]]) -> tuple[list[list[str]], dict[str, int]]:
    """Each submission's near-copy ids, one at a time, and what is held after."""
    held: dict[str, int] = {}
    answers = []
    for n, base, flips, always in subs:
        doc = _doc(n, base, flips)
        near = sorted(i for i, fp in held.items() if (fp ^ doc.fingerprint).bit_count() <= K)
        answers.append(near)
        if always or not near:
            held[doc.doc_id] = doc.fingerprint
    return answers, held


@given(subs=st.lists(submission, max_size=12), cut=st.integers(0, 12))
def test_grouping_does_not_change_the_answers(
    tmp_path_factory: pytest.TempPathFactory,
    subs: list[tuple[int, int, list[int], bool]],
    cut: int,
) -> None:
    expected, held = _oracle(subs)
    path = tmp_path_factory.mktemp("cna") / "index"
    with SimhashIndex.open(str(path)) as index:
        answers = []
        for part in (subs[:cut], subs[cut:]):  # two calls: any split point
            docs = [_doc(n, base, flips) for n, base, flips, _ in part]
            found = index.check_and_add(docs, K, always=[a for *_, a in part])
            answers += [sorted(m.doc_id for m in matches) for matches in found]
        assert answers == expected
        assert {d.doc_id: d.fingerprint for d in index.documents()} == held


def test_identical_submissions_exactly_one_new(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "index")) as index:
        docs = [Document(f"copy-{i}", BASES[0]) for i in range(50)]
        found = index.check_and_add(docs[:20]) + index.check_and_add(docs[20:])
        assert [not matches for matches in found].count(True) == 1
        assert [d.doc_id for d in index.documents()] == ["copy-0"]


def test_resubmitting_a_document_is_not_new(tmp_path: Path) -> None:
    text = "今天北京天气晴朗，市民走出家门散步。公园里的花开得正好。"
    with SimhashIndex.open(str(tmp_path / "index")) as index:
        (first,) = index.check_and_add_texts([("a", text)], always=False)
        assert first == [] and first.total == 0
        (again,) = index.check_and_add_texts([("a", text)], always=False)
        assert [(m.doc_id, m.distance, m.similarity) for m in again] == [("a", 0, 1.0)]
        page = f"<!DOCTYPE html><html><body><article><p>{text}</p></article></body></html>"
        (html,) = index.check_and_add_texts([("b", page)])  # auto: read as a page
        assert [m.doc_id for m in html] == ["a"] and index.get("b") is not None


def test_always_flags_must_match_the_documents(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "index")) as index, pytest.raises(InvalidInput):
        index.check_and_add([Document("a", 1)], always=[True, False])


def test_identical_submissions_from_several_writers_exactly_one_new(hbase_url: str) -> None:
    """Three index handles on one HBase index (as three processes would) check and
    add the same document at once, 30 submissions each: exactly one is new, and
    every other answer names it."""
    handles = [SimhashIndex.open(hbase_url) for _ in range(3)]
    barrier = threading.Barrier(len(handles))
    found: dict[str, list[str]] = {}

    def submit(n: int, index: SimhashIndex) -> None:
        barrier.wait()
        for i in range(0, 30, 3):
            docs = [Document(f"c{n}-{i + j}", BASES[0]) for j in range(3)]
            for doc, matches in zip(docs, index.check_and_add(docs)):
                found[doc.doc_id] = [m.doc_id for m in matches]

    threads = [threading.Thread(target=submit, args=(n, h)) for n, h in enumerate(handles)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        new = [doc_id for doc_id, matches in found.items() if not matches]
        assert len(found) == 90 and len(new) == 1
        assert all(new[0] in matches for matches in found.values() if matches)
        assert [d.doc_id for d in handles[0].documents()] == new
    finally:
        for handle in handles:
            handle.close()
