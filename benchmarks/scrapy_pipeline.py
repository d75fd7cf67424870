"""The Scrapy pipeline on a real local crawl, against ``shdb ingest`` of the same pages.

A generated templated site (``benchmarks.site``) is served on 127.0.0.1 (keep-alive,
by a process of its own) and crawled by Scrapy (``benchmarks.scrapy_crawl``,
CONCURRENT_REQUESTS 16, the settings a crawl team uses: ``CRAWL_SETTINGS``) timed
ways, exporting no items: with no pipeline; with the pipeline (drop mode, a fresh
embedded index); with the pipeline under Scrapy's default settings; and with a
hand-written pipeline that fingerprints and commits each item on the reactor. A
crawl in tag mode gives the pairs. The same page files are ingested by ``shdb ingest
--report``. The judged pair (pipeline crawl, ingest) runs three times in turn, the
median round reported, so that a shared machine's load falls on both alike. A second
crawl with the first crawl's index measures what a re-crawl drops. Times are wall
seconds of each subprocess, from its start to its exit, on the same interpreter
(``sys.executable``): start-up included on both sides (imports; for the crawl, also the
index process's start and its close); CPU is the crawl's, its fingerprinting
process's, and the server's.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from . import report
from .context import Context
from .registry import Figure, Section, Target, register
from .site import Page, build_pages, serving, write_site


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one subprocess (start-up included)."""
    cpu, began = _children_cpu(), time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - began, _children_cpu() - cpu


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux's /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _crawl(site: tuple[str, int], out: Path, *settings: str) -> tuple[float, float, dict[str, Any]]:
    """One crawl: its wall and CPU seconds, and its stats with the site server's CPU."""
    base, server = site
    argv = [sys.executable, "-m", "benchmarks.scrapy_crawl", base, str(out)]
    served = _process_cpu(server)
    wall, cpu = _timed([*argv, *settings])
    stats = json.loads((out / "stats.json").read_text("utf-8"))
    stats["server_cpu_seconds"] = _process_cpu(server) - served
    return wall, cpu, stats


def _crawl_pairs(out: Path, base: str) -> set[frozenset[str]]:
    pairs = set()
    for line in (out / "items.jsonl").read_text("utf-8").splitlines():
        item = json.loads(line)
        path = item["url"].removeprefix(base + "/")
        pairs |= {
            frozenset((path, m["id"].removeprefix(base + "/"))) for m in item["near_duplicates"]
        }
    return pairs


def _ingest(root: Path, work: Path) -> tuple[float, float, set[frozenset[str]]]:
    work.mkdir(parents=True, exist_ok=True)
    report = work / "report.jsonl"
    index = str(work / "ingest-index")
    # the interpreter the crawl runs on, as the crawl is started: ``shdb`` on PATH can be
    # a version manager's shim (pyenv's: a shell and ``pyenv exec``, 20-30 ms a run)
    argv = [sys.executable, "-m", "simhash_hbase", "ingest", str(root), "-i", index]
    wall, cpu = _timed([*argv, "--report", str(report)])
    pairs = set()
    for line in report.read_text("utf-8").splitlines():
        row = json.loads(line)
        pairs |= {frozenset((row["id"], m["id"])) for m in row["matches"]}
    return wall, cpu, pairs


def _scores(pages: list[Page], pairs: set[frozenset[str]]) -> dict[str, float]:
    planted = {frozenset((p.path, p.source)) for p in pages if p.source}
    hits = len(planted & pairs)
    return {
        "recall": hits / len(planted),
        "precision": hits / len(pairs) if pairs else 1.0,
        "reported": len(pairs),
    }


# Scrapy's own defaults for what CRAWL_SETTINGS changes, for the crawl that shows their cost.
SCRAPY_DEFAULTS = (
    "CONCURRENT_ITEMS=100",
    "COOKIES_ENABLED=true",
    "RETRY_ENABLED=true",
    "REDIRECT_ENABLED=true",
    'EXTENSIONS={"scrapy.extensions.remote_control.RemoteControl": null}',  # no GC tuning
)
NO_PIPELINE = ("ADDONS={}", "ITEM_PIPELINES={}")
HAND_WRITTEN = (
    "ADDONS={}",
    'ITEM_PIPELINES={"benchmarks.scrapy_crawl.OneByOnePipeline": 300}',
)


def _saved_site(work: Path, originals: int, seed: int) -> tuple[list[Page], Path, Path]:
    """The site's pages, the site's folder, and the article pages alone (for ingest)."""
    pages = build_pages(originals, seed=seed)
    root = work / "site"
    write_site(root, pages, seed=seed)
    articles = work / "articles"
    for page in pages:
        target = articles / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((root / page.path).read_bytes())
    return pages, root, articles


def _judged(site: tuple[str, int], articles: Path, work: Path, rounds: int) -> list[Any]:
    """The judged pair, pipeline crawl and ingest, ``rounds`` times in turn (which goes
    first alternating), so that load from other work on a shared machine falls on both
    sides alike: a (crawl, ingest) pair a round."""
    pairs = []
    for i in range(rounds):
        crawl = partial(_crawl, site, work / f"piped{i}",
                        f"SHDB_INDEX={work / f'crawl-index{i}'}", "FEEDS={}")  # fmt: skip
        ingest_ = partial(_ingest, articles, work / f"ingest{i}")
        if i % 2:
            pairs.append((crawl(), ingest_()))
        else:
            ingested = ingest_()
            pairs.append((crawl(), ingested))
    return pairs


def _median(rounds: list[Any], n: int, prefix: str = "") -> dict[str, Any]:
    """The median round's pages/s and CPU split, and every round's ratio."""
    ratios = [ingest[0] / piped[0] for piped, ingest in rounds]  # the walls' inverse
    piped, ingest = rounds[ratios.index(statistics.median_low(ratios))]
    return {
        f"{prefix}pages": n,
        f"{prefix}rounds": ratios,
        **_rates(f"{prefix}pipeline", piped[:2], n),
        **_rates(f"{prefix}ingest", ingest[:2], n),
        **_split(f"{prefix}pipeline", piped[2], n),
    }


def _large(ctx: Context, work: Path) -> dict[str, Any]:
    """The judged pair on a larger site (10,000 pages in quick mode), where Scrapy's
    and ingest's start-up weigh less than at 2,000."""
    originals = ctx.pick(smoke=0, quick=5000, full=5000)
    if not originals:
        return {}
    pages, root, articles = _saved_site(work / "large", originals, ctx.plan.seed)
    with serving(root) as site:
        rounds = _judged(site, articles, work / "large", ctx.pick(smoke=1, quick=3, full=3))
    return _median(rounds, len(pages), "large_")


def run_scrapy(ctx: Context) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=ctx.work) as tmp:
        work = Path(tmp)
        pages, root, articles = _saved_site(work, ctx.pick(smoke=40, quick=1000, full=2500),
                                            ctx.plan.seed)  # fmt: skip
        with serving(root) as site:
            base = site[0]
            rounds = _judged(site, articles, work, ctx.pick(smoke=1, quick=3, full=3))
            # Timed crawls export nothing (a feed of every page's HTML is Scrapy's cost,
            # not the pipeline's); the tagged crawl's items give the pairs.
            plain = _crawl(site, work / "plain", *NO_PIPELINE, "FEEDS={}")
            defaults = f"SHDB_INDEX={work / 'defaults-index'}"
            defaulted = _crawl(site, work / "defaults", defaults, "FEEDS={}", *SCRAPY_DEFAULTS)
            each = f"SHDB_INDEX={work / 'each-index'}"
            one_by_one = _crawl(site, work / "each", each, *HAND_WRITTEN, "FEEDS={}")
            tagged = f"SHDB_INDEX={work / 'tag-index'}"
            _crawl(site, work / "tagged", tagged, "SHDB_ACTION=tag")
            pairs = _crawl_pairs(work / "tagged", base)
            again = _crawl(site, work / "again", f"SHDB_INDEX={work / 'crawl-index0'}",
                           "FEEDS={}")[2]  # fmt: skip
        large = _large(ctx, work)
    n = len(pages)
    return {
        **_median(rounds, n),
        **_rates("plain", plain[:2], n),
        **_rates("scrapy_defaults", defaulted[:2], n),
        **_rates("one_by_one", one_by_one[:2], n),
        **_split("plain", plain[2], n),
        **_split("scrapy_defaults", defaulted[2], n),
        **_split("one_by_one", one_by_one[2], n),
        "checked": rounds[0][0][2].get("shdb/checked", 0),
        "recrawl_dropped": again.get("shdb/dropped", 0) / n,
        "pipeline": _scores(pages, pairs),
        "ingest": _scores(pages, rounds[0][1][2]),
        **large,
    }


def _split(name: str, stats: dict[str, Any], n: int) -> dict[str, float]:
    """CPU ms a page of the crawl process, its fingerprinting process, the server."""
    parts = {
        "crawl": stats["cpu_seconds_crawl"],
        "preparer": stats["cpu_seconds_children"],
        "server": stats["server_cpu_seconds"],
    }
    return {f"{name}_{part}_cpu_ms_per_page": 1000 * cpu / n for part, cpu in parts.items()}


def _rates(name: str, wall_cpu: tuple[float, float], n: int) -> dict[str, float]:
    wall, cpu = wall_cpu
    return {f"{name}_pages_per_s": n / wall, f"{name}_cpu_ms_per_page": 1000 * cpu / n}


CRAWLS = {
    "pipeline": "crawl with the pipeline",
    "plain": "crawl without a pipeline",
    "scrapy_defaults": "crawl with the pipeline under Scrapy's default settings",
    "one_by_one": "crawl with a hand-written pipeline (a commit an item, on the reactor)",
    "ingest": "shdb ingest",
}


def _cpu(r: dict[str, Any], name: str) -> str:
    crawl, prep, server = (
        r[f"{name}_{part}_cpu_ms_per_page"] for part in ("crawl", "preparer", "server")
    )
    return (
        f"crawl process {crawl:.2f} + fingerprinting process {prep:.2f} + site server {server:.2f}"
    )


def _rounds(r: dict[str, Any], prefix: str = "") -> str:
    """The ratio of each (crawl, ingest) round, the median being judged."""
    ratios = r.get(f"{prefix}rounds", [])
    return f" (median round of {', '.join(f'{x:.2f}x' for x in ratios)})" if ratios else ""


def figures_scrapy(r: dict[str, Any]) -> list[Figure]:
    piped, ingest = r["pipeline"], r["ingest"]
    gap = max(
        abs(piped["recall"] - ingest["recall"]), abs(piped["precision"] - ingest["precision"])
    )
    rate = {name: r[f"{name}_pages_per_s"] for name in CRAWLS}
    return [
        Figure.judge(
            f"Scrapy crawl of {r['pages']} pages with the pipeline / shdb ingest, pages/s",
            rate["pipeline"] / rate["ingest"],
            Target.at_least(0.6),
            measured=f"{rate['pipeline']:.0f}/s{_rounds(r)}",
            baseline=f"shdb ingest {rate['ingest']:.0f}/s",
            bound=f"CPU ms a page: {_cpu(r, 'pipeline')}; ingest "
            f"{r['ingest_cpu_ms_per_page']:.2f} (one process)",
        ),
        *_large_figure(r),
        *(
            Figure.report(
                f"{title} / shdb ingest, pages/s",
                f"{rate[name] / rate['ingest']:.2f}x ({rate[name]:.0f}/s; "
                f"{rate[name] / rate['pipeline']:.2f}x the crawl with the pipeline)",
                f"shdb ingest {rate['ingest']:.0f}/s",
                bound=f"CPU ms a page: {_cpu(r, name)}",
            )
            for name, title in CRAWLS.items()
            if name not in ("pipeline", "ingest")
        ),
        Figure.judge(
            "pipeline vs ingest --report: largest recall or precision gap",
            gap,
            Target.at_most(0.01, unit="%"),
            measured=f"recall {piped['recall']:.3f}, precision {piped['precision']:.3f}",
            baseline=f"ingest recall {ingest['recall']:.3f}, precision {ingest['precision']:.3f}",
            bound="one predicate: check_and_add_texts",
        ),
        Figure.judge(
            "a second crawl with the same index: pages dropped",
            r["recrawl_dropped"],
            Target.at_least(1.0, unit="%"),
            measured=f"{r['recrawl_dropped']:.1%}",
            baseline="every page the first crawl held",
            bound="a page held under its own URL counts as seen",
        ),
    ]


def _large_figure(r: dict[str, Any]) -> list[Figure]:
    """The same judged pair on the larger site, when it ran."""
    if "large_pages" not in r:
        return []
    piped, ingest = r["large_pipeline_pages_per_s"], r["large_ingest_pages_per_s"]
    return [
        Figure.judge(
            f"Scrapy crawl of {r['large_pages']} pages with the pipeline / shdb ingest, pages/s",
            piped / ingest,
            Target.at_least(0.6),
            measured=f"{piped:.0f}/s{_rounds(r, 'large_')}",
            baseline=f"shdb ingest {ingest:.0f}/s",
            bound=f"CPU ms a page: {_cpu(r, 'large_pipeline')}; ingest "
            f"{r['large_ingest_cpu_ms_per_page']:.2f} (one process)",
        )
    ]


def _large_text(r: dict[str, Any]) -> str:
    if "large_pages" not in r:
        return ""
    piped, ingest = r["large_pipeline_pages_per_s"], r["large_ingest_pages_per_s"]
    return (
        f"On a larger site of {r['large_pages']:,} pages (same kinds, same settings, same "
        f"three rounds in turn, after the runs above), where start-up weighs less: the crawl "
        f"with the pipeline {piped:.0f} pages/s, `shdb ingest` {ingest:.0f} pages/s, "
        f"{piped / ingest:.2f}x{_rounds(r, 'large_')}; CPU ms a page: "
        f"{_cpu(r, 'large_pipeline')}, ingest {r['large_ingest_cpu_ms_per_page']:.2f}."
    )


def render_scrapy(results: dict[str, Any]) -> str:
    r = results["scrapy"]
    ingest = r["ingest_pages_per_s"]
    rows = [
        (
            title,
            report.fmt(r[f"{name}_pages_per_s"], 0),
            f"{r[f'{name}_pages_per_s'] / ingest:.2f}x",
            *(
                "-" if name == "ingest" else f"{r[f'{name}_{part}_cpu_ms_per_page']:.2f}"
                for part in ("crawl", "preparer", "server")
            ),
            f"{r[f'{name}_cpu_ms_per_page'] + r.get(f'{name}_server_cpu_ms_per_page', 0):.2f}",
        )
        for name, title in CRAWLS.items()
    ]
    header = ("run", "pages/s", "vs ingest", "CPU ms a page: crawl process", "index process",
              "site server", "all")  # fmt: skip
    return report.fill(
        "bench/scrapy.md",
        pages=f"{r['pages']:,}",
        table=report.table(header, rows),
        large=_large_text(r),
    )


register(Section("scrapy", "Scrapy pipeline on a local crawl", run_scrapy, figures_scrapy,
                 render_scrapy, order=80))  # fmt: skip
