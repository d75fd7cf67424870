"""Performance benchmarks of simhash-hbase, each figure next to its same-run baseline.

    python -m benchmarks.bench --quick   # < 10 min on an idle machine: embedded N <= 1M,
                                         # HBase N <= 100k; writes docs/benchmarks.md
    python -m benchmarks.bench           # full, ~45 min: embedded N <= 10M, HBase N <= 1M
    python -m benchmarks.bench --smoke   # tiny sizes, a generated corpus, no network:
                                         # checks every section runs (output in a temp dir)

Peers are installed on demand (``pip install -e '.[bench,hbase]'`` when something is
missing; simhash-py or simhash-pybind into a private dir under ~/.cache/shdb-bench).
Sections that need HBase start the bench's own standalone instance (ports
``SHDB_BENCH_HBASE_PORT``/``SHDB_BENCH_ZK_PORT``, default 19090/12181, home
``SHDB_BENCH_HBASE_HOME``), so a test suite's instance is never disturbed, and stop
it at the end, whatever happens.

The machine is shared and noisy, so every figure is measured against its baseline
in the same run, interleaved; the targets are ratios. Sections register themselves
(see benchmarks/registry.py); ``--only``/``--skip`` take their names.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from . import registry, report
from .common import DOCS_DIR, RESULTS_DIR, elapsed_s, log, shown
from .context import Context
from .plans import PLANS, Plan
from .registry import Figure, Section, Skipped

#: Modules whose sections make up the bench, in no particular order (each section
#: has its own ``order``). Add yours here.
MODULES = (
    "fingerprinting",
    "segmenters",
    "html_pages",
    "queries",
    "dedup",
    "ingest",
    "storage",
    "schemes",
    "removal",
    "retention",
    "hbase_transports",
    "spark",
    "peers_embedded",
    "scale",
    "scrapy_pipeline",
    "mass_copies",
    "serve",
)
SMOKE_DIR = Path(tempfile.gettempdir()) / "shdb-bench-smoke"
NOTES = [
    "PyPI simhash.SimhashIndex is capped (see the query section): its pure-Python add makes "
    "larger N impractical, and it holds every entry as a string.",
    "HBase runs standalone (master, region server and ZooKeeper in one JVM, the Thrift "
    "gateway in another) on the same 2 cores as the client, so its latencies include that "
    "contention; a real cluster moves the server work off the client's machine.",
    "Synthetic documents have short ids (`d123456`); index cells carry the id as the HBase "
    "qualifier (the LMDB key suffix), so longer real ids (URLs) cost more bytes per document.",
]


def all_sections() -> list[Section]:
    registry.load(MODULES)
    return registry.sections("bench")


def parse_args(argv: list[str] | None, names: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes, < 10 minutes")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: checks every section")
    mode.add_argument("--full", action="store_true", help="the default: full sizes")
    p.add_argument("--only", nargs="+", choices=names, help="run only these sections")
    p.add_argument("--skip", nargs="+", choices=names, default=[], help="skip these sections")
    p.add_argument("--no-hbase", action="store_true", help="embedded store only")
    p.add_argument(
        "--hbase",
        metavar="HOST:PORT",
        help="use this running HBase (Thrift1; Thrift2 on PORT+1) instead of starting one",
    )
    p.add_argument("--no-install", action="store_true", help="do not pip-install peers")
    p.add_argument("--out", type=Path, help="directory for the results file and the report")
    p.add_argument("--work", help="scratch dir for indexes (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--report-only", metavar="JSON", help="only regenerate docs from a results file")
    p.add_argument(
        "--add-to",
        metavar="JSON",
        help="keep the results of the sections this run does not run from an earlier "
        "results file (the report says which run each comes from)",
    )
    return p.parse_args(argv)


class Run:
    """One benchmark run: sections, their results, errors, and the files written."""

    def __init__(self, plan: Plan, sections: list[Section], args: argparse.Namespace) -> None:
        self.plan = plan
        self.sections = sections
        self.use_hbase = not args.no_hbase
        self.hbase_address: str | None = args.hbase
        self.install = not args.no_install and plan.mode != "smoke"
        # A smoke run's numbers mean nothing: keep them out of bench-results/ and docs/.
        default_out = SMOKE_DIR if plan.mode == "smoke" else None
        out = args.out or default_out
        self.out_dir = out or RESULTS_DIR
        self.docs_dir = out or DOCS_DIR
        self.json_path = self.out_dir / f"bench-{plan.mode}.json"
        self.results: dict[str, Any] = {
            "meta": {
                "mode": plan.mode,
                "sections": [s.name for s in sections],
                "hbase": self.use_hbase,
                "json": shown(self.json_path),
                "plan": plan.__dict__,
            },
            "notes": list(NOTES),
            "errors": {},
            "skipped": {},
        }

    def section(self, section: Section, ctx: Context) -> None:
        """Run one section; a failure is recorded and the rest still runs."""
        log(f"section {section.name}: {section.title}")
        try:
            value = section.run(ctx)
        except Skipped as why:
            log(f"{section.name} skipped: {why}")
            self.results["skipped"][section.name] = str(why)
            return
        except Exception:  # a benchmark reports a failed section, it does not stop
            log(f"{section.name} FAILED:\n{traceback.format_exc()}")
            self.results["errors"][section.name] = traceback.format_exc()
            return
        self.results[section.name] = value
        self.save()

    def save(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.json_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.results, indent=1, default=str))
        tmp.replace(self.json_path)


def measure(run: Run, work: Path) -> None:
    """Every section in order; the bench HBase starts in the background first."""
    from .hbase_instance import BenchHBase

    wanted_hbase = run.use_hbase and any(s.needs_hbase for s in run.sections)
    hbase = BenchHBase(run.hbase_address) if wanted_hbase else None
    ctx = Context(plan=run.plan, work=work, results=run.results, hbase=hbase, install=run.install)
    try:
        if hbase:
            hbase.start_background(fresh=True)
        for section in run.sections:
            run.section(section, ctx)
        if hbase:
            hbase.wait()
            run.results["machine_hbase"] = hbase.version()
    finally:
        if hbase:
            hbase.stop()


def all_figures(results: dict[str, Any], sections: list[Section]) -> list[Figure]:
    return [f for s in sections for f in registry.figures_of(s, results.get(s.name))]


def _readable(results: dict[str, Any], sections: list[Section]) -> tuple[dict[str, Any], list[str]]:
    """The results each section's current code can read, and a note per section whose
    stored results predate its code (a key it reads now is missing): left out, to re-run,
    instead of stopping the whole report (an --add-to run keeps other sections' results)."""
    usable, stale = dict(results), []
    for s in sections:
        if not results.get(s.name):
            continue
        try:
            registry.figures_of(s, results[s.name])
            if s.render is not None:
                s.render({**results, "_plots": {}})
        except KeyError as exc:
            del usable[s.name]
            stale.append(f"Section `{s.name}` left out: its stored results lack {exc}; re-run it")
    return usable, stale


def render(results: dict[str, Any], docs_dir: Path = DOCS_DIR) -> list[Figure]:
    """docs/benchmarks.md (and plots) from a results dict; returns the figures."""
    from . import plots

    sections = all_sections()
    results, stale = _readable(results, sections)
    docs_dir.mkdir(parents=True, exist_ok=True)
    made = plots.bench_plots(results, docs_dir)
    bodies = []
    for s in sections:
        if s.render is not None and results.get(s.name):
            bodies.append(f"## {s.title}\n\n{s.render({**results, '_plots': made}).strip()}\n")
    figures = all_figures(results, sections)
    meta = results["meta"]
    flag = {"quick": " --quick", "smoke": " --smoke"}.get(meta["mode"], "")
    errors = [
        f"Section `{name}` failed in this run: `{tb.strip().splitlines()[-1]}`"
        for name, tb in results.get("errors", {}).items()
    ]
    errors += [
        f"Section `{name}` did not run: {why}" for name, why in results.get("skipped", {}).items()
    ]
    errors += stale
    page = report.fill(
        "benchmarks.md",
        command=f"python -m benchmarks.bench{flag}",
        date=meta["date"],
        mode=meta["mode"],
        minutes=f"{meta['seconds'] / 60:.1f}",
        json=meta["json"],
        load_start=meta["load_start"],
        load_end=meta["load_end"],
        targets=report.figures_table(figures),
        machine=report.machine_table(results["machine"]),
        sections="\n".join(bodies),
        notes=report.bullets([*results.get("notes", []), *origin_notes(results), *errors]),
    )
    (docs_dir / "benchmarks.md").write_text(page.rstrip() + "\n")
    log(f"wrote {shown(docs_dir / 'benchmarks.md')} and {len(made)} plots")
    return figures


def carry_over(results: dict[str, Any], earlier: dict[str, Any], sections: list[Section]) -> None:
    """Copy into ``results`` the sections of an earlier run that this run did not run.

    Each figure stays a same-run ratio (a section's baseline ran with it); only the
    page gathers sections from several runs: ``meta["origin"]`` keeps, per carried
    section, the run it was measured in (through any number of carries), and the
    report's notes say so.
    """
    ran = {*results["meta"]["sections"]}
    meta, old = results["meta"], earlier["meta"]
    run_of_earlier = (
        f"{old['mode']} run of {old['date']} "
        f"(load {old['load_start']} / {old.get('load_end', 'not recorded')})"
    )
    origin = meta.setdefault("origin", {})
    for s in sections:
        if s.name not in ran and earlier.get(s.name) is not None:
            results[s.name] = earlier[s.name]
            origin[s.name] = old.get("origin", {}).get(s.name, run_of_earlier)


def origin_notes(results: dict[str, Any]) -> list[str]:
    """One note per earlier run that sections of this page come from."""
    runs: dict[str, list[str]] = {}
    for name, run in results["meta"].get("origin", {}).items():
        runs.setdefault(run, []).append(name)
    return [
        f"Sections {', '.join(f'`{n}`' for n in names)} come from the {run}; the others "
        f"from the run of {results['meta']['date']}."
        for run, names in runs.items()
    ]


def print_figures(figures: list[Figure]) -> None:
    for f in figures:
        ratio = f" = {f.ratio_text}" if f.ratio_text else ""
        target = f" (target {f.target})" if f.target else ""
        print(f"{f.status:7} {f.figure}: {f.measured}{ratio}{target}; baseline {f.baseline}")


def main(argv: list[str] | None = None) -> int:
    sections = all_sections()
    args = parse_args(argv, [s.name for s in sections])
    if args.report_only:
        path = Path(args.report_only)
        print_figures(render(json.loads(path.read_text()), args.out or DOCS_DIR))
        return 0
    plan = PLANS["smoke" if args.smoke else "quick" if args.quick else "full"]
    if not args.no_install and plan.mode != "smoke":
        from . import peers

        peers.ensure_project()
    from . import machine

    chosen = [
        s
        for s in sections
        if (not args.only or s.name in args.only) and s.name not in args.skip
        if plan.mode in s.modes and not (s.needs_hbase and args.no_hbase)
    ]
    # Read before measuring: the run saves its results as it goes, often to this file.
    earlier = json.loads(Path(args.add_to).read_text()) if args.add_to else None
    run = Run(plan, chosen, args)
    meta = run.results["meta"]
    meta["date"] = dt.datetime.now().isoformat(timespec="seconds")
    meta["load_start"] = [round(x, 2) for x in machine.load_average()]
    log(f"{plan.mode} run: sections {', '.join(s.name for s in chosen)}")
    work = Path(tempfile.mkdtemp(prefix="shdb-bench-", dir=args.work))
    try:
        measure(run, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    meta["seconds"] = elapsed_s()
    meta["load_end"] = [round(x, 2) for x in machine.load_average()]
    hbase_version = run.results.pop("machine_hbase", None)
    if hbase_version is None and earlier is not None:  # its HBase sections are carried over
        hbase_version = earlier.get("machine", {}).get("hbase")
    run.results["machine"] = machine.describe(hbase_version)
    if earlier is not None:
        carry_over(run.results, earlier, sections)
    run.save()
    print_figures(render(run.results, run.docs_dir))
    for name in run.results["errors"]:
        log(f"section {name} failed; see 'errors' in {run.json_path}")
    return 1 if run.results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
