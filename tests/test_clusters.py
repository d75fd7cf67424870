"""Star clusters (issue 41): every member matches its cluster's representative, and
``shdb dedup --clusters``, ``ingest --report`` (the cluster kept with each document)
and check-and-add agree, at any batch size. (Spark equals ``shdb dedup``:
tests/test_spark.py.)"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_records
from simhash_hbase.layout.pairs import clusters_of
from simhash_hbase.records import Document

from .test_index import ARTICLE, OTHER
from .test_one_judge import KINDS, _corpus, _dedup, _deduped


def _groups(cluster: dict[str, str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for doc_id, rep in cluster.items():
        groups.setdefault(rep, []).append(doc_id)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def _ingested(docs: list[tuple[str, str]], folder: Path, batch: int | None) -> dict[str, str]:
    """Each document's cluster as ingest reports it, and as its docs row keeps it."""
    reported = {doc_id: doc_id for doc_id, _ in docs}  # no near-copy: its own
    options = IngestOptions(batch_size=batch, limit=None)
    with SimhashIndex.open(str(folder)) as index:
        index_records(
            index,
            docs,
            options,
            on_duplicate=lambda dup: reported.update({dup.doc_id: dup.matches.cluster}),
        )
    with SimhashIndex.open(str(folder)) as index:  # another open: what was kept
        held = index.get_many([doc_id for doc_id, _ in docs])
    assert {i: d.cluster or i for i, d in held.items()} == reported
    return reported


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.lists(st.sampled_from(KINDS), min_size=4, max_size=12))
def test_clusters_are_stars_on_every_door(seed: int, kinds: list[str]) -> None:
    docs = _corpus(seed, kinds)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = _dedup(docs, root)
        pairs = {(later, earlier) for later, earlier, _, _ in _deduped(docs, root)}
        batched = {batch: _ingested(docs, root / f"b{batch}", batch) for batch in (None, 1, 3)}
    ids = result.ids
    clusters = [[ids[p] for p in group] for group in clusters_of(result.graph)]
    for group in clusters:  # the representative first; every member matches it
        assert all((member, group[0]) in pairs for member in group[1:])
    for cluster in batched.values():
        assert _groups(cluster) == sorted(sorted(g) for g in clusters)
        assert all(rep == cluster[rep] for rep in cluster.values())  # reps are their own


def test_check_and_add_returns_a_stable_cluster(tmp_path: Path) -> None:
    """The representative's id, kept across opens; a chain is cut where it falls apart."""
    part = ARTICLE[: int(len(ARTICLE) * 0.7)]  # 0.69 to ARTICLE
    url = str(tmp_path / "ix")
    with SimhashIndex.open(url) as ix:
        found = ix.check_and_add_texts([("a", ARTICLE), ("o", OTHER), ("copy", ARTICLE)])
        assert [m.cluster for m in found] == ["a", "o", "a"]
        assert found[2].to_json()["cluster"] == "a"
    with SimhashIndex.open(url) as ix:  # another process or a restart: the same cluster
        (again,) = ix.check_and_add_texts([("copy2", ARTICLE)])
        assert again.cluster == "a"
        (p,) = ix.at_similarity(0.6).check_and_add_texts([("p", part)])
        assert p.cluster == "a"
        (q,) = ix.at_similarity(0.8).check_and_add_texts([("q", part)])
        assert q.cluster == "a"  # a copy takes its copy's cluster, fixed when p was added
        (r,) = ix.at_similarity(0.8).check_and_add_texts([("r", part[:-30])])
        assert r.cluster == "r" and "a" not in [m.doc_id for m in r]  # a chain is cut
        assert [m.cluster for m in ix.check_and_add_texts([("r2", part[:-30])])] == ["r"]


def test_a_document_written_again_unchanged_keeps_its_cluster(tmp_path: Path) -> None:
    """A plain add of a held document, unchanged (a resumed ingest writes its pending
    batch again without look-ups), keeps the cluster it joined; a changed one does not."""
    with SimhashIndex.open(str(tmp_path / "ix")) as ix:
        ix.check_and_add_texts([("a", ARTICLE), ("copy", ARTICLE)])
        assert ix.get("copy").cluster == "a"  # type: ignore[union-attr]
        ix.add("copy", ARTICLE)
        assert ix.get("copy").cluster == "a"  # type: ignore[union-attr]
        ix.add("copy", OTHER)
        assert ix.get("copy").cluster is None  # type: ignore[union-attr]


@given(st.lists(st.integers(0, 63), min_size=1, max_size=12))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fingerprint_documents_keep_their_cluster(flips: list[int]) -> None:
    """Documents added by fingerprint alone (no sketch, text or meta) keep the cluster
    ingest reported: the embedded store's fast path for such rows once dropped it."""
    base = 0x36B675CC81E74EF5
    docs = [("d000", base)] + [(f"d{i + 1:03d}", base ^ (1 << b)) for i, b in enumerate(flips)]
    with tempfile.TemporaryDirectory() as folder:
        with SimhashIndex.open(folder) as index:
            found = index.check_and_add([Document(d, fp) for d, fp in docs], always=True)
            reported = {doc_id: m.cluster or doc_id for (doc_id, _), m in zip(docs, found)}
        with SimhashIndex.open(folder) as index:
            kept = {d: index.get(d).cluster or d for d, _ in docs}  # type: ignore[union-attr]
    assert kept == reported and set(kept.values()) == {"d000"}
