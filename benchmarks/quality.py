"""The quality evaluation: texts, edits, fingerprints, pairs, histograms."""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import corpus
from .common import K, log
from .configs import (
    DEFAULT,
    Config,
    ascii_top_share,
    configs,
    domain_idf,
    fingerprint_all,
    jieba_idf_facts,
    self_check,
)
from .edits import EDIT_LABELS, EDITS, make_variants
from .jaccard import edit_jaccards, within_fold_jaccard
from .metrics import (
    EXCLUDE_JACCARD,
    Pairs,
    Results,
    distance_hist,
    distinct_counts,
    jaccard_hist,
    rate_at,
)
from .texts import (
    CJK_MIN_SHARE,
    LONG,
    SEED,
    SETS,
    STRATA,
    Item,
    Sizes,
    build_items,
    cjk_share,
    sentence_pool,
)
from .timing import cpu_seconds


def twin_stats(
    items: list[Item], pairs: Pairs, near: np.ndarray, fps: np.ndarray, cfgs: list[Config]
) -> dict[str, Any]:
    """A page's zh_CN and zh_TW versions: distinct texts (another script) that share every
    URL, option and number. How many are there, how many did the Jaccard rule exclude,
    how often does each config put the remaining ones within k=3, and how many of its
    false positives among Chinese documents are twins?"""
    codes: dict[str, int] = {}
    key = np.array(
        [codes.setdefault(x.id.replace("/zh_TW/", "/zh_CN/"), len(codes)) for x in items]
    )
    is_long = np.array([x.stratum in LONG for x in items])
    twin = is_long[pairs.a] & is_long[pairs.b] & (key[pairs.a] == key[pairs.b])
    kept = twin & ~near
    dist = np.bitwise_count(fps[pairs.a[kept]] ^ fps[pairs.b[kept]])
    negatives = is_long[pairs.a] & is_long[pairs.b] & ~near
    neg_dist = np.bitwise_count(fps[pairs.a[negatives]] ^ fps[pairs.b[negatives]])
    neg_twin = twin[negatives]
    return {
        "pairs": int(twin.sum()),
        "excluded": int((twin & near).sum()),
        "within_k3": {
            c.name: float((dist[:, i] <= K).mean()) if len(dist) else float("nan")
            for i, c in enumerate(cfgs)
        },
        "false_positives_k3": {
            c.name: int((neg_dist[:, i] <= K).sum()) for i, c in enumerate(cfgs)
        },
        "false_positives_k3_twins": {
            c.name: int(((neg_dist[:, i] <= K) & neg_twin).sum()) for i, c in enumerate(cfgs)
        },
    }


@dataclass
class Evaluation:
    """What an eval section gets: the corpus, the texts, their edits, and the results
    of the core evaluation (which its own figures can be paired with)."""

    mode: str  # smoke | quick | full
    sizes: Sizes
    workers: int
    docs: list[tuple[str, str]]  # the whole corpus, (id, text)
    items: list[Item]  # the evaluated originals: documents, then short texts
    variants: list[tuple[int, int, str]]  # (index into items, index into EDITS, edited text)
    results: Results


def _edited_pairs(
    items: list[Any], variants: list[tuple[int, int, str]], strat: np.ndarray, workers: int
) -> Pairs:
    """(original, its edited variant) pairs, grouped by edit and stratum, with their
    exact Jaccard."""
    log("Jaccard of the edited pairs")
    by_orig: dict[int, list[str]] = {}
    for i, _, t in variants:
        by_orig.setdefault(i, []).append(t)
    keys = sorted(by_orig)
    jacs = edit_jaccards([items[i].text for i in keys], [by_orig[i] for i in keys], workers)
    jac_of: dict[int, list[float]] = dict(zip(keys, jacs))
    seen: Counter[int] = Counter()
    var_jac = []
    for i, _, _ in variants:
        var_jac.append(jac_of[i][seen[i]])
        seen[i] += 1
    n_items, n_s = len(items), len(STRATA)
    return Pairs(
        a=np.array([i for i, _, _ in variants], dtype=np.int64),
        b=np.arange(n_items, n_items + len(variants), dtype=np.int64),
        group=np.array([e * n_s + strat[i] for i, e, _ in variants], dtype=np.int64),
        jac=np.array(var_jac),
    )


def _distinct_pairs(
    long_items: list[Any], short_list: list[Any], strat: np.ndarray
) -> tuple[Pairs, int, int]:
    """Pairs of distinct texts within each fold, grouped by their strata, with their
    exact Jaccard; and how many are long and short."""
    log("Jaccard of the distinct pairs")
    off, n_s = len(long_items), len(STRATA)
    li, lj, ljac = within_fold_jaccard(long_items)
    si, sj, sjac = within_fold_jaccard(short_list)
    a = np.concatenate([li, si + off])
    b = np.concatenate([lj, sj + off])
    s1, s2 = np.minimum(strat[a], strat[b]), np.maximum(strat[a], strat[b])
    return Pairs(a, b, s1 * n_s + s2, np.concatenate([ljac, sjac])), len(li), len(si)


def evaluate(sizes: Sizes, workers: int, mode: str, json_name: str) -> Evaluation:
    start = time.perf_counter()
    docs = corpus.for_mode(mode)
    log(f"corpus: {len(docs)} documents")
    long_items, short_list = build_items(docs, sizes)
    items = long_items + short_list
    originals = Counter(x.stratum for x in items)
    log(f"originals: {dict(originals)}")

    pool = sentence_pool([(d, t) for d, t in docs if cjk_share(t) >= CJK_MIN_SHARE])
    variants = make_variants(items, pool)
    log(f"edited variants: {len(variants)}")

    cfgs = configs()
    with tempfile.TemporaryDirectory() as tmp:
        log("building the domain IDF tables (one per half)")
        idf_paths, idf_terms = domain_idf(docs, Path(tmp), workers)
        texts = [(x.text, x.fold) for x in items]
        texts += [(t, items[i].fold) for i, _, t in variants]
        log(f"fingerprinting {len(texts)} texts x {len(cfgs)} configurations")
        fps, ok = fingerprint_all(texts, cfgs, idf_paths, workers)
        self_check(cfgs, idf_paths, texts, fps, ok)

    n_s = len(STRATA)
    strat = np.array([STRATA.index(x.stratum) for x in items], dtype=np.int64)
    recall_pairs = _edited_pairs(items, variants, strat, workers)
    off = len(long_items)
    distinct_all, n_long_pairs, n_short_pairs = _distinct_pairs(long_items, short_list, strat)

    usable: np.ndarray = np.asarray(ok.all(axis=1))
    dropped = int((~usable).sum())
    recall_pairs = recall_pairs.keep(usable[recall_pairs.a] & usable[recall_pairs.b])
    distinct_all = distinct_all.keep(usable[distinct_all.a] & usable[distinct_all.b])
    near = distinct_all.jac > EXCLUDE_JACCARD
    distinct, excluded = distinct_all.keep(~near), distinct_all.keep(near)

    n_groups_r, n_groups_d = len(EDITS) * n_s, n_s * n_s
    recall_hist, distinct_hist, excluded_hist = {}, {}, {}
    for col, c in enumerate(cfgs):
        recall_hist[c.name] = distance_hist(fps[:, col], recall_pairs, n_groups_r)
        distinct_hist[c.name] = distance_hist(fps[:, col], distinct, n_groups_d)
        excluded_hist[c.name] = distance_hist(fps[:, col], excluded, n_groups_d)

    is_long_pair = excluded.a < off
    ex_long = distinct_counts(excluded_hist[DEFAULT], LONG)
    twins = twin_stats(items, distinct_all, near, fps, cfgs)
    meta = {
        "issue": 6,
        "mode": mode,
        "sizes": asdict(sizes),
        "seed": SEED,
        "workers": workers,
        "k": K,
        "json": json_name,
        "corpus_docs": len(docs),
        "english_docs": sum(1 for _, t in docs if cjk_share(t) < CJK_MIN_SHARE),
        "originals": dict(originals),
        "edited_pairs": len(recall_pairs.a),
        "distinct_pairs": len(distinct.a),
        "dropped_texts": dropped,
        "idf_terms": [int(t["terms"]) for t in idf_terms],
        "domain_idf_tables": idf_terms,
        "ascii_top_share": ascii_top_share(long_items),
        "jieba_idf": jieba_idf_facts(),
        "excluded": {
            "threshold": EXCLUDE_JACCARD,
            "long": int(is_long_pair.sum()),
            "short": int((~is_long_pair).sum()),
            "long_total": n_long_pairs,
            "short_total": n_short_pairs,
            "long_default_k3": rate_at(ex_long, K),
        },
        "twins": twins,
        "edits": {e: EDIT_LABELS[e] for e in EDITS},
        "strata": list(STRATA),
        "sets": {k: list(v) for k, v in SETS.items()},
        "versions": {
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "simhash_hbase": __import__("simhash_hbase").__version__,
            "jieba": __import__("jieba").__version__,
        },
    }
    res = Results(
        meta=meta,
        cfgs=cfgs,
        recall_hist=recall_hist,
        distinct_hist=distinct_hist,
        jac_recall=jaccard_hist(recall_pairs, n_groups_r),
        jac_distinct=jaccard_hist(distinct, n_groups_d),
        excluded_hist=excluded_hist,
        pair_dist=np.bitwise_count(fps[recall_pairs.a] ^ fps[recall_pairs.b]).astype(np.int8),
        pair_group=recall_pairs.group,
    )
    meta["runtime_s"] = time.perf_counter() - start
    meta["cpu_s"] = cpu_seconds()
    return Evaluation(mode, sizes, workers, list(docs), items, variants, res)
