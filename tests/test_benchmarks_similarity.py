"""The similarity benchmark's English half: the templated set of
:mod:`benchmarks.templated` judged at each similarity (``--smoke``: its generated
pages of one template, no man or pydoc), and what its precision counts as right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import similarity
from benchmarks.judged import Page, under_half


def test_english_rows_at_each_similarity(tmp_path: Path) -> None:
    out = tmp_path / "similarity.json"
    assert similarity.main(["--no-crawl", "--smoke", "--english", "60", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert "similarity" not in result  # --no-crawl
    rows = result["english"]["rows"]
    assert [r["similarity"] for r in rows] == list(similarity.SIMILARITIES)
    default = rows[similarity.SIMILARITIES.index(0.5)]
    assert default["recall_all"] == 1.0 and default["precision"] == 1.0
    assert default["clusters"]["under_0.3"] == 0.0
    # a stricter similarity reports no pair a looser one did not
    reported = [r["reported"] for r in rows]
    assert reported == sorted(reported, reverse=True)
    # the generated siblings share 25-50 % of their shingles: 0.4 reports some
    assert rows[0]["precision"] < 1.0


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 3), st.integers(0, 3))
def test_precision_counts_planted_copies_right_and_siblings_under_half_wrong(
    planted: int, siblings: int
) -> None:
    words = [f"w{n:03d}" for n in range(400)]
    pages, pairs = [], []
    for n in range(planted):  # a copy that keeps a third of its original: planted
        text = " ".join(words[n * 90 : n * 90 + 90])
        pages += [Page(f"o{n}", text, n, "", False), Page(f"c{n}", text[:90], n, "x", False)]
        pairs.append((len(pages) - 2, len(pages) - 1))
    for n in range(siblings):  # unrelated texts reported together: wrong
        pages += [
            Page(f"a{n}", " ".join(words[n::4]), 100 + 2 * n, "", False),
            Page(f"b{n}", " ".join(words[n + 1 :: 4]), 101 + 2 * n, "", False),
        ]
        pairs.append((len(pages) - 2, len(pages) - 1))
    got = under_half(pages, pairs)
    assert got["under_half"] == planted + siblings
    assert got["precision"] == pytest.approx(planted / len(pairs) if pairs else 1.0)
