"""Reports from templates: ``benchmarks/templates/*.md`` filled with ``string.Template``.

Prose lives in the templates; code computes the values (numbers, tables, verdicts
that depend on the numbers) and fills them in. A placeholder the code does not
fill is an error, so a template and its code cannot drift apart silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from .registry import FIGURE_HEADER, Figure

TEMPLATES = Path(__file__).with_name("templates")


def fill(name: str, values: Mapping[str, object] | None = None, **more: object) -> str:
    """The template ``templates/<name>`` with every ``$placeholder`` substituted."""
    text = Template((TEMPLATES / name).read_text(encoding="utf-8"))
    return text.substitute({**(values or {}), **more})


_SNIPPET = re.compile(r"^<!-- (\w+) -->\n", re.MULTILINE)


def snippet(name: str, key: str, values: Mapping[str, object] | None = None, **more: object) -> str:
    """One block of the snippet file ``templates/<name>``, filled, on one line.

    A snippet file holds the sentences whose choice depends on the numbers, each
    block after a ``<!-- key -->`` line; its line breaks are for editing only.
    """
    parts = _SNIPPET.split((TEMPLATES / name).read_text(encoding="utf-8"))
    blocks = dict(zip(parts[1::2], parts[2::2]))
    if key not in blocks:
        raise KeyError(f"no snippet {key!r} in templates/{name}")
    text = Template(" ".join(blocks[key].split()))
    return " ".join(text.substitute({**(values or {}), **more}).split())


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 2) -> str:
    """A number for a table: thousands separated from 1000 on, n/a for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def figures_table(figures: Sequence[Figure]) -> str:
    if not figures:
        return "No figures in this run."
    return table(FIGURE_HEADER, [f.as_row() for f in figures])


def profile_table(profile: list[dict[str, Any]]) -> str:
    """cProfile rows (benchmarks.timing.top_functions) as a table."""
    return table(
        ("function (file:line)", "calls", "own s", "cum s", "share of own time"),
        [
            (
                f"`{p['function']}`",
                f"{p['calls']:,}",
                f"{p['tottime_s']:.3f}",
                f"{p['cumtime_s']:.3f}",
                f"{p['share']:.0%}",
            )
            for p in profile
        ],
    )


def machine_table(m: dict[str, Any]) -> str:
    rows = [
        ("CPU", f"{m['cpu']}, {m['cores']} cores"),
        ("RAM", f"{m['ram_gib']} GiB"),
        ("kernel", m["kernel"]),
        ("Python", m["python"]),
        *((name, v) for name, v in m["packages"].items()),
        ("Java", m["java"]),
        ("HBase", m["hbase"]),
        ("OpenBLAS env", m["openblas_env"]),
    ]
    return table(("what", "version / size"), rows)


def bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {x}" for x in items)
