"""The templated-English quality benchmark runs end to end (``--smoke``: generated
pages of one template, no man or pydoc) and shows what the evidence is for."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import templated


def test_templated_smoke_finds_copies_and_no_sibling_under_the_threshold(
    tmp_path: Path,
) -> None:
    out = tmp_path / "templated.json"
    assert templated.main(["--smoke", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    both, bare = result["nets"]["both"], result["nets"]["both, no evidence"]
    assert set(both["recall"]) == set(templated.KINDS)
    assert both["recall_all"] == 1.0 and both["missed_at_08"] == []
    assert both["under_half"] == 0 < bare["under_half"]  # the 64-byte sketch alone: siblings
    assert templated.render(result).count("| both") == 2
