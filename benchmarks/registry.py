"""The extension API: sections that measure, and the figures they report.

A *section* is one experiment of a suite (``bench``: performance, ``eval``:
detection quality). It measures, returns JSON-able results (saved under its name
in the run's results file), and turns those results into

* *figures*: rows of the report's targets table, each a value next to the
  baseline measured in the same run, as a ratio, with its target and what bounds
  a miss;
* optionally a markdown body for the report, filled from a template in
  ``benchmarks/templates/`` (prose lives there, not in code).

A new module registers its section at import time::

    from benchmarks.registry import Figure, Section, Target, register

    def run(ctx: Context) -> dict[str, Any]:
        ...  # measure, interleaved with the baseline (benchmarks.timing)
        return {"p50_ms": ..., "get_p50_ms": ..., "wrong": 0}

    def figures(r: dict[str, Any]) -> list[Figure]:
        return [Figure.judge(
            "Thrift2 query p50 / one getRow",
            r["p50_ms"] / r["get_p50_ms"],
            Target.at_most(3.5),
            measured=f"{r['p50_ms']:.2f} ms",
            baseline=f"getRow {r['get_p50_ms']:.2f} ms",
            exact=r["wrong"] == 0,
            bound="one MRRF scan per region",
        )]

    register(Section("thrift2_query", "Thrift2 queries", run, figures,
                     needs_hbase=True, order=45))

and is listed in ``MODULES`` of its suite (``benchmarks/bench.py`` or
``benchmarks/eval.py``). Heavy imports (FAISS, Spark) go inside ``run``, so that
listing a module costs nothing when its section is skipped.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Suite = Literal["bench", "eval"]


@dataclass(frozen=True)
class Target:
    """A bound on a ratio: ``ratio <= value`` or ``ratio >= value``."""

    op: Literal["<=", ">="]
    value: float
    unit: str = "x"  # "x" (a multiple), "%" (a share, value in 0..1), or e.g. " B"

    @classmethod
    def at_most(cls, value: float, unit: str = "x") -> Target:
        return cls("<=", value, unit)

    @classmethod
    def at_least(cls, value: float, unit: str = "x") -> Target:
        return cls(">=", value, unit)

    def met(self, ratio: float) -> bool:
        if math.isnan(ratio):
            return False
        return ratio <= self.value if self.op == "<=" else ratio >= self.value

    def __str__(self) -> str:
        return f"{self.op} {show_ratio(self.value, self.unit)}"


def show_ratio(ratio: float, unit: str = "x") -> str:
    """A ratio as a report shows it: ``3.10x``, ``47%`` for a share, else number + unit."""
    if math.isnan(ratio):
        return "n/a"
    if unit == "x":
        return f"{ratio:.2f}x"
    if unit != "%":
        return f"{ratio:.0f}{unit}"
    if ratio == 0 or abs(ratio) >= 0.1:
        return f"{ratio:.0%}"
    return f"{100 * ratio:.2g}%"  # a small share, e.g. an FPR: two significant digits


@dataclass(frozen=True)
class Figure:
    """One row of a report's targets table."""

    figure: str  # what was measured
    measured: str  # the value as shown (with its unit)
    baseline: str  # what it is compared with, measured in the same run
    ratio: float | None  # measured / baseline, in the target's unit
    target: str  # "<= 3.5x", or "" when the figure is reported without a target
    met: bool | None  # None: no target, or it could not be judged
    bound: str = ""  # what bounds a miss (or the ceiling measured alongside)
    ratio_text: str = ""

    @classmethod
    def judge(
        cls,
        figure: str,
        ratio: float,
        target: Target | None,
        *,
        measured: str,
        baseline: str,
        exact: bool = True,
        bound: str = "",
    ) -> Figure:
        """A figure judged against its target; a wrong answer never meets a target."""
        shown = show_ratio(ratio, target.unit if target else "x")
        met = None if target is None else (exact and target.met(ratio))
        if not exact:
            bound = "; ".join(
                x for x in ("WRONG ANSWERS (checked against brute force)", bound) if x
            )
        return cls(figure, measured, baseline, ratio, str(target or ""), met, bound, shown)

    @classmethod
    def report(cls, figure: str, measured: str, baseline: str = "", bound: str = "") -> Figure:
        """A figure shown without a target (context for the others)."""
        return cls(figure, measured, baseline, None, "", None, bound)

    @property
    def status(self) -> str:
        return "-" if self.met is None else ("MET" if self.met else "MISSED")

    def as_row(self) -> tuple[str, ...]:
        return (
            self.figure,
            self.measured,
            self.baseline or "-",
            self.ratio_text or "-",
            self.target or "-",
            self.status,
            self.bound or "-",
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


FIGURE_HEADER = ("figure", "measured", "baseline (same run)", "ratio", "target", "status", "bound")


@dataclass(frozen=True)
class Section:
    """One experiment: ``run`` measures, ``figures`` and ``render`` report it."""

    name: str  # key in the results file, and for --only/--skip
    title: str  # heading in the report
    run: Callable[[Any], Any]  # (bench Context or eval context) -> JSON-able results
    figures: Callable[[Any], list[Figure]] = field(default=lambda _r: [])
    render: Callable[[Any], str] | None = None  # results -> markdown body (from a template)
    suite: Suite = "bench"
    needs_hbase: bool = False
    order: int = 50  # position in the run and the report (lower first)
    modes: tuple[str, ...] = ("smoke", "quick", "full")  # modes that run it


class Skipped(Exception):
    """Raised by a section's ``run`` when it cannot run here (a peer is not installed,
    a prerequisite section failed); the run records the reason and goes on."""


_SECTIONS: dict[str, Section] = {}


def register(section: Section) -> Section:
    """Add a section; a name registered twice is a mistake, not an override."""
    known = _SECTIONS.get(section.name)
    if known is not None and known != section:
        raise ValueError(f"benchmark section {section.name!r} is registered twice")
    _SECTIONS[section.name] = section
    return section


def load(modules: Iterable[str]) -> None:
    """Import the modules that register sections (``benchmarks.<name>``)."""
    for name in modules:
        importlib.import_module(f"benchmarks.{name}")


def sections(suite: Suite) -> list[Section]:
    """The suite's sections in run order."""
    return sorted((s for s in _SECTIONS.values() if s.suite == suite), key=lambda s: s.order)


def figures_of(section: Section, result: Any) -> list[Figure]:
    """The section's figures; a results file from an older run may lack some keys."""
    return section.figures(result) if result else []
