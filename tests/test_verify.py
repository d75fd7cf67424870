"""`verify --repair` and resumable ingest, on every store."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_hbase import Document, IngestSummary, SimhashIndex
from simhash_hbase.jobs.checkpoint import Checkpoint
from simhash_hbase.jobs.ingest import IngestOptions, SourceOptions, ingest
from simhash_hbase.jobs.verify import owned, verify

from .test_cli import shdb


def test_clean_index_verifies_clean(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        for i in range(20):
            index.add_fingerprint(f"d{i}", i * 0x0101_0101_0101_0101)
        report = verify(index)
    assert report.clean and report.documents == 20 and report.cells == 200


def test_verify_finds_and_repairs_every_kind_of_damage(store_url: str) -> None:
    with SimhashIndex.open(store_url) as index:
        for i in range(10):
            index.add_fingerprint(f"d{i}", (i + 1) * 0x1111_1111)
        cells = index.cells([Document("d0", 0x1111_1111)])
        index.write_cells(
            delete=cells[:3],  # d0 lost three cells
            put=[
                *index.cells([Document("ghost", 42)]),  # no docs row
                *index.cells([Document("d1", 7)]),  # d1 is not 7
                (cells[0][0][:4] + b"\x09" + cells[0][0][5:], "d0"),  # wrong flag
            ],
        )
        report = verify(index)
        assert not report.clean
        assert report.missing_cells == 3 and report.incomplete_documents == 1
        wrong = 10
        if index.stats().get("format", 1) >= 2:
            # The compact layout keeps a cell as (prefix, document number): a cell
            # of d1 under one of d1's own prefixes is d1's cell, not a stale one.
            own = {row[:5] for row, _ in index.cells([Document("d1", 2 * 0x1111_1111)])}
            wrong = sum(row[:5] not in own for row, _ in index.cells([Document("d1", 7)]))
        assert report.stale_cells == 10 + wrong + 1
        assert any("d0" in e for e in report.examples)
        repaired = verify(index, repair=True)
        assert repaired.repaired
        assert verify(index).clean
        assert [m.doc_id for m in index.query_fingerprint(0x1111_1111, 0)] == ["d0"]


def test_cli_verify_exit_codes(tmp_path: Path) -> None:
    index = str(tmp_path / "ix")
    with SimhashIndex.open(index) as ix:
        ix.add_fingerprint("a", 1)
        ix.write_cells(put=ix.cells([Document("ghost", 2)]))
    found = shdb("verify", "-i", index, "--json")
    assert found.exit_code == 1 and json.loads(found.stdout)["stale_cells"] == 10
    assert shdb("verify", "-i", index, "--repair").exit_code == 0
    assert shdb("verify", "-i", index).exit_code == 0


def _corpus(path: Path, n: int) -> Path:
    lines = [
        json.dumps(
            {"id": f"doc{i}", "text": f"第{i}篇 海量文本去重 指纹 {i * 7919} 索引"},
            ensure_ascii=False,
        )
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_interrupted_ingest_resumes_from_its_checkpoint(store_url: str, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", 250)
    opts = SourceOptions()

    def crash_after_two_batches(summary: IngestSummary) -> None:
        if summary.records >= 100:
            raise KeyboardInterrupt  # what Ctrl-C or a kill would do

    options = IngestOptions(batch_size=50)
    with SimhashIndex.open(store_url) as index:
        with pytest.raises(KeyboardInterrupt):
            ingest(index, [str(corpus)], opts, options, on_progress=crash_after_two_batches)
        checkpoint = Checkpoint.of(index, [str(corpus)], opts)
        assert checkpoint is not None
        assert checkpoint.load().records == 100
        summary = ingest(index, [str(corpus)], opts, options)
        assert summary.resumed_after == 100 and summary.added == 150
        assert checkpoint.load().records == 0  # done: the checkpoint is gone
        assert index.stats()["documents"] == 250
        assert verify(index).clean


def test_changed_input_does_not_reuse_a_checkpoint(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", 5)
    opts = SourceOptions()
    with SimhashIndex.open(str(tmp_path / "ix")) as index:
        before = Checkpoint.of(index, [str(corpus)], opts)
        assert before is not None
        _corpus(corpus, 6)
        after = Checkpoint.of(index, [str(corpus)], opts)
        assert after is not None and after.name != before.name
        assert Checkpoint.of(index, ["-"], opts) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**64 - 1), st.booleans()), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
)
def test_owned_is_membership_in_the_cells_the_writers_give(
    docs: list[tuple[int, bool]], rng: random.Random
) -> None:
    """verify's vectorised judge (`owned`) says of any cell exactly what membership
    in `SimhashIndex.cells` of its document says: one definition, whatever the
    damage (a byte flipped, another document's cell, another fingerprint's)."""
    with tempfile.TemporaryDirectory() as folder, SimhashIndex.open(folder) as index:
        owners = [
            Document(f"d{n}", fp, bands=rng.randbytes(4 * 6) if banded else None)
            for n, (fp, banded) in enumerate(docs)
        ]
        truth = set(index.cells(owners))
        cells = sorted(truth)
        for row, doc_id in cells[:20]:
            at, bit = rng.randrange(13), 1 << rng.randrange(8)
            cells.append((row[:at] + bytes([row[at] ^ bit]) + row[at + 1 :], doc_id))
            cells.append((row, rng.choice(owners).doc_id))
        cells.append((b"short", "d0"))
        by_id = {d.doc_id: d for d in owners}
        judged = owned(index.scheme, cells, [by_id.get(d) for _, d in cells])
        assert judged.tolist() == [cell in truth for cell in cells]
