"""Near-duplicate detection quality on real Chinese text.

Real documents (Debian's manpages-zh and gimp-help-zh-cn, see benchmarks/corpus.py) are
edited the way reposts are edited (a sentence added or removed, ads inserted, numbers
changed, punctuation and whitespace changed, a paragraph moved, a mirror's header and
footer); recall is the share of (original, edited) pairs whose fingerprints differ in at
most k bits, the false-positive rate the share of pairs of distinct documents that do.
Several configurations of ``simhash_hbase`` are measured next to two baselines in the
same run: PyPI ``simhash`` and exact character 4-shingle Jaccard similarity.

    pip install -e '.[bench]'
    python -m benchmarks.eval          # full run, ~5 min on 2 idle cores (~9 CPU-min):
                                       # docs/quality.md, docs/quality-{long,short}.png,
                                       # bench-results/quality.json
    python -m benchmarks.eval --quick  # a sample, ~1 min: the same report, from fewer
                                       # texts; bench-results/quality-quick.json
    python -m benchmarks.eval --smoke  # a generated corpus, seconds, output in a temp dir

Everything is deterministic: samples and edits come from seeded RNGs keyed by document
id, so a rerun on the same corpus gives the same numbers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
from pathlib import Path

from . import crawl, registry, templated
from .common import ROOT, log, set_log_tag
from .quality import Evaluation, evaluate
from .quality_report import dump_json, print_summary, render
from .registry import Figure, Skipped
from .texts import SIZES

#: Modules whose sections extend the evaluation (suite "eval"); each section's run
#: gets the ``Evaluation`` and adds figures and a report body. Add yours here.
MODULES: tuple[str, ...] = ("recall", "multilingual")


def run_sections(ev: Evaluation) -> tuple[dict[str, object], list[Figure], list[str]]:
    """Every registered eval section: (results by name, figures, report bodies).

    A section that fails is recorded in its results (``{"error": ...}``) and named in
    the report; the others still run.
    """
    registry.load(MODULES)
    results: dict[str, object] = {}
    figures: list[Figure] = []
    bodies: list[str] = []
    for section in registry.sections("eval"):
        if ev.mode not in section.modes:
            continue
        log(f"section {section.name}: {section.title}")
        try:
            value = section.run(ev)
        except Skipped as why:
            results[section.name] = {"skipped": str(why)}
            bodies.append(f"## {section.title}\n\nNot run here: {why}")
            continue
        except Exception as exc:  # a failed section is reported; the evaluation stands
            log(f"{section.name} FAILED: {exc!r}")
            results[section.name] = {"error": repr(exc)}
            bodies.append(f"## {section.title}\n\nThis section failed in this run: `{exc!r}`")
            continue
        results[section.name] = value
        figures += registry.figures_of(section, value)
        if section.render is not None:
            bodies.append(f"## {section.title}\n\n{section.render(value).strip()}")
    return results, figures, bodies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval", description=__doc__.split("\n\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a sample; under 5 minutes")
    mode.add_argument("--smoke", action="store_true", help="a generated corpus; seconds")
    mode.add_argument("--full", action="store_true", help="the default: the whole corpus")
    parser.add_argument("--workers", type=int, default=min(2, multiprocessing.cpu_count()))
    parser.add_argument("--out", type=Path, help="directory for the results file and report")
    args = parser.parse_args(argv)
    set_log_tag("eval")

    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    default_out = Path(tempfile.gettempdir()) / "shdb-eval-smoke" if args.smoke else None
    out = args.out or default_out
    json_path = (out or ROOT / "bench-results") / (
        "quality.json" if name == "full" else f"quality-{name}.json"
    )
    doc_path = (out or ROOT / "docs") / "quality.md"
    json_name = (
        str(json_path.relative_to(ROOT)) if json_path.is_relative_to(ROOT) else str(json_path)
    )
    ev = evaluate(SIZES[name], args.workers, name, json_name)
    res = ev.results
    extra, figures, bodies = run_sections(ev)
    for kept in (crawl.saved_section(), templated.saved_section()) if name != "smoke" else ():
        if kept is not None:  # benchmarks.crawl's and .templated's, kept across regenerations
            bodies.append(kept)

    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(dump_json({**res.to_json(), "sections": extra}), encoding="utf-8")
    log(f"wrote {json_path}")
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(render(res, doc_path, figures, bodies), encoding="utf-8")
    log(f"wrote {doc_path} and its plots")
    print_summary(res)
    log(f"done in {res.meta['runtime_s']:.0f} s ({res.meta['cpu_s']:.0f} s CPU)")
    return 1 if any(isinstance(v, dict) and "error" in v for v in extra.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
