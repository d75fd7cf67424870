"""The PNG plots of docs/benchmarks.md (matplotlib, Agg: no display here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

from .mass_copies import plot as mass_plot
from .queries import GET, THRIFT1_GET
from .scale import plot as scale_plot

_STYLE = {"5x10": ("tab:blue", "o"), "4x4": ("tab:orange", "s")}


def bench_plots(results: dict[str, Any], docs_dir: Path) -> dict[str, str]:
    """Every plot whose data the run has; plot key -> file name (next to the report)."""
    made: dict[str, str] = {}
    for key, fn, needs in (
        ("latency", latency, ("query_embedded", "query_hbase")),
        ("candidates", candidates, ("query_embedded",)),
        ("ingest", ingest_batches, ("ingest_embedded", "ingest_hbase")),
        ("scale", scale_plot, ("scale",)),
        ("mass", mass_plot, ("mass_copies",)),
        ("serve", serve_load, ("serve",)),
    ):
        if any(results.get(n) for n in needs):
            path = docs_dir / f"bench-{key}.png"
            fn(results, path)
            made[key] = path.name
    return made


def _present(results: dict[str, Any], *named: tuple[str, str]) -> list[tuple[str, Any]]:
    """(title, results) of the named sections the run has."""
    return [(title, results[key]) for title, key in named if results.get(key)]


def _series(
    steps: list[dict[str, Any]], key: str, field: str = "p50_ms"
) -> tuple[list[int], list[float]]:
    pts = [(s["n"], s[key][field]) for s in steps if key in s]
    return [p[0] for p in pts], [p[1] for p in pts]


def latency(results: dict[str, Any], path: Path) -> Path:
    """p50 (solid) and p99 (dotted) latency vs N, embedded and HBase side by side."""
    stores = _present(results, ("embedded (LMDB)", "query_embedded"), ("HBase", "query_hbase"))
    fig, axes = plt.subplots(1, len(stores), figsize=(6.2 * len(stores), 4.6), squeeze=False)
    for ax, (title, res) in zip(axes[0], stores):
        first = next(iter(res["schemes"].values()))
        for scheme, steps in res["schemes"].items():
            color, marker = _STYLE[scheme]
            ax.plot(*_series(steps, "shdb"), marker=marker, color=color, label=f"shdb {scheme} p50")
            ax.plot(
                *_series(steps, "shdb", "p99_ms"),
                ls=":",
                marker=marker,
                color=color,
                alpha=0.6,
                label=f"shdb {scheme} p99",
            )
        ax.plot(
            *_series(first, "numpy brute force"),
            marker="^",
            color="tab:red",
            label="NumPy brute force p50",
        )
        if any("PyPI simhash.SimhashIndex" in s for s in first):
            ax.plot(
                *_series(first, "PyPI simhash.SimhashIndex"),
                marker="v",
                color="tab:green",
                label="PyPI simhash.SimhashIndex p50",
            )
        floor = next((f for f in (GET, THRIFT1_GET) if any(f in s for s in first)), None)
        if floor:
            ax.plot(
                *_series(first, floor),
                marker="x",
                color="black",
                ls="--",
                label=f"one {floor} p50",
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="documents in the index (N)",
            ylabel="latency per query (ms)",
            title=f"query_fingerprint(k=3): {title}",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path)


def candidates(results: dict[str, Any], path: Path) -> Path:
    """Cells examined per query vs N: measured, theory, and brute force's N."""
    res = results["query_embedded"]
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    ns: list[int] = []
    for scheme, steps in res["schemes"].items():
        color, marker = _STYLE[scheme]
        n = [s["n"] for s in steps]
        ns = max(ns, n, key=len)
        ax.plot(
            n,
            [max(s["candidates"]["mean"], 1e-3) for s in steps],
            marker=marker,
            color=color,
            label=f"{scheme} measured (mean)",
        )
        ax.plot(
            n,
            [max(s["candidates"]["theory_total"], 1e-3) for s in steps],
            ls="--",
            color=color,
            label=f"{scheme} theory",
        )
    ax.plot(ns, ns, color="tab:red", marker="^", label="brute force (all N)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="documents in the index (N)",
        ylabel="candidates examined per query",
        title="Candidates per query (embedded; theory + true-match cells)",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def ingest_batches(results: dict[str, Any], path: Path) -> Path:
    """Ingest docs/s vs batch size, shdb and raw store writes, per store."""
    stores = _present(results, ("embedded (LMDB)", "ingest_embedded"), ("HBase", "ingest_hbase"))
    fig, axes = plt.subplots(1, len(stores), figsize=(6.2 * len(stores), 4.4), squeeze=False)
    for ax, (title, res) in zip(axes[0], stores):
        sweep = res["batch_sweep"]
        b = [s["batch_size"] for s in sweep]
        ax.plot(
            b,
            [s["shdb_docs_per_s"] for s in sweep],
            marker="o",
            label="shdb add_fingerprints(find_k=None)",
        )
        ax.plot(
            b,
            [s["raw_docs_per_s"] for s in sweep],
            marker="s",
            ls="--",
            label="raw store writes, same rows",
        )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="batch size (documents)",
            ylabel="documents per second",
            title=f"Ingest vs batch size: {title}",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def serve_load(results: dict[str, Any], path: Path) -> Path:
    """`shdb serve`: p50 and p99 latency, and the rate served, against the offered rate."""
    steps = results["serve"]["load"]
    rates = [s["rate"] for s in steps]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.plot(rates, [s["p50_ms"] for s in steps], marker="o", label="p50")
    ax.plot(rates, [s["p99_ms"] for s in steps], marker="s", ls=":", label="p99")
    inline = results["serve"].get("load_inline")
    if inline:
        p99 = [s["p99_ms"] for s in inline]
        ax.plot(rates, p99, marker="x", ls=":", color="tab:gray", label="p99, event loop")
    ax.axhline(25, color="tab:red", lw=0.8, ls="--", label="floor: p99 25 ms at 300/s")
    ax.set_xlabel("offered load (text check-and-add requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    served = ax.twinx()
    served.plot(
        rates, [s["achieved"] for s in steps], color="tab:gray", alpha=0.5, label="served/s"
    )
    served.set_ylabel("served requests/s")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("shdb serve, ~2 KB Chinese texts, embedded store")
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
