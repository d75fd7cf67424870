"""A user's similarity, and clusters that hold together (issue 41, D3 and D4).

    python -m benchmarks.similarity [--quick] [--man N]   # docs/quality.md, "Similarity"

- **Similarity.** The crawl-like set of :mod:`benchmarks.crawl` (Chinese articles
  in site templates, one copy of each kind per article) judged by both nets at each
  similarity of :data:`SIMILARITIES` (``MinHashParams.at_similarity``: the threshold,
  and the floor ``FLOOR_MARGIN`` below it): recall per kind, precision.
- **Clusters.** ``shdb dedup --clusters`` (star clusters) against the connected
  components of the same graph (what it printed before): of the member pairs of
  the clusters, drawn uniformly over all within-cluster pairs, the share whose
  exact 5-shingle Jaccard is under 0.3 (the issue's floor: <= 2 %) and under 0.5;
  on the crawl-like set and on English manual pages rendered by ``man -P cat``
  (templated text: generated command references, one layout per section).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from simhash_hbase.errors import EmptyDocument
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams, shingle_set
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.layout import codec
from simhash_hbase.layout.groups import nets_graph
from simhash_hbase.layout.pairs import NearGraph, clusters_of, roots
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme

from . import crawl
from .common import RESULTS_DIR, log

SIMILARITIES = (0.4, 0.5, 0.6, 0.7, 0.8)
K = 3
SAMPLE = 3000


def _graph(texts: Sequence[str]) -> tuple[NearGraph, list[int]]:
    """Both nets' graph of the texts that have terms (default settings), and which
    texts those are."""
    fingerprinter, hasher = Fingerprinter(FingerprintParams()), MinHasher(MinHashParams())
    kept, fps, sketches, bands = [], [], [], []
    for n, text in enumerate(texts):
        try:
            fp = fingerprinter.fingerprint(text)
        except EmptyDocument:
            continue
        sig = hasher.signature(text)
        kept.append(n)
        fps.append(fp)
        sketches.append(None if sig is None else sig.sketch)
        bands.append(None if sig is None else codec.encode_bands(sig.bands))
    scheme = get_scheme(DEFAULT_SCHEME)
    arr = np.array(fps, dtype=np.uint64)
    return nets_graph(arr, K, scheme, MinHashParams(), sketches, bands), kept


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
    shingles: dict[int, frozenset[str]] = {}

    def sh(i: int) -> frozenset[str]:
        if i not in shingles:
            shingles[i] = frozenset(shingle_set(texts[i], MinHashParams()))
        return shingles[i]

    under3 = under5 = 0
    picks = rng.choices(range(len(groups)), weights=weights, k=SAMPLE)
    for g in picks:
        a, b = rng.sample(groups[g], 2)
        x, y = sh(a), sh(b)
        j = len(x & y) / max(len(x | y), 1)
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


def clusters(texts: Sequence[str], seed: int = 0) -> dict[str, Any]:
    graph, kept = _graph(texts)
    mine = [kept[i] for i in range(len(kept))]
    stars = [[mine[p] for p in g] for g in clusters_of(graph)]
    comps = [[mine[p] for p in g] for g in _components(graph)]
    return {
        "texts": len(texts),
        "stars": _member_pairs(stars, texts, random.Random(seed)),
        "components": _member_pairs(comps, texts, random.Random(seed)),
    }


def similarity(pages: Sequence[crawl.Page]) -> list[dict[str, Any]]:
    fingerprinter = Fingerprinter(FingerprintParams())
    fps = np.array([fingerprinter.fingerprint(p.text) for p in pages], dtype=np.uint64)
    signed = crawl.sign(pages, fps, MinHashParams())
    rows = []
    for s in SIMILARITIES:
        params = MinHashParams().at_similarity(s)
        scores = crawl.score(pages, crawl.net_pairs(signed, "both", params, DEFAULT_SCHEME))
        rows.append({"similarity": s, "floor": params.floor, **scores.to_json()})
    return rows


def man_pages(n: int, seed: int = 0) -> list[str]:
    """``n`` English manual pages (sections 1, 3, 7, 8) as ``man -P cat`` renders them."""
    listed = subprocess.run(
        ["man", "-k", "."], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    names = sorted(
        {
            line.split(" (")[0] + "." + line.split("(")[1].split(")")[0]
            for line in listed
            if "(" in line
        }
    )
    names = [x for x in names if x.rsplit(".", 1)[1][:1] in "1378"]
    random.Random(seed).shuffle(names)
    texts: list[str] = []
    for name in names:
        if len(texts) >= n:
            break
        page, section = name.rsplit(".", 1)
        out = subprocess.run(
            ["man", "-P", "cat", section, page],
            capture_output=True,
            text=True,
            check=False,
            env={"MANWIDTH": "80", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
        ).stdout
        if len(out) > 200:
            texts.append(out)
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--man", type=int, default=3000, help="manual pages (0: none)")
    args = ap.parse_args()
    started = time.perf_counter()
    mode = "quick" if args.quick else "full"
    log(f"similarity: building the crawl-like set ({mode})")
    pages = crawl.build(crawl.MODES[mode])
    result: dict[str, Any] = {"mode": mode, "pages": len(pages)}
    result["similarity"] = similarity(pages)
    log("similarity: clusters of the crawl-like set")
    result["crawl_clusters"] = clusters([p.text for p in pages])
    if args.man:
        log(f"similarity: rendering {args.man} manual pages")
        texts = man_pages(args.man)
        result["man_clusters"] = clusters(texts)
    result["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"similarity{'-quick' if args.quick else ''}.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
