"""Recall beyond plain k=3 (issue 14): multi-probe, fingerprint v2, short texts, and
natural near-duplicates, measured on the evaluation's texts and edits.

For every configuration each text's fingerprint *and its bit margins* are computed
(cached by text and settings under ``$SHDB_CORPUS_DIR/../shdb-eval``); the probe lists
come from :func:`simhash_hbase.fingerprint.probes.probe_fingerprints`, the library's own order.
A pair (query q, held text d) is found with ``probes=P`` when d is within k of one of
q's first P+1 probes and within ``bound(k, P)`` of q: exactly what
:meth:`SimhashIndex.query_probed` returns (tests/test_probe_index.py checks that
against brute force on both stores). Cost: distinct 5x10 prefix scans per query.

    python -m benchmarks.recall [--quick]   # this section alone: bench-results/recall.json,
                                            # spliced into docs/quality.md
"""

from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase import FingerprintParams
from simhash_hbase.errors import EmptyDocument
from simhash_hbase.fingerprint.probes import bound, probe_fingerprints
from simhash_hbase.fingerprint.simhash import Fingerprinter
from simhash_hbase.layout.scheme import get_scheme

from . import corpus, natural
from .common import ROOT, log, set_log_tag
from .edits import EDITS, SINGLE_EDITS, make_variants
from .jaccard import jaccard, shingles, within_fold_jaccard
from .metrics import EXCLUDE_JACCARD, wilson_interval
from .registry import Section, register
from .texts import SETS, SIZES, Item, build_items, cjk_share, sentence_pool

K = 3
P_MAX = 16
SCAN_BUDGET = 4.0  # probes may cost at most this many times the scans of probes=0
FLOOR_RECALL = 0.95
FLOOR_FPR = 0.0001
SCHEME = "5x10"
CACHE = corpus.CACHE.parent / "shdb-eval"


@dataclass(frozen=True)
class Cfg:
    name: str
    params: FingerprintParams
    sets: tuple[str, ...]  # "long" (documents) and/or "short"
    note: str


CFGS = (
    Cfg("v1", FingerprintParams(), ("long", "short"), "version 1 (the default), words, top-N 16"),
    Cfg(
        "v2",
        FingerprintParams(version=2),
        ("long", "short"),
        "version 2, words, top-N 16, count^1.75 x IDF capped at 1/5",
    ),
    Cfg(
        "chars-n2",
        FingerprintParams(features="chars", ngram=2, top_n=256),
        ("short",),
        "character bigrams by count, top-N 256 (the short-text mode)",
    ),
    Cfg(
        "chars-n2-v2",
        FingerprintParams(features="chars", ngram=2, top_n=256, version=2),
        ("short",),
        "character bigrams, version 2 (normalisation, count^1.75, cap 1/5)",
    ),
)


# --------------------------------------------------------------------------- fingerprints


# Texts whose fingerprints and margins sign the recipe: a change to the package's
# weighting gives a new cache file instead of stale values under the old settings.
_CANARIES = (
    "海量文本去重：simhash 指纹与抽屉原理，海量文本去重。版本 2.0，共 64 位。",
    "Near-duplicate detection with SimHash fingerprints, 3 bits, k=3 (ＦＵＬＬ width).",
    "繁體中文的網頁與簡體中文的網頁，內容相同，編碼不同。頁頁頁頁頁。",
)


def _recipe_signature(params: FingerprintParams) -> bytes:
    fingerprinter = Fingerprinter(params)
    signature = b""
    for text in _CANARIES:
        try:
            fp, margins = fingerprinter.fingerprint_margins(text)
        except EmptyDocument:
            signature += b"empty"
            continue
        signature += fp.to_bytes(8, "big") + margins.astype(np.float64).tobytes()
    return signature


def _cache_path(params: FingerprintParams) -> Path:
    key = pickle.dumps(sorted(params.to_manifest().items())) + _recipe_signature(params)
    return CACHE / f"fp-{hashlib.sha256(key).hexdigest()[:16]}.pkl"


def _text_key(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()


_WORKER: Fingerprinter | None = None


def _init(params: FingerprintParams) -> None:
    global _WORKER
    _WORKER = Fingerprinter(params)


def _chunk(texts: list[str]) -> list[tuple[int, bytes] | None]:
    assert _WORKER is not None
    out: list[tuple[int, bytes] | None] = []
    for text in texts:
        try:
            fp, margins = _WORKER.fingerprint_margins(text)
        except EmptyDocument:
            out.append(None)
        else:
            out.append((fp, margins.astype(np.float32).tobytes()))
    return out


def fingerprints(
    params: FingerprintParams, texts: Sequence[str], workers: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fingerprints, margins (n, 64), usable) of ``texts``; cached by text, settings
    and the recipe (see ``_CANARIES``)."""
    path = _cache_path(params)
    cache: dict[bytes, tuple[int, bytes] | None] = {}
    if path.exists():
        cache = pickle.loads(path.read_bytes())
    keys = [_text_key(t) for t in texts]
    todo = sorted({k: i for i, k in enumerate(keys) if k not in cache}.values())
    if todo:
        log(f"  fingerprinting {len(todo)} texts ({len(texts) - len(todo)} cached)")
        chunks = [[texts[i] for i in todo[j : j + 64]] for j in range(0, len(todo), 64)]
        Fingerprinter(params)  # load jieba before forking
        with multiprocessing.get_context("fork").Pool(
            max(1, workers), initializer=_init, initargs=(params,)
        ) as pool:
            done = [r for part in pool.imap(_chunk, chunks) for r in part]
        for i, value in zip(todo, done):
            cache[keys[i]] = value
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(cache))
        tmp.replace(path)
    fps = np.zeros(len(texts), dtype=np.uint64)
    margins = np.zeros((len(texts), 64), dtype=np.float32)
    ok = np.zeros(len(texts), dtype=bool)
    for i, key in enumerate(keys):
        value = cache[key]
        if value is not None:
            fps[i], ok[i] = value[0], True
            margins[i] = np.frombuffer(value[1], dtype=np.float32)
    return fps, margins, ok


def self_check(params: FingerprintParams, texts: Sequence[str], fps: np.ndarray) -> None:
    """Cached values must be what the package computes today."""
    fp = Fingerprinter(params)
    rng = np.random.default_rng(14)
    for i in rng.choice(len(texts), size=min(12, len(texts)), replace=False):
        try:
            value = fp.fingerprint(texts[i])
        except EmptyDocument:
            continue
        if value != int(fps[i]):
            raise SystemExit(f"fingerprint cache is stale for {params}: delete {CACHE}")


# --------------------------------------------------------------------------- probes


def probe_matrix(fps: np.ndarray, margins: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(len(rows), P_MAX + 1) probe fingerprints, the library's order."""
    out = np.zeros((len(rows), P_MAX + 1), dtype=np.uint64)
    for n, i in enumerate(rows):
        out[n] = probe_fingerprints(int(fps[i]), margins[i].astype(np.float64), P_MAX)
    return out


def first_hits(probes: np.ndarray, targets: np.ndarray, k: int = K) -> np.ndarray:
    """Index of the first probe within k of each target (P_MAX + 1 when none)."""
    out = np.full(len(targets), P_MAX + 1, dtype=np.int64)
    for start in range(0, len(targets), 200_000):
        part = slice(start, start + 200_000)
        within = np.bitwise_count(probes[part] ^ targets[part, None]) <= k
        out[part] = np.where(within.any(1), within.argmax(1), P_MAX + 1)
    return out


def found(first: np.ndarray, true: np.ndarray, p: int, k: int = K) -> np.ndarray:
    return (first <= p) & (true <= bound(k, p))


def scans(probes: np.ndarray) -> np.ndarray:
    """Mean distinct prefix scans per query for probes = 0..P_MAX (5x10)."""
    scheme = get_scheme(SCHEME)
    n = len(probes)
    fields = scheme.fields_many(probes.reshape(-1)).reshape(n, P_MAX + 1, -1)
    new = np.zeros((n, P_MAX + 1), dtype=np.int64)
    new[:, 0] = fields.shape[2]
    for p in range(1, P_MAX + 1):
        new[:, p] = (~(fields[:, :p, :] == fields[:, p : p + 1, :]).any(1)).sum(1)
    return np.asarray(np.cumsum(new, axis=1).mean(0))


def candidates(probes: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Mean distinct fingerprints of ``held`` (an index of them) that a query's scans
    return for probes = 0..P_MAX: what the store reads before the distance filter."""
    scheme = get_scheme(SCHEME)
    by_prefix: dict[tuple[int, int], list[int]] = {}
    for i, row in enumerate(scheme.fields_many(np.unique(held)).tolist()):
        for col, field in enumerate(row):
            by_prefix.setdefault((col, field), []).append(i)
    fields = scheme.fields_many(probes.reshape(-1)).reshape(len(probes), P_MAX + 1, -1)
    total = np.zeros(P_MAX + 1)
    for per_probe in fields.tolist():
        seen: set[int] = set()
        for p, row in enumerate(per_probe):
            for col, field in enumerate(row):
                seen.update(by_prefix.get((col, field), ()))
            total[p] += len(seen)
    return total / max(len(probes), 1)


# --------------------------------------------------------------------------- the run


def _rate(hits: np.ndarray) -> dict[str, Any]:
    n, h = len(hits), int(hits.sum())
    lo, hi = wilson_interval(h, n) if n else (math.nan, math.nan)
    return {"hits": h, "n": n, "rate": h / n if n else math.nan, "lo": lo, "hi": hi}


def _distinct(items: list[Item], strata: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Ordered distinct pairs (both directions) of items in ``strata``, same half,
    exact Jaccard <= the exclusion threshold; and the excluded (near-copy) pairs."""
    sel = [i for i, x in enumerate(items) if x.stratum in strata]
    a, b, jac = within_fold_jaccard([items[i] for i in sel])
    idx = np.array(sel, dtype=np.int64)
    a, b = idx[a], idx[b]
    keep = jac <= EXCLUDE_JACCARD
    pairs = np.stack([np.concatenate([a[keep], b[keep]]), np.concatenate([b[keep], a[keep]])])
    near = np.stack([a[~keep], b[~keep]])
    return pairs, near


def evaluate(
    docs: list[tuple[str, str]],
    items: list[Item],
    variants: list[tuple[int, int, str]],
    mode: str,
    workers: int,
) -> dict[str, Any]:
    start = time.perf_counter()
    n_items = len(items)
    texts = [x.text for x in items] + [t for _, _, t in variants]
    strat = np.array([x.stratum for x in items] + [items[i].stratum for i, _, _ in variants])
    is_long = np.isin(strat, SETS["long"])
    is_short = np.isin(strat, SETS["short"])
    v_orig = np.array([i for i, _, _ in variants], dtype=np.int64)
    v_edit = np.array([e for _, e, _ in variants], dtype=np.int64)
    v_row = n_items + np.arange(len(variants))

    log("recall: distinct pairs (Jaccard)")
    dist_long, near_long = _distinct(items, SETS["long>500"])
    dist_short, _ = _distinct(items, SETS["short"])

    log("recall: natural near-duplicates")
    nat = natural_pairs(docs, items, near_long, mode)
    nat_texts = [t for pair in nat["pairs"] for t in pair[1:3]]

    out: dict[str, Any] = {
        "k": K,
        "p_max": P_MAX,
        "scheme": SCHEME,
        "floors": {"recall": FLOOR_RECALL, "fpr": FLOOR_FPR, "scan_budget": SCAN_BUDGET},
        "configs": {},
    }
    for cfg in CFGS:
        log(f"recall: {cfg.name}")
        want = np.zeros(len(texts), dtype=bool)
        if "long" in cfg.sets:
            want |= is_long
        if "short" in cfg.sets:
            want |= is_short
        rows = np.flatnonzero(want)
        sub = [texts[i] for i in rows] + (nat_texts if "long" in cfg.sets else [])
        f_sub, m_sub, ok_sub = fingerprints(cfg.params, sub, workers)
        self_check(cfg.params, sub, f_sub)
        fps = np.zeros(len(texts), dtype=np.uint64)
        mar = np.zeros((len(texts), 64), dtype=np.float32)
        ok = np.zeros(len(texts), dtype=bool)
        fps[rows], mar[rows], ok[rows] = f_sub[: len(rows)], m_sub[: len(rows)], ok_sub[: len(rows)]
        res: dict[str, Any] = {"note": cfg.note, "params": cfg.params.to_manifest()}
        for set_name, dist in (("long>500", dist_long), ("short", dist_short)):
            if ("long" if set_name == "long>500" else "short") not in cfg.sets:
                continue
            res[set_name] = _probe_results(
                fps, mar, ok, v_row, v_orig, v_edit, np.isin(strat[v_orig], SETS[set_name]), dist
            )
        if "long" in cfg.sets:
            res["natural"] = _natural_results(
                nat, f_sub[len(rows) :], m_sub[len(rows) :], ok_sub[len(rows) :], fps, mar, ok
            )
            res["twins_k3"] = _twins(items, fps, ok)
        out["configs"][cfg.name] = res

    out["natural"] = {k: v for k, v in nat.items() if k != "pairs"}
    out["default_probes"] = choose_probes(out)
    out["runtime_s"] = time.perf_counter() - start
    return out


def _probe_results(
    fps: np.ndarray,
    mar: np.ndarray,
    ok: np.ndarray,
    v_row: np.ndarray,
    v_orig: np.ndarray,
    v_edit: np.ndarray,
    in_set: np.ndarray,
    dist: np.ndarray,
) -> dict[str, Any]:
    single = np.isin(v_edit, [EDITS.index(e) for e in SINGLE_EDITS])
    sel = in_set & ok[v_row] & ok[v_orig]
    q, t, e = v_row[sel], v_orig[sel], v_edit[sel]
    pr = probe_matrix(fps, mar, q)
    first = first_hits(pr, fps[t])
    true = np.bitwise_count(fps[q] ^ fps[t])
    dsel = ok[dist[0]] & ok[dist[1]]
    da, db = dist[0][dsel], dist[1][dsel]
    queries = np.unique(da)
    d_probes = probe_matrix(fps, mar, queries)[np.searchsorted(queries, da)]
    d_first = first_hits(d_probes, fps[db])
    d_true = np.bitwise_count(fps[da] ^ fps[db])
    cost = scans(pr[single[sel]])
    held = fps[np.unique(t)]
    read = candidates(pr[single[sel]], held)
    rows = []
    for p in range(P_MAX + 1):
        hit = found(first, true, p)
        fp_hit = found(d_first, d_true, p)
        rows.append(
            {
                "probes": p,
                "scans": float(cost[p]),
                "candidates": float(read[p]),
                "single": _rate(hit[single[sel]]),
                "combined": _rate(hit[e == EDITS.index("combined")]),
                "per_edit": {name: _rate(hit[e == EDITS.index(name)]) for name in SINGLE_EDITS},
                "fpr": _rate(fp_hit),
            }
        )
    per_k = {}
    for k in range(K + 1):
        f_k = first_hits(pr, fps[t], k)
        fd_k = first_hits(d_probes, fps[db], k) if k < K else d_first
        per_k[k] = [
            {
                "recall": float(found(f_k, true, p, k)[single[sel]].mean()),
                "fpr": float(found(fd_k, d_true, p, k).mean()),
            }
            for p in (0, 4, 8, P_MAX)
        ]
    return {
        "rows": rows,
        "per_k": per_k,
        "pairs": {  # every single-edit pair, for paired differences between configs
            "query": q[single[sel]].tolist(),
            "first": first[single[sel]].tolist(),
            "true": true[single[sel]].tolist(),
            "edit": e[single[sel]].tolist(),
        },
        "distinct_pairs": len(da),
        "held": len(np.unique(held)),
    }


def _twins(items: list[Item], fps: np.ndarray, ok: np.ndarray) -> dict[str, int]:
    """zh_CN / zh_TW versions of one page (documents > 500 chars) within k=3."""
    by_key: dict[str, list[int]] = {}
    for i, x in enumerate(items):
        if x.stratum in SETS["long>500"] and ok[i]:
            by_key.setdefault(x.id.replace("/zh_TW/", "/zh_CN/"), []).append(i)
    pairs = [v for v in by_key.values() if len(v) == 2]
    within = sum(int((fps[a] ^ fps[b]).bit_count() <= K) for a, b in pairs)
    return {"pairs": len(pairs), "within_k3": within}


# --------------------------------------------------------------------------- natural


def natural_pairs(
    docs: list[tuple[str, str]], items: list[Item], near_long: np.ndarray, mode: str
) -> dict[str, Any]:
    """Release pairs (same page in bookworm and bullseye, text changed) and sibling
    pairs (distinct pages of one release with Jaccard > the threshold), labelled by
    exact 4-shingle Jaccard. Smoke runs use no network: siblings only."""
    releases = [] if mode == "smoke" else natural.release_pairs()
    rel = []
    for _page, new, old in releases:
        j = jaccard(shingles(new), shingles(old))
        if len(new) > 500 and cjk_share(new) >= 0.2:
            rel.append(("release", new, old, j))
    sib = [
        ("sibling", items[a].text, items[b].text, 1.0) for a, b in zip(near_long[0], near_long[1])
    ]
    pairs = [p for p in rel if p[3] > EXCLUDE_JACCARD] + sib
    return {
        "pairs": pairs,
        "release_pages_changed": len(releases),
        "release_pairs_over_500": len(rel),
        "release_near": sum(p[3] > EXCLUDE_JACCARD for p in rel),
        "release_jaccard_deciles": np.quantile([p[3] for p in rel], np.linspace(0, 1, 11)).tolist()
        if rel
        else [],
        "siblings": len(sib),
    }


def _natural_results(
    nat: dict[str, Any],
    f: np.ndarray,
    m: np.ndarray,
    ok: np.ndarray,
    *_: Any,
) -> dict[str, Any]:
    kinds = np.array([p[0] for p in nat["pairs"]])
    n = len(kinds)
    a, b = np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)  # new (query), old (held)
    sel = ok[a] & ok[b]
    first = first_hits(probe_matrix(f, m, a[sel]), f[b[sel]])
    true = np.bitwise_count(f[a[sel]] ^ f[b[sel]])
    out = {}
    for kind in ("release", "sibling"):
        mask = kinds[sel] == kind
        out[kind] = [_rate(found(first, true, p)[mask]) for p in range(P_MAX + 1)]
    return out


# --------------------------------------------------------------------------- choice


def choose_probes(res: dict[str, Any]) -> dict[str, Any]:
    """The default: the most recall on documents > 500 chars within the scan budget
    (recall only grows with P, so the largest P within it), for the default version."""
    choice = {}
    for name in ("v1", "v2"):
        rows = res["configs"][name]["long>500"]["rows"]
        base = rows[0]["scans"]
        within = [r for r in rows if r["scans"] <= SCAN_BUDGET * base]
        best = max(within, key=lambda r: (r["single"]["rate"], -r["probes"]))
        choice[name] = {
            "probes": best["probes"],
            "scans_ratio": best["scans"] / base,
            "recall": best["single"]["rate"],
            "fpr": best["fpr"]["rate"],
        }
    return choice


# --------------------------------------------------------------------------- section


def run(ev: Any) -> dict[str, Any]:
    return evaluate(ev.docs, ev.items, ev.variants, ev.mode, ev.workers)


def render(res: dict[str, Any]) -> str:
    from .recall_report import render as _render

    return _render(res)


register(
    Section(
        "recall",
        "Multi-probe, fingerprint v2, short texts and natural near-duplicates",
        run,
        render=render,
        suite="eval",
        order=60,
    )
)


def _slim(res: dict[str, Any]) -> dict[str, Any]:
    """The results without the per-pair lists (only the report's paired test uses them)."""
    configs = {
        name: {
            s: ({k: v for k, v in r.items() if k != "pairs"} if isinstance(r, dict) else r)
            for s, r in c.items()
        }
        for name, c in res["configs"].items()
    }
    return {**res, "configs": configs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recall", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "quality.md")
    args = parser.parse_args(argv)
    set_log_tag("recall")
    mode = "quick" if args.quick else "full"
    docs = corpus.for_mode(mode)
    long_items, short_list = build_items(docs, SIZES[mode])
    items = long_items + short_list
    pool = sentence_pool([(d, t) for d, t in docs if cjk_share(t) >= 0.2])
    variants = make_variants(items, pool)
    res = evaluate(docs, items, variants, mode, args.workers)
    from .quality_report import dump_json
    from .recall_report import render as _render
    from .recall_report import splice

    out = ROOT / "bench-results" / ("recall.json" if mode == "full" else f"recall-{mode}.json")
    out.write_text(dump_json(_slim(res)), encoding="utf-8")
    log(f"wrote {out}")
    if mode == "full":
        splice(
            args.doc,
            "Multi-probe, fingerprint v2, short texts and natural near-duplicates",
            _render(res),
        )
        log(f"spliced into {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
