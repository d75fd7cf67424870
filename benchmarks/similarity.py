"""A user's similarity, and clusters that hold together (issue 41, D3 and D4).

    python -m benchmarks.similarity [--quick] [--no-crawl] [--english N]
        # docs/quality.md, "Similarity"

- **Similarity.** The crawl-like set of :mod:`benchmarks.crawl` (Chinese articles
  in site templates, one copy of each kind per article) judged by both nets at each
  similarity of :data:`SIMILARITIES` (``MinHashParams.at_similarity``: the threshold,
  and the floor ``FLOOR_MARGIN`` below it): recall per kind, precision.
- **Clusters.** ``shdb dedup --clusters`` (star clusters) against the connected
  components of the same graph (what it printed before): of the member pairs of
  the clusters, drawn uniformly over all within-cluster pairs, the share whose
  exact 5-shingle Jaccard is under 0.3 (the issue's floor: <= 2 %) and under 0.5;
  on the crawl-like set.
- **English.** The templated English documentation of :mod:`benchmarks.templated`
  (manual pages and pydoc with planted copies of five kinds, template siblings left
  in; ``--english N`` sources, its render cache): at each similarity, recall per
  kind, precision (a reported pair is right if its texts share at least half their
  character 5-grams or it is a planted copy and its original) and the star clusters.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.pairs import NearGraph, clusters_of, roots
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme

from . import crawl, templated
from .common import RESULTS_DIR, log
from .judged import Signed, jaccard, net_pairs, sign

SIMILARITIES = (0.4, 0.5, 0.6, 0.7, 0.8)
K = 3
SAMPLE = 3000


def _graph(signed: Signed, lsh: MinHashParams, scheme: str) -> NearGraph:
    """Both nets' graph of signed texts at ``lsh``'s threshold and floor."""
    return nets_graph(signed.fps, K, get_scheme(scheme), lsh, signed.sketches, signed.bands)


def _components(graph: NearGraph) -> list[list[int]]:
    label = roots(len(graph.unique), graph.edges[:2])[graph.inverse]
    groups: dict[int, list[int]] = {}
    for p, root in enumerate(label.tolist()):
        groups.setdefault(root, []).append(p)
    return [g for g in groups.values() if len(g) > 1]


def _member_pairs(
    groups: list[list[int]], texts: Sequence[str], rng: random.Random
) -> dict[str, Any]:
    """Pairs drawn uniformly over all within-cluster pairs: their exact Jaccard."""
    weights = [len(g) * (len(g) - 1) // 2 for g in groups]
    total = sum(weights)
    if not total:
        return {"clusters": len(groups), "pairs": 0}
    under3 = under5 = 0
    picks = rng.choices(range(len(groups)), weights=weights, k=SAMPLE)
    for g in picks:
        a, b = rng.sample(groups[g], 2)
        j = jaccard(texts[a], texts[b])
        under3 += j < 0.3
        under5 += j < 0.5
    return {
        "clusters": len(groups),
        "largest": max(map(len, groups)),
        "documents": sum(map(len, groups)),
        "pairs": total,
        "under_0.3": under3 / SAMPLE,
        "under_0.5": under5 / SAMPLE,
    }


def clusters(
    texts: Sequence[str], signed: Signed, lsh: MinHashParams, scheme: str, seed: int = 0
) -> dict[str, Any]:
    """Star clusters and connected components of the texts' graph (all have terms)."""
    graph = _graph(signed, lsh, scheme)
    return {
        "texts": len(texts),
        "stars": _member_pairs(clusters_of(graph), texts, random.Random(seed)),
        "components": _member_pairs(_components(graph), texts, random.Random(seed)),
    }


def similarity(pages: Sequence[crawl.Page]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The crawl-like set: recall per kind and precision at each similarity, and its
    clusters at the default."""
    fingerprinter = Fingerprinter(FingerprintParams())
    fps = np.array([fingerprinter.fingerprint(p.text) for p in pages], dtype=np.uint64)
    signed = sign(pages, fps, MinHashParams())
    rows = []
    for s in SIMILARITIES:
        params = MinHashParams().at_similarity(s)
        scores = crawl.score(pages, crawl.net_pairs(signed, "both", params, DEFAULT_SCHEME))
        rows.append({"similarity": s, "floor": params.floor, **scores.to_json()})
    texts = [p.text for p in pages]
    return rows, clusters(texts, signed, MinHashParams(), DEFAULT_SCHEME)


def english(size: int, smoke: bool = False) -> dict[str, Any]:
    """The templated English set of :mod:`benchmarks.templated` (``size`` sources;
    ``smoke``: its generated pages): at each similarity, planted-copy recall per
    kind, precision (:func:`benchmarks.judged.under_half`) and the star clusters."""
    kept, fps, params, scheme = templated.fingerprinted(templated.build(size, smoke=smoke))
    signed = sign(kept, fps, params)
    texts = [p.text for p in kept]
    rows = []
    for s in SIMILARITIES:
        lsh = params.at_similarity(s)
        log(f"similarity: English at {s}")
        scores = templated.score(kept, net_pairs(signed, "both", lsh, scheme))
        stars = _member_pairs(clusters_of(_graph(signed, lsh, scheme)), texts, random.Random(0))
        rows.append({"similarity": s, "floor": lsh.floor, **scores, "clusters": stars})
    return {"sources": size, "pages": len(kept), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.similarity", description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--crawl", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--english", type=int, help="templated English sources (0: none)")
    ap.add_argument("--smoke", action="store_true", help="English: generated pages")
    ap.add_argument("--out", type=Path, help="write the JSON here instead")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    mode = "quick" if args.quick else "full"
    result: dict[str, Any] = {"mode": mode, "date": time.strftime("%Y-%m-%d")}
    if args.crawl:
        log(f"similarity: building the crawl-like set ({mode})")
        pages = crawl.build(crawl.MODES[mode])
        result["pages"] = len(pages)
        result["similarity"], result["crawl_clusters"] = similarity(pages)
    size = templated.MODES[mode] if args.english is None else args.english
    if size:
        log(f"similarity: templated English documentation, {size} sources")
        result["english"] = english(size, smoke=args.smoke)
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = args.out or RESULTS_DIR / f"similarity{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
