"""Segmenter identity and speed, CLI start-up (issue #13 items 1 and 2).

* ``segmenter``: jieba (the reference, HMM on) vs rjieba with shdb's corrections
  (``simhash_hbase.fingerprint.segment``) vs raw ``rjieba.cut``, chunk by chunk in rotating order
  on the corpus plus its variants (full-width, CRLF, short paragraphs, edge cases;
  in quick/full runs also more Debian packages, Simplified and Traditional, and
  fortunes-zh). Reported: the share of documents whose tokens and whose final
  fingerprints equal jieba's, and the speed ratios (segmentation alone, and the
  whole fingerprint: segmentation + the rest, the rest timed on the same tokens).
* ``startup``: ``shdb query TEXT`` in a fresh process on a small index, wall and
  CPU, interleaved with ``python -c pass`` and the same query with the jieba
  segmenter (its dictionary cached in ~/.cache/shdb).

* ``workers``: ``Fingerprinter.map(workers=2)`` vs ``workers=1`` by CPU accounting
  (parent and children, ``getrusage``): the speedup two idle cores would give is
  workers=1 CPU / max(parent CPU, children CPU / 2). On a shared machine the wall
  speedup says more about the neighbours than about the code (the fingerprint
  section reports it next to the 2-process ceiling measured alongside).
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import report
from .common import ROOT, log
from .context import Context
from .registry import Figure, Section, Skipped, Target, register
from .timing import percentile, ratio, rotated

_CHUNK_DOCS = 16
#: More Debian documentation in Chinese (HTML), Simplified and Traditional.
_MORE_PACKAGES = (
    "debian-reference-zh-cn",
    "debian-reference-zh-tw",
    "maint-guide-zh-cn",
    "maint-guide-zh-tw",
)
_FULL_WIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
_EDGE_CASES = (
    "",
    " ",
    "\r\n",
    "ａｂｃ１２３　全角ＡＳＣＩＩ和中文混排",
    "C++和C#以及node.js，版本3.14.15发布，增长12.5%。AT&T的T恤、AA制与B超",
    "a_b-c+d#e&f%g.h 1.2.3.4 ..--__ 第3.5版 v2.0.1-rc1 100% 2003-04-29 --help",
    "㐀㐁𠀀𠀁中文𪚥字𠮷野家 龥鿕鿖鿫鿿 豈更車賈滑串句龜",
    "emoji 😀 表情👍🏻测试 日本語のテキスト 한국어 텍스트와 中文",
    "\x1b[32m《静夜思》\x1b[m 床前明月光 tab\t中文\t字段 中文\u00a0不换行\u2003空格 零宽\u200b字符",
    "iPhone15ProMax发布会在2023年9月12日举行 ABCdef123中文456ghi 卡拉OK",
)


def _fortunes() -> list[tuple[str, str]]:
    """Debian's fortunes-zh: Tang and Song poems and ~5,600 short modern texts."""
    from . import corpus

    out = corpus.CACHE / "fortunes-zh.jsonl"
    if not out.exists():
        with tempfile.TemporaryDirectory() as tmp:
            deb = corpus._download("fortunes-zh", Path(tmp))
            root = Path(tmp) / "root"
            corpus._run(["dpkg-deb", "-x", str(deb), str(root)], Path(tmp))
            rows = []
            for name in ("chinese", "song100", "tang300"):
                raw = (root / "usr/share/games/fortunes" / name).read_text("utf-8", "replace")
                texts = (t for t in raw.split("\n%\n") if t.strip())
                rows += [{"id": f"fortunes-zh/{name}/{i}", "text": t} for i, t in enumerate(texts)]
        partial = out.with_suffix(".tmp")
        partial.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        partial.rename(out)
    with out.open(encoding="utf-8") as f:
        return [(r["id"], r["text"]) for r in map(json.loads, f)]


def texts_for(ctx: Context) -> list[tuple[str, str]]:
    """The section's documents: the corpus, more packages (not in smoke runs), variants."""
    from . import corpus

    docs = list(ctx.corpus())
    if ctx.mode != "smoke":
        docs += corpus.load(_MORE_PACKAGES) + _fortunes()
    rng = random.Random(13)
    long = [text for _, text in docs if len(text) > 500]
    paragraphs = [p for t in long for p in t.split("\n") if 10 <= len(p) <= 200]
    docs += [(f"short/{i}", p) for i, p in enumerate(rng.sample(paragraphs, len(paragraphs) // 8))]
    for i, text in enumerate(rng.sample(long, len(long) // 10)):
        docs.append((f"full-width/{i}", text.translate(_FULL_WIDTH).replace(" ", "\u3000")))
        docs.append((f"crlf/{i}", text.replace("\n", "\r\n")))
    return docs + [(f"edge/{i}", t) for i, t in enumerate(_EDGE_CASES)]


def _families(docs: Iterable[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for doc_id, _ in docs:
        key = doc_id.split("/", 1)[0]
        counts[key] = counts.get(key, 0) + 1
    return counts


def run_segmenter(ctx: Context) -> dict[str, Any]:
    from simhash_hbase import EmptyDocument, Fingerprinter
    from simhash_hbase.fingerprint import segment

    if segment._installed("rjieba") is None:
        raise Skipped("rjieba (the fast extra) is not installed")
    import rjieba

    docs = texts_for(ctx)
    texts = [t for _, t in docs]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    log(f"segmenter: {len(texts)} docs, {mb:.1f} MB")
    jieba_cut, fixed_cut = segment.segmenter("jieba"), segment.segmenter("rjieba")
    cuts: dict[str, Callable[[str], list[str]]] = {
        "jieba": lambda t: list(jieba_cut(t)),
        "rjieba + corrections": lambda t: list(fixed_cut(t)),
        "rjieba raw": lambda t: rjieba.cut(t, True),
    }
    fingerprinter = Fingerprinter()
    given: list[list[str]] = []
    fingerprinter._cut = lambda _text: given[0]  # the rest of a fingerprint, on given tokens

    def rest(tokens: list[list[str]], chunk: list[str]) -> list[int | None]:
        out: list[int | None] = []
        for toks, text in zip(tokens, chunk):
            given[:] = [toks]
            fp = fingerprinter.fingerprint_or_error(text)
            out.append(None if isinstance(fp, EmptyDocument) else fp)
        return out

    spent = dict.fromkeys([*cuts, "rest of the fingerprint"], 0.0)
    tokens: dict[str, list[list[str]]] = {name: [] for name in cuts}
    fps: dict[str, list[int | None]] = {name: [] for name in cuts}
    for n, start in enumerate(range(0, len(texts), _CHUNK_DOCS)):
        chunk = texts[start : start + _CHUNK_DOCS]
        for name in rotated(list(cuts), n):
            began = time.perf_counter()
            out = [cuts[name](t) for t in chunk]
            spent[name] += time.perf_counter() - began
            tokens[name] += out
        began = time.perf_counter()
        fps["rjieba + corrections"] += rest(tokens["rjieba + corrections"][start:], chunk)
        spent["rest of the fingerprint"] += time.perf_counter() - began
    for name in ("jieba", "rjieba raw"):
        for start in range(0, len(texts), _CHUNK_DOCS):
            chunk = texts[start : start + _CHUNK_DOCS]
            fps[name] += rest(tokens[name][start : start + _CHUNK_DOCS], chunk)
    ref_tokens, ref_fps = tokens["jieba"], fps["jieba"]
    by_impl = {}
    for name in ("rjieba + corrections", "rjieba raw"):
        diff = [i for i, (a, b) in enumerate(zip(ref_fps, fps[name])) if a != b]
        by_impl[name] = {
            "tokens_identical": sum(a == b for a, b in zip(ref_tokens, tokens[name])),
            "fingerprints_identical": len(texts) - len(diff),
            "differing_examples": [docs[i][0] for i in diff[:5]],
            "speed_vs_jieba": ratio(spent["jieba"], spent[name]),
        }
    rest_s = spent["rest of the fingerprint"]
    return {
        "docs": len(texts),
        "megabytes": mb,
        "families": _families(docs),
        "seconds": spent,
        "segmenters": by_impl,
        "fingerprint_speed_vs_jieba": ratio(
            spent["jieba"] + rest_s, spent["rjieba + corrections"] + rest_s
        ),
        "jieba_share_of_fingerprint": spent["jieba"] / (spent["jieba"] + rest_s),
    }


def _pct(part: int, whole: int) -> str:
    return f"{part:,} / {whole:,} ({100 * part / whole:.2f} %)"


def figures_segmenter(r: dict[str, Any]) -> list[Figure]:
    fixed, raw = r["segmenters"]["rjieba + corrections"], r["segmenters"]["rjieba raw"]
    n = r["docs"]
    corpus = f"{n:,} docs, {r['megabytes']:.1f} MB"
    return [
        Figure.judge(
            f"rjieba + corrections: final fingerprints identical to jieba's ({corpus})",
            fixed["fingerprints_identical"] / n,
            Target.at_least(1.0, unit="%"),
            measured=_pct(fixed["fingerprints_identical"], n),
            baseline="jieba 0.42.1, HMM on",
            bound=", ".join(fixed["differing_examples"]),
        ),
        Figure.report(
            "rjieba + corrections: tokens identical to jieba's",
            _pct(fixed["tokens_identical"], n),
            "jieba",
        ),
        Figure.judge(
            "segmentation speed, rjieba + corrections / jieba",
            fixed["speed_vs_jieba"],
            None,
            measured=f"{r['seconds']['rjieba + corrections']:.1f} s",
            baseline=f"jieba {r['seconds']['jieba']:.1f} s",
        ),
        Figure.judge(
            "whole fingerprint speed, with rjieba / with jieba",
            r["fingerprint_speed_vs_jieba"],
            None,
            measured=f"rest of the fingerprint {r['seconds']['rest of the fingerprint']:.1f} s",
            baseline=f"jieba is {r['jieba_share_of_fingerprint']:.0%} of a fingerprint",
            bound="the rest (term filter, TF-IDF, top-N, mmh3, bit sums) is Python",
        ),
        Figure.report(
            "raw rjieba.cut (no corrections): fingerprints identical, speed",
            f"{_pct(raw['fingerprints_identical'], n)}, {raw['speed_vs_jieba']:.1f}x jieba",
            "jieba",
        ),
    ]


def render_segmenter(results: dict[str, Any]) -> str:
    r = results["segmenter"]
    fixed, raw = r["segmenters"]["rjieba + corrections"], r["segmenters"]["rjieba raw"]
    n = r["docs"]
    return report.fill(
        "bench/segmenter.md",
        docs=f"{n:,}",
        megabytes=f"{r['megabytes']:.1f}",
        families=", ".join(f"{k} {v:,}" for k, v in sorted(r["families"].items())),
        fixed_fps=_pct(fixed["fingerprints_identical"], n),
        fixed_tokens=_pct(fixed["tokens_identical"], n),
        raw_fps=_pct(raw["fingerprints_identical"], n),
        raw_tokens=_pct(raw["tokens_identical"], n),
        fixed_speed=f"{fixed['speed_vs_jieba']:.1f}x",
        raw_speed=f"{raw['speed_vs_jieba']:.1f}x",
        fp_speed=f"{r['fingerprint_speed_vs_jieba']:.1f}x",
        jieba_share=f"{r['jieba_share_of_fingerprint']:.0%}",
    )


register(
    Section(
        "segmenter",
        "Segmenter: rjieba vs jieba",
        run_segmenter,
        figures_segmenter,
        render_segmenter,
        order=12,
    )
)


#: Issue 24's floor for a one-shot text query from the command line (median of 10 runs).
_BUDGET_S = 0.3
_QUERY = "今天天气很好，我们去公园散步吧。结巴分词支持加载IDF词典，它包含了大量的词组。"
#: The README's example query: it holds a repeat that jieba itself cuts (docs/segmenters.md).
_REPEAT_FILE = ROOT / "examples" / "repost.txt"
_REPEAT = "shdb query --file examples/repost.txt"


def _child_run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU user+sys) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_startup(ctx: Context) -> dict[str, Any]:
    index = ctx.work / "startup-index"
    docs = ctx.work / "startup-docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n"
            for doc_id, text in ctx.corpus()[:50]
        )
    )
    shdb = [sys.executable, "-m", "simhash_hbase"]
    # An installed package has its bytecode (pip compiles it); without it every run
    # would compile ~35 modules from source (~0.1 s), which no user pays.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [*shdb, "ingest", str(docs), "--index", str(index)],
        env=env,
        check=True,
        capture_output=True,
    )
    query = [*shdb, "query", _QUERY, "--index", str(index)]
    commands = {
        "shdb query": (query, env),
        _REPEAT: ([*shdb, "query", "--file", str(_REPEAT_FILE), "--index", str(index)], env),
        "shdb query, jieba segmenter": (query, {**env, "SHDB_SEGMENTER": "jieba"}),
        "python -c pass": ([sys.executable, "-c", "pass"], env),
    }
    for argv, cenv in commands.values():  # warm: caches written, files in the page cache
        _child_run(argv, cenv)
    runs = ctx.pick(smoke=2, quick=10, full=20)
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for n in range(runs):
        for name in rotated(list(commands), n):
            w, c = _child_run(*commands[name])
            wall[name].append(w)
            cpu[name].append(c)
    return {
        "runs": runs,
        "wall_p50_s": {k: percentile(v, 50) for k, v in wall.items()},
        "cpu_p50_s": {k: percentile(v, 50) for k, v in cpu.items()},
        "load_average": os.getloadavg()[0],
    }


def figures_startup(r: dict[str, Any]) -> list[Figure]:
    q, j, py = "shdb query", "shdb query, jieba segmenter", "python -c pass"
    cpu = r["cpu_p50_s"]
    bound = (
        f"load average {r['load_average']:.1f} on 2 cores: wall = CPU time + waiting for a core; "
        f"CPU {cpu[q]:.2f} s is what an idle machine's wall would be"
    )
    kinds = (("wall", r["wall_p50_s"], bound), ("CPU (user+sys)", cpu, ""))
    return [
        Figure.judge(
            f"CLI text query, {kind} p50 / {_BUDGET_S} s budget",
            s[q] / _BUDGET_S,
            Target.at_most(1.0),
            measured=f"{s[q]:.2f} s",
            baseline=f"jieba segmenter {s[j]:.2f} s; python -c pass {s[py]:.2f} s",
            bound=why,
        )
        for kind, s, why in kinds
    ] + [
        Figure.judge(
            f"CLI query of a text jieba itself cuts ({_REPEAT}), wall p50 / {_BUDGET_S} s budget",
            r["wall_p50_s"][_REPEAT] / _BUDGET_S,
            Target.at_most(1.0),
            measured=f"{r['wall_p50_s'][_REPEAT]:.2f} s",
            baseline=f"shdb query of a text without a repeat {r['wall_p50_s'][q]:.2f} s",
            bound=bound,
        )
    ]


register(Section("startup", "CLI start-up", run_startup, figures_startup, order=13))


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_workers(ctx: Context) -> dict[str, Any]:
    from simhash_hbase import Fingerprinter

    texts = [text for _, text in ctx.corpus()[:: ctx.pick(smoke=1, quick=3, full=1)]]
    chunks = [texts[i : i + _CHUNK_DOCS] for i in range(0, len(texts), _CHUNK_DOCS)]
    fingerprinter = Fingerprinter()
    fingerprinter.fingerprint(texts[0])  # loaded before forking, as ingest does
    totals = {w: {"parent_cpu_s": 0.0, "children_cpu_s": 0.0, "wall_s": 0.0} for w in (1, 2)}
    outputs: dict[int, list[Any]] = {}
    for n in range(ctx.pick(smoke=1, quick=2, full=3)):
        for workers in (1, 2) if n % 2 == 0 else (2, 1):  # alternating order
            parent, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
            began = time.perf_counter()
            out = [fp for chunk in fingerprinter.map(iter(chunks), workers) for fp in chunk]
            t = totals[workers]
            t["wall_s"] += time.perf_counter() - began
            t["parent_cpu_s"] += _cpu(resource.RUSAGE_SELF) - parent
            t["children_cpu_s"] += _cpu(resource.RUSAGE_CHILDREN) - children
            outputs[workers] = [str(x) for x in out]
    one, two = totals[1], totals[2]
    busiest = max(two["parent_cpu_s"], two["children_cpu_s"] / 2)
    return {
        "docs": len(texts),
        "chunk_docs": _CHUNK_DOCS,
        "totals": {str(w): t for w, t in totals.items()},
        "projected_speedup": ratio(one["parent_cpu_s"] + one["children_cpu_s"], busiest),
        "wall_speedup": ratio(one["wall_s"], two["wall_s"]),
        "cpu_overhead": (two["parent_cpu_s"] + two["children_cpu_s"])
        / (one["parent_cpu_s"] + one["children_cpu_s"])
        - 1,
        "identical_fingerprints": outputs[1] == outputs[2],
        "load_average": os.getloadavg()[0],
    }


def figures_workers(r: dict[str, Any]) -> list[Figure]:
    one, two = r["totals"]["1"], r["totals"]["2"]
    return [
        Figure.judge(
            "Fingerprinter.map workers=2 / workers=1, projected for 2 idle cores (CPU accounting)",
            r["projected_speedup"],
            Target.at_least(1.8),
            measured=f"parent {two['parent_cpu_s']:.2f} s + children "
            f"{two['children_cpu_s']:.2f} s CPU",
            baseline=f"workers=1 {one['parent_cpu_s'] + one['children_cpu_s']:.2f} s CPU",
            exact=r["identical_fingerprints"],
            bound=f"2 processes cost {r['cpu_overhead']:+.0%} CPU; wall speedup here "
            f"{r['wall_speedup']:.2f}x at load average {r['load_average']:.1f} (shared cores)",
        )
    ]


register(Section("workers", "Fingerprinting workers", run_workers, figures_workers, order=14))
