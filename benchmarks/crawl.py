"""Crawl-like pages: the two nets (SimHash pigeonhole, MinHash LSH) per kind of copy.

    python -m benchmarks.crawl [--quick|--smoke]   # its section of docs/quality.md,
                                                   # bench-results/crawl[-quick].json

Real Chinese prose from Debian packages (the GIMP manual and the man pages of
``manpages-zh``, see :mod:`benchmarks.corpus`), set in generated site templates the
way an article looks after main-content extraction: a breadcrumb and byline above,
an editor line, a copyright line and "related articles" titles below. Sources that
already share shingles (exact 5-shingle Jaccard >= 0.3) are dropped first, so every
pair across families is a true negative. Each source is a family: the original on
its topic's site, plus one copy of one kind:

- ``repost``: the same article on another site's template;
- ``traditional``: OpenCC ``s2twp`` (Taiwan phrases) of it, on another template;
- ``numbers``: its numbers and dates changed; ``punct_width``: full/half-width
  punctuation, digits and Latin letters swapped;
- ``truncation``: its first 65-90 %; ``sentences``: one or two sentences added and
  one removed;
- ``short``: a 20-200 character post and an edited repost of it.

Hard negatives: distinct articles of one topic share their site's template. The
natural near-duplicates are Debian's pages in two releases (bookworm and bullseye,
:mod:`benchmarks.natural`), labelled by exact 5-shingle Jaccard.

Every configuration is judged by the library itself: an index's pairs are
:func:`simhash_hbase.layout.nets.batch_pairs` of its fingerprints and signatures
(tests/test_minhash.py proves it equals what the index's queries return), and the
default one also through a real embedded index (ingest, then every page queried),
which gives the cost figures, against a ``simhash``-only index in the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase.errors import EmptyDocument
from simhash_hbase.fingerprint.minhash import MinHasher, MinHashParams, shingle_set
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints, index_records
from simhash_hbase.layout.nets import band_candidates

from . import corpus
from .common import DOCS_DIR, RESULTS_DIR, committed_section, log, replace_section
from .judged import (
    NO_EVIDENCE,
    NO_EVIDENCE_ROW,
    K,
    Page,
    Signed,
    jaccard,
    net_pairs,
    opened,
    sign,
    under_half,
)
from .texts import CJK_CHAR, blocks, unwrap

KINDS = (
    "repost",
    "traditional",
    "numbers",
    "punct_width",
    "truncation",
    "sentences",
    "short",
)
SITES = ("新浪科技", "网易数码", "搜狐IT", "腾讯新闻", "凤凰资讯", "中关村在线")
EDITORS = ("张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆")
SOURCE_JACCARD = 0.3  # sources sharing more than this are dropped (not negatives)
ACCIDENTAL_JACCARD = 0.5
NATURAL_JACCARD = 0.9
FAR_JACCARD = 0.3
#: bands x rows and thresholds compared (the default is bold in the report).
GRID = ((25, 5), (32, 4), (42, 3), (20, 6), (16, 8))
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
FLOORS = (0.0, 0.2, 0.3, 0.4)
MODES = {"full": 1200, "quick": 420, "smoke": 60}


# -- the crawl-like set -------------------------------------------------------------
def _topic(doc_id: str) -> str:
    name = doc_id.rsplit("/", 1)[-1].split(".", 1)[0]
    if doc_id.startswith("manpages"):
        return "man:" + doc_id.split("/")[-2]
    return "gimp:" + "-".join(name.split("-")[:2])


def _article(text: str) -> str:
    paragraphs = [unwrap(b) for b in blocks(text)]
    return "\n".join(p for p in paragraphs if p)


def _sources(limit: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(id, topic, article) of simplified-Chinese pages, no two sharing much."""
    docs = corpus.for_mode("smoke") if limit <= MODES["smoke"] else corpus.load()
    pool = []
    for doc_id, text in docs:
        if "zh_TW" in doc_id:
            continue
        article = _article(text)
        cjk = len(CJK_CHAR.findall(article))
        if cjk >= 0.5 * len(re.findall(r"\w", article)) and len(article) >= 300:
            pool.append((doc_id, _topic(doc_id), article[:3000]))
    rng.shuffle(pool)
    return [pool[i] for i in _distinct([a for _, _, a in pool])][:limit]


def _distinct(texts: Sequence[str]) -> list[int]:
    """Indexes of ``texts`` without those sharing >= SOURCE_JACCARD of their
    shingles (folded) with an earlier kept one: candidates by a loose banding
    (64 x 2), then the exact Jaccard."""
    params = MinHashParams(bands=64, rows=2)
    hasher = MinHasher(params)
    sigs = [hasher.signature(t) for t in texts]
    keys = np.array([s.bands if s is not None else np.zeros(64, np.uint32) for s in sigs])
    has = np.array([s is not None for s in sigs], dtype=bool)
    drop = set(np.flatnonzero(~has).tolist())
    sets = [shingle_set(t, params) for t in texts]
    for i, j in band_candidates(keys, has).tolist():
        if i in drop or j in drop:
            continue
        a, b = sets[i], sets[j]
        if len(a & b) / max(len(a | b), 1) >= SOURCE_JACCARD:
            drop.add(j)
    return [i for i in range(len(texts)) if i not in drop]


def _template(site: int, topic: str, titles: Sequence[str], rng: random.Random) -> tuple[str, str]:
    name = SITES[site % len(SITES)]
    date = f"20{rng.randint(18, 24)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    head = (
        f"{name}首页 > {topic.split(':')[0]}频道 > 正文\n"
        f"发布时间：{date} 来源：{name} 阅读：{rng.randint(100, 99999)}次"
    )
    related = "；".join(titles)
    foot = (
        f"责任编辑：{EDITORS[site % len(EDITORS)]}\n"
        f"相关文章：{related}\n版权所有 © {name} 保留所有权利。"
    )
    return head, foot


def _on_site(article: str, site: int, topic: str, titles: Sequence[str], rng: random.Random) -> str:
    head, foot = _template(site, topic, titles, rng)
    return f"{head}\n{article}\n{foot}"


def _title(article: str) -> str:
    return article.split("\n", 1)[0][:24]


_NUMBER = re.compile(r"\d+")
_HALF = "，。！？：；（）"
_FULL_OF = {",": "，", ".": "。", "!": "！", "?": "？", ":": "：", ";": "；", "(": "（", ")": "）"}


def _numbers(text: str, rng: random.Random) -> str:
    return _NUMBER.sub(lambda m: str(rng.randint(0, 10 ** len(m.group()) - 1)), text)


def _width(text: str, rng: random.Random) -> str:
    """Full-width <-> half-width punctuation, digits and Latin letters."""
    half_of = {v: k for k, v in _FULL_OF.items()}
    out = []
    for ch in text:
        if ch in half_of:
            out.append(half_of[ch])
        elif ch in _FULL_OF:
            out.append(_FULL_OF[ch])
        elif ch.isascii() and ch.isalnum():
            out.append(chr(ord(ch) + 0xFEE0))
        else:
            out.append(ch)
    return "".join(out)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[。！？!?\n])", text) if s]


def _edit_sentences(text: str, donor: str, rng: random.Random) -> str:
    parts = _sentences(text)
    if len(parts) > 3:
        del parts[rng.randrange(1, len(parts))]
    extra = [s for s in _sentences(donor) if 8 <= len(s) <= 80] or [donor[:40]]
    for _ in range(rng.randint(1, 2)):
        parts.insert(rng.randrange(1, len(parts) + 1), rng.choice(extra))
    return "".join(parts)


def _short_post(article: str, rng: random.Random) -> str:
    body = article.replace("\n", "")
    size = rng.randint(20, 200)
    start = rng.randrange(0, max(len(body) - size, 1))
    return body[start : start + size]


def _short_copy(post: str, rng: random.Random) -> str:
    edit = rng.choice(("prefix", "suffix", "punct", "tag"))
    if edit == "prefix":
        return "转发：" + post
    if edit == "suffix":
        return post + rng.choice(("！", "。赞", "，值得一看", "（完）"))
    if edit == "punct":
        return _width(post, rng)
    return post + " #" + rng.choice(("科技", "教程", "分享", "收藏")) + "#"


def build(n: int, seed: int = 0) -> list[Page]:
    """The crawl-like pages: one family per source, in a fixed order."""
    rng = random.Random(seed)
    sources = _sources(n, rng)
    import opencc

    to_tw = opencc.OpenCC("s2twp").convert
    by_topic: dict[str, list[int]] = defaultdict(list)
    for i, (_, topic, _) in enumerate(sources):
        by_topic[topic].append(i)
    topics = sorted(by_topic)
    site_of = {t: i for i, t in enumerate(topics)}
    pages: list[Page] = []
    short_family = len(sources)
    for i, (_, topic, article) in enumerate(sources):
        mates = [sources[j][2] for j in by_topic[topic] if j != i][:3]
        titles = [_title(m) for m in mates] or ["更多精彩内容"]
        site = site_of[topic]
        other = site + 1 + rng.randrange(len(SITES) - 1)
        o = len(pages)
        pages.append(Page(f"f{i}", _on_site(article, site, topic, titles, rng), i, "", False))
        cut = int(len(article) * rng.uniform(0.65, 0.9))
        donor = sources[(i + 1) % len(sources)][2]
        copies = {
            "repost": _on_site(article, other, topic, titles[::-1], rng),
            "traditional": _on_site(to_tw(article), other, topic, titles, rng),
            "numbers": _on_site(_numbers(article, rng), site, topic, titles, rng),
            "punct_width": _on_site(_width(article, rng), site, topic, titles, rng),
            "truncation": _on_site(article[:cut], site, topic, titles, rng),
            "sentences": _on_site(_edit_sentences(article, donor, rng), site, topic, titles, rng),
        }
        for kind, text in copies.items():
            pages.append(Page(f"f{i}-{kind}", text, i, kind, False, o))
        post = _short_post(article, rng)
        at = len(pages)
        pages.append(Page(f"s{i}", post, short_family + i, "", True))
        pages.append(
            Page(f"s{i}-copy", _short_copy(post, rng), short_family + i, "short", True, at)
        )
    return pages


# -- judging ------------------------------------------------------------------------
@dataclass
class Scores:
    recall: dict[str, float]
    recall_all: float
    precision: float
    reported: int
    false: int
    hard_false: int  # false pairs of one site and topic
    short_recall: float
    short_precision: float
    #: Pairs of different families whose exact Jaccard is >= ACCIDENTAL_JACCARD: real
    #: near-copies the generator made by accident (short posts cut from one shared
    #: footer, a post and a truncation of its own article); not counted false in
    #: ``precision_labelled``.
    accidental: int = 0
    precision_labelled: float = 1.0
    short_precision_labelled: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def score(pages: Sequence[Page], pairs: Sequence[tuple[int, int]]) -> Scores:
    found = {(min(i, j), max(i, j)) for i, j in pairs}
    kinds = Counter(p.kind for p in pages if p.kind)
    hit: Counter[str] = Counter(
        p.kind for n, p in enumerate(pages) if p.kind and (p.original, n) in found
    )
    false = hard = accidental = short_accidental = 0
    short_reported = short_false = 0
    for i, j in found:
        a, b = pages[i], pages[j]
        if a.short or b.short:
            short_reported += 1
        if a.family == b.family:
            continue
        false += 1
        short_false += a.short or b.short
        hard += _site(a) == _site(b) and not (a.short or b.short)
        if jaccard(a.text, b.text) >= ACCIDENTAL_JACCARD:
            accidental += 1
            short_accidental += a.short or b.short
    recall = {k: hit[k] / kinds[k] for k in KINDS if kinds[k]}
    total = sum(kinds.values())
    short_hit = hit["short"]
    return Scores(
        recall=recall,
        recall_all=sum(hit.values()) / total,
        precision=1 - false / len(found) if found else 1.0,
        reported=len(found),
        false=false,
        hard_false=hard,
        short_recall=short_hit / kinds["short"] if kinds["short"] else 0.0,
        short_precision=1 - short_false / short_reported if short_reported else 1.0,
        accidental=accidental,
        precision_labelled=1 - (false - accidental) / len(found) if found else 1.0,
        short_precision_labelled=(
            1 - (short_false - short_accidental) / short_reported if short_reported else 1.0
        ),
    )


def _site(page: Page) -> str:
    return page.text.split("首页", 1)[0]


def candidates_per_page(signed: Signed, params: MinHashParams) -> float:
    keys = np.zeros((len(signed.bands), params.bands), dtype=np.uint32)
    has = np.array([b is not None for b in signed.bands])
    for i in np.flatnonzero(has).tolist():
        keys[i] = np.frombuffer(signed.bands[i], dtype=">u4")  # type: ignore[arg-type]
    pairs = band_candidates(keys, has)
    return 2 * len(pairs) / max(len(signed.bands), 1)


# -- natural near-duplicates -----------------------------------------------------------
def natural(mode: str, fingerprint: Any, params: MinHashParams, scheme: str) -> dict[str, Any]:
    """Debian's pages in two releases: recall of pairs with Jaccard >= 0.9, and every
    reported pair of Jaccard <= 0.3 among all pages of both releases."""
    from . import natural as nat

    try:
        releases = nat.release_pairs()
    except (RuntimeError, OSError) as exc:  # no network: the section says so
        return {"skipped": str(exc)[:200]}
    if mode != "full":
        releases = releases[: 400 if mode == "quick" else 40]
    texts: list[str] = []
    for _, new, old in releases:
        texts += [new, old]
    fps = np.array([fingerprint(t) for t in texts], dtype=np.uint64)
    signed = sign([Page(str(i), t, i // 2, "", False) for i, t in enumerate(texts)], fps, params)
    found = net_pairs(signed, "both", params, scheme)
    sets = [shingle_set(t, params) for t in texts]

    def jac(i: int, j: int) -> float:
        return len(sets[i] & sets[j]) / max(len(sets[i] | sets[j]), 1)

    near = [i for i in range(0, len(texts), 2) if jac(i, i + 1) >= NATURAL_JACCARD]
    got = {(min(i, j), max(i, j)) for i, j in found}
    hits = sum((i, i + 1) in got for i in near)
    far = [p for p in got if jac(*p) <= FAR_JACCARD]
    return {
        "pages": len(texts),
        "near_pairs": len(near),
        "recall": hits / len(near) if near else None,
        "reported": len(got),
        "far_reported": len(far),
    }


# -- short texts -------------------------------------------------------------------------
SHORT_ITEMS = {"full": 3000, "quick": 800, "smoke": 60}


def short_texts(mode: str, fingerprint: Any, params: MinHashParams, scheme: str) -> dict[str, Any]:
    """The quality evaluation's short texts (40-200 character paragraphs and man
    page NAME lines, :func:`benchmarks.texts.short_items`) and its edits of them
    (:mod:`benchmarks.edits`): recall of each edit and precision over every
    reported pair, each net alone and both."""
    from .edits import EDITS, make_variants
    from .texts import sentence_pool, short_items

    docs = corpus.for_mode("smoke") if mode == "smoke" else corpus.load()
    items = short_items(docs)
    random.Random(3).shuffle(items)
    items = items[: SHORT_ITEMS[mode] * 2]
    items = [items[i] for i in _distinct([it.text for it in items])][: SHORT_ITEMS[mode]]
    variants = make_variants(items, sentence_pool(docs))
    texts = [it.text for it in items] + [text for _, _, text in variants]
    family = list(range(len(items))) + [i for i, _, _ in variants]
    edit_of = [""] * len(items) + [EDITS[e] for _, e, _ in variants]
    keep = []
    fps = []
    for n, text in enumerate(texts):
        try:
            fps.append(fingerprint(text))
        except EmptyDocument:
            continue
        keep.append(n)
    pages = [Page(str(n), texts[n], family[n], edit_of[n], True) for n in keep]
    signed = sign(pages, np.array(fps, dtype=np.uint64), params)
    bare = replace(params, evidence=0)
    unsigned = sign(pages, np.array(fps, dtype=np.uint64), bare)
    planted = Counter(p.kind for p in pages if p.kind)
    pos = {n: i for i, n in enumerate(keep)}
    out: dict[str, Any] = {"originals": len(items), "variants": sum(planted.values())}
    runs = [(n, signed, params, n) for n in ("simhash", "lsh", "both")]
    for name, sig, lsh, nets in [*runs, (NO_EVIDENCE_ROW, unsigned, bare, "both")]:
        found = {(min(i, j), max(i, j)) for i, j in net_pairs(sig, nets, lsh, scheme)}
        hit: Counter[str] = Counter()
        for n in keep[len([k for k in keep if k < len(items)]) :]:
            orig = family[n]
            if orig in pos and (pos[orig], pos[n]) in found:
                hit[edit_of[n]] += 1
        false = sum(pages[i].family != pages[j].family for i, j in found)
        out[name] = {
            "recall": sum(hit.values()) / max(sum(planted.values()), 1),
            "per_edit": {e: hit[e] / planted[e] for e in planted},
            "precision": 1 - false / len(found) if found else 1.0,
            "reported": len(found),
            "false": false,
        }
    return out


# -- cost through real indexes ----------------------------------------------------------
def cost(pages: Sequence[Page], rounds: int = 3) -> dict[str, Any]:
    """Ingest and query through embedded indexes of each net setting, interleaved
    in the same run (the order alternating by round): the originals are ingested
    as texts, 50,000 random fingerprints into another index, then every copy is
    queried (the question a crawler asks of a new page). Rates and per-query times
    in CPU time (this process's), robust to the shared machine's load, and wall."""
    originals = [(p.doc_id, p.text) for p in pages if p.original < 0]
    copies = [p.text for p in pages if p.original >= 0]
    rng = np.random.default_rng(7)
    fps = [(f"r{i}", int(fp)) for i, fp in enumerate(rng.integers(0, 2**63, 50_000))]
    nets_all = ("simhash", "simhash+lsh", NO_EVIDENCE)
    keys = ("ingest_text", "ingest_text_cpu", "ingest_fp", "ingest_fp_cpu", "query", "query_cpu")
    out: dict[str, dict[str, Any]] = {nets: {k: [] for k in keys} for nets in nets_all}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = nets_all if r % 2 == 0 else nets_all[::-1]
            indexes = {}
            for nets in order:
                index = opened(f"{tmp}/{r}-{nets}", nets)
                index.fingerprint("预热")
                index.signature("预热")
                row = out[nets]
                _timed(row, "ingest_text", len(originals), index_records, index, originals)
                with opened(f"{tmp}/{r}-{nets}-fp", nets) as bare:
                    _timed(row, "ingest_fp", len(fps), index_fingerprints, bare, fps)
                indexes[nets] = index
            for text in copies:  # query by query, the two indexes alternating
                for nets in order:
                    t0, c0 = time.perf_counter(), time.process_time()
                    indexes[nets].query(text)
                    out[nets]["query"].append((time.perf_counter() - t0) * 1e6)
                    out[nets]["query_cpu"].append((time.process_time() - c0) * 1e6)
            for nets, index in indexes.items():
                stats = index.stats()
                out[nets].update(cells=stats["index_cells"], documents=stats["documents"])
                index.close()
                out[nets]["bytes"] = sum(
                    f.stat().st_size for f in Path(f"{tmp}/{r}-{nets}").glob("*.mdb")
                )
    for row in out.values():
        for key in keys:
            row[key] = statistics.median(row[key])
        row["rows_per_text_page"] = row["cells"] / len(originals)
    return out


def _timed(row: dict[str, Any], key: str, n: int, ingest: Any, index: Any, items: Any) -> None:
    """Items per second of one ingest, wall and CPU, appended to ``row``."""
    t0, c0 = time.perf_counter(), time.process_time()
    ingest(index, items, IngestOptions(find_k=None))
    row[key].append(n / (time.perf_counter() - t0))
    row[key + "_cpu"].append(n / (time.process_time() - c0))


# -- report -----------------------------------------------------------------------------
def run(mode: str) -> dict[str, Any]:
    started = time.perf_counter()
    n = MODES[mode]
    log(f"crawl: building the set ({n} sources)")
    pages = build(n)
    with tempfile.TemporaryDirectory() as tmp, SimhashIndex.open(f"{tmp}/ix") as index:
        fingerprint = index.fingerprint
        default = index.lsh
        scheme = index.scheme.name
        fp_settings = {
            k: index.manifest["fingerprint"].get(k) for k in ("version", "fold", "top_n")
        }
    assert default is not None
    result: dict[str, Any] = {
        "mode": mode,
        "pages": len(pages),
        "families": len({p.family for p in pages}),
        "kinds": dict(Counter(p.kind for p in pages if p.kind)),
        "fingerprint": fp_settings,
        "default": {
            k: getattr(default, k)
            for k in ("bands", "rows", "threshold", "floor", "shingle", "sketch_bits", "evidence")
        },
    }
    log("crawl: signatures")
    fps = np.array([fingerprint(p.text) for p in pages], dtype=np.uint64)
    signed = {(b, r): sign(pages, fps, replace(default, bands=b, rows=r)) for b, r in GRID}
    base = signed[(default.bands, default.rows)]
    bare = replace(default, evidence=0)
    runs = [(n, base, default, n) for n in ("simhash", "lsh", "both")]
    runs.append((NO_EVIDENCE_ROW, sign(pages, fps, bare), bare, "both"))
    result["nets"] = {}
    for name, sig, params, nets in runs:
        found = net_pairs(sig, nets, params, scheme)
        result["nets"][name] = score(pages, found).to_json() | under_half(pages, found)
    frontier = []
    for (b, r), s in signed.items():
        params = replace(default, bands=b, rows=r)
        for t in THRESHOLDS:
            for f in FLOORS:
                if f > t:
                    continue
                p = replace(params, threshold=t, floor=f)
                sc = score(pages, net_pairs(s, "both", p, scheme))
                frontier.append(
                    {
                        "bands": b,
                        "rows": r,
                        "threshold": t,
                        "floor": f,
                        **sc.to_json(),
                        "candidates_per_page": candidates_per_page(s, p),
                    }
                )
    result["frontier"] = frontier
    log("crawl: natural near-duplicates")
    result["natural"] = natural(mode, fingerprint, default, scheme)
    log("crawl: short texts")
    result["short"] = short_texts(mode, fingerprint, default, scheme)
    log("crawl: cost through embedded indexes")
    result["cost"] = cost(pages, rounds=1 if mode == "smoke" else 4)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _flag(mode: str) -> str:
    return "" if mode == "full" else f" --{mode}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render(r: dict[str, Any]) -> str:
    d = r["default"]
    lines = [
        BEGIN,
        "## Crawl-like pages: the two nets",
        "",
        f"Generated by `python -m benchmarks.crawl{_flag(r['mode'])}` "
        f"({r['seconds']} s): {r['pages']} pages, {r['families']} families: each source "
        "article on its topic's site with one copy of each kind, and a short post with "
        f"an edited repost ({', '.join(f'{k} {v}' for k, v in r['kinds'].items())} "
        "copies). Fingerprint "
        f"{r['fingerprint']}, k={K}. Default LSH: {d['bands']} bands x {d['rows']} rows of "
        f"{d['shingle']}-character shingles, sketch 128 x {d['sketch_bits']} bits = "
        f"{128 * d['sketch_bits'] // 8} bytes, evidence {d.get('evidence', 0)} bins "
        f"(docs/nets.md), threshold {d['threshold']}, floor {d['floor']}. "
        "How the set is built: `benchmarks/crawl.py`. A pair counts once; precision is "
        "over every reported pair (any two pages of different families is false). "
        f"Accidental: false pairs whose exact 5-shingle Jaccard is >= {ACCIDENTAL_JACCARD}, "
        "real near-copies the generator made by accident (short posts cut from one "
        "shared footer or licence text, a post and a truncation of its own article).",
        "",
        "### Per kind, each net alone and both (default settings)",
        "",
        "| nets | "
        + " | ".join(KINDS)
        + " | recall | precision | false pairs (same site; accidental) "
        "| precision without the accidental | short recall / precision "
        "(without the accidental) | under 0.5 | missed at J >= 0.8 |",
        "|---|" + "---|" * (len(KINDS) + 7),
    ]
    for nets, s in r["nets"].items():
        lines.append(
            f"| {nets} | "
            + " | ".join(_pct(s["recall"].get(k)) for k in KINDS)
            + f" | **{_pct(s['recall_all'])}** | **{_pct(s['precision'])}** "
            f"| {s['false']} ({s['hard_false']}; {s['accidental']}) "
            f"| {_pct(s['precision_labelled'])} "
            f"| {_pct(s['short_recall'])} / {_pct(s['short_precision'])} "
            f"({_pct(s['short_precision_labelled'])}) "
            f"| {s['under_half']} ({_pct(s['under_half_share'])}) "
            f"| {len(s['missed_at_08'])} |"
        )
    lines += [
        "",
        "### Frontier: bands x rows, threshold, floor (both nets)",
        "",
        "Floor: a pigeonhole match (within k bits) is dropped when both sketches estimate "
        "a Jaccard below it. Candidates: LSH band candidates per page "
        "(each page of the set queried).",
        "",
        "| bands x rows | threshold | floor | recall | worst kind | precision | false "
        "| short recall | cand./page |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["frontier"]:
        worst = min(row["recall"].items(), key=lambda kv: kv[1])
        bold = (row["bands"], row["rows"], row["threshold"], row["floor"]) == (
            d["bands"],
            d["rows"],
            d["threshold"],
            d["floor"],
        )
        mark = "**" if bold else ""
        lines.append(
            f"| {mark}{row['bands']}x{row['rows']}{mark} | {row['threshold']} | {row['floor']} | "
            f"{_pct(row['recall_all'])} | {worst[0]} {_pct(worst[1])} | {_pct(row['precision'])} | "
            f"{row['false']} | {_pct(row['short_recall'])} | {row['candidates_per_page']:.2f} |"
        )
    nat = r["natural"]
    lines += ["", "### Natural near-duplicates (Debian bookworm vs bullseye pages)", ""]
    if "skipped" in nat:
        lines.append(f"Skipped: {nat['skipped']}")
    else:
        lines.append(
            f"{nat['pages']} pages; {nat['near_pairs']} pairs of exact 5-shingle Jaccard >= "
            f"{NATURAL_JACCARD}: recall **{_pct(nat['recall'])}**; "
            f"{nat['reported']} pairs reported "
            f"over all pages, **{nat['far_reported']}** of them with Jaccard <= {FAR_JACCARD}."
        )
    sh = r["short"]
    lines += [
        "",
        "### Short texts (the quality evaluation's short texts and edits)",
        "",
        f"{sh['originals']} short texts (40-200 characters, and man page NAME lines) and "
        f"{sh['variants']} edited copies (`benchmarks/edits.py`); texts sharing >= "
        f"{SOURCE_JACCARD} of their shingles with another (zh_CN/zh_TW twins, aliases) "
        "are dropped first, so any pair of different originals is false. Precision over "
        "every reported pair.",
        "",
        "| nets | recall | precision | reported | false | per edit |",
        "|---|---|---|---|---|---|",
    ]
    for nets in ("simhash", "lsh", "both", NO_EVIDENCE_ROW):
        row = sh[nets]
        edits = ", ".join(f"{e} {_pct(v)}" for e, v in row["per_edit"].items())
        lines.append(
            f"| {nets} | **{_pct(row['recall'])}** | **{_pct(row['precision'])}** "
            f"| {row['reported']} | {row['false']} | {edits} |"
        )
    c = r["cost"]
    s, b = c["simhash"], c["simhash+lsh"]
    lines += [
        "",
        "### Cost (embedded, same run, median of rounds)",
        "",
        "The machine is shared (load 8-14 during these runs): CPU time of this process "
        "is the figure to read, wall time is shown beside it.",
        "",
        "| index | ingest text pages/s, CPU / wall | ingest fingerprints/s, CPU / wall "
        "| query p50 (a copy's text), CPU / wall | rows per text page | bytes per text page |",
        "|---|---|---|---|---|---|",
    ]
    e = c[NO_EVIDENCE]
    for name, row in (("simhash", s), ("simhash+lsh (default)", b), (NO_EVIDENCE, e)):
        lines.append(
            f"| {name} | {row['ingest_text_cpu']:.0f} / {row['ingest_text']:.0f} "
            f"| {row['ingest_fp_cpu']:.0f} / {row['ingest_fp']:.0f} "
            f"| {row['query_cpu']:.0f} / {row['query']:.0f} us "
            f"| {row['rows_per_text_page']:.0f} | {row['bytes'] / row['documents']:.0f} |"
        )

    def ratio(key: str) -> str:
        return f"{b[key] / s[key]:.2f}x"

    lines += [
        "",
        f"Ratios, default / simhash-only (CPU; wall): ingest text {ratio('ingest_text_cpu')}; "
        f"{ratio('ingest_text')}, ingest fingerprints {ratio('ingest_fp_cpu')}; "
        f"{ratio('ingest_fp')}, query p50 {ratio('query_cpu')}; {ratio('query')}, "
        f"bytes per text page {b['bytes'] / s['bytes']:.2f}x. A query sends both nets' "
        "prefixes in its one scan request (no extra round trip); the docs rows it then "
        "reads in one multi-get are, on HBase, the read that confirms hits.",
        "",
        f"The evidence, default / {NO_EVIDENCE} (CPU; wall): ingest text "
        f"{b['ingest_text_cpu'] / e['ingest_text_cpu']:.2f}x; "
        f"{b['ingest_text'] / e['ingest_text']:.2f}x, query p50 "
        f"{b['query_cpu'] / e['query_cpu']:.2f}x; {b['query'] / e['query']:.2f}x, bytes "
        f"per text page {(b['bytes'] - e['bytes']) / b['documents']:+.0f} "
        f"({b['bytes'] / e['bytes']:.2f}x).",
        END,
    ]
    return "\n".join(lines)


BEGIN = "<!-- crawl section: generated by python -m benchmarks.crawl; do not edit -->"
END = "<!-- end of the crawl section -->"


def saved_section(doc: Path = DOCS_DIR / "quality.md") -> str | None:
    """The section of the last full (else quick) run, for benchmarks.eval to keep:
    rendered from its results where this machine has them (bench-results/ is not in
    git), else as it stands in the committed page."""
    for name in ("crawl.json", "crawl-quick.json"):
        path = RESULTS_DIR / name
        if path.exists():
            return render(json.loads(path.read_text(encoding="utf-8")))
    return committed_section(BEGIN, END, doc)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    result = run(mode)
    name = "crawl.json" if mode == "full" else f"crawl-{mode}.json"
    if mode != "smoke":
        (RESULTS_DIR / name).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        replace_section(render(result), BEGIN, END)
    print(render(result))


if __name__ == "__main__":
    main()
