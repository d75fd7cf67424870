"""Schemes at scale (issue 42): candidates a query and bytes a document, counted,
against `shdb plan`'s predictions (``simhash_hbase.layout.plan``).

* Candidates: random fingerprints held, random queries; for each row key of a query,
  the held fingerprints that share it, counted on the scheme's own keys. Where N
  does not fit, a sub-range is sampled: only fingerprints whose top ``s`` bits are
  zero are made (N / 2^s of them) and queried; a combination holding the first
  segment then meets exactly the candidates it would at N, and the others meet
  1 / 2^s of theirs, so their counts are scaled by 2^s.
* Bytes: ``SimhashIndex.bulk_load`` of N fingerprints (ids ``d0``..) into a new
  embedded index, its files' size over N.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase import SimhashIndex
from simhash_hbase.layout.plan import plan_scheme
from simhash_hbase.layout.scheme import SCHEMES, Scheme
from simhash_hbase.records import Document

from . import report
from .common import K, log
from .context import Context
from .registry import Figure, Section, Target, register

SCHEME_NAMES = ("5x10", "6x20")
#: Bytes a document of :func:`bulk_loaded_bytes` (data.mdb, ids ``d0``..), measured on
#: this machine on 2026-11-29 (docs/scale.md, "Bytes a document"): the figures
#: ``tests/test_plan.py`` holds `shdb plan`'s predictions to at 1 M and 10 M, which a
#: test run cannot afford to bulk load (10 M: minutes and GBs).
MEASURED_BYTES: dict[tuple[str, int], float] = {
    ("5x10", 1_000_000): 180.7,
    ("6x20", 1_000_000): 286.1,
    ("5x10", 10_000_000): 183.6,
    ("6x20", 10_000_000): 278.9,
}
#: Queries enough for ~4,000 expected hits (a count within ~2-5 %), 2,000 to 1 M.
HITS = 4_000
FIRST_SEGMENT = 0


def counted_candidates(scheme: Scheme, n: int, sample_bits: int = 0, seed: int = 0) -> float:
    """Mean candidates a random query meets among ``n`` random held fingerprints
    (``sample_bits``: the sub-range sampling of the module docstring)."""
    if sample_bits > scheme.widths[FIRST_SEGMENT]:
        raise ValueError("sample within the first segment")
    rng = np.random.default_rng(seed)
    top = np.uint64(sample_bits)
    expected = plan_scheme(scheme, n, scheme.k, texts=False).candidates_per_query
    queries_n = int(np.clip(HITS / max(expected, 1e-9), 2_000, 1_000_000))
    held = rng.integers(0, 2**64, n >> sample_bits, dtype=np.uint64, endpoint=False) >> top
    queries = rng.integers(0, 2**64, queries_n, dtype=np.uint64, endpoint=False) >> top
    held_segments, query_segments = scheme.segments_many(held), scheme.segments_many(queries)
    total = 0.0
    for combo in scheme.combos:
        keys = np.sort(scheme.combo_keys(held_segments, combo))
        wanted = scheme.combo_keys(query_segments, combo)
        hits = np.searchsorted(keys, wanted, "right") - np.searchsorted(keys, wanted, "left")
        scale = 1 if FIRST_SEGMENT in combo else 2**sample_bits
        total += float(hits.sum()) * scale
    return total / queries_n


def mean_id_bytes(n: int) -> float:
    """The mean length of the ids ``d0``..``d{n-1}`` of :func:`bulk_loaded_bytes`."""
    return sum(len(f"d{i}") for i in range(n)) / n


def bulk_loaded_bytes(scheme: str, n: int, work: Path) -> float:
    """Bytes a document of a new embedded index holding ``n`` fingerprints."""
    fps = np.random.default_rng(1).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    with tempfile.TemporaryDirectory(dir=work) as folder:
        with SimhashIndex.open(f"{folder}/index", scheme=scheme, create=True) as index:
            index.bulk_load(Document(f"d{i}", fp) for i, fp in enumerate(fps.tolist()))
        size = sum(
            os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files
        )
    return size / n


def run(ctx: Context) -> dict[str, Any]:
    sizes = ctx.pick(
        smoke=((100_000, 0), (1_000_000, 4)),
        quick=((1_000_000, 0), (10_000_000, 2), (100_000_000, 4)),
        full=((1_000_000, 0), (10_000_000, 0), (100_000_000, 2)),
    )
    bytes_n = ctx.pick(smoke=50_000, quick=1_000_000, full=1_000_000)
    out: dict[str, Any] = {"candidates": [], "bytes": []}
    for name in SCHEME_NAMES:
        scheme = SCHEMES[name]
        for n, bits in sizes:
            counted = counted_candidates(scheme, n, bits)
            predicted = plan_scheme(scheme, n, K, texts=False).candidates_per_query
            log(f"schemes: {name} at {n:,}: {counted:.3f} candidates (predicted {predicted:.3f})")
            out["candidates"].append(
                {"scheme": name, "n": n, "sample_bits": bits, "counted": counted,
                 "predicted": predicted}
            )  # fmt: skip
        measured = bulk_loaded_bytes(name, bytes_n, ctx.work)
        predicted = plan_scheme(
            scheme,
            bytes_n,
            K,
            store="embedded",
            texts=False,
            id_bytes=round(mean_id_bytes(bytes_n)),
        ).bytes_per_document
        out["bytes"].append(
            {"scheme": name, "n": bytes_n, "measured": measured, "predicted": predicted}
        )
    at_10b = plan_scheme(SCHEMES["6x20"], 10**10, K, texts=False).candidates_per_query
    out["predicted_6x20_at_10b"] = at_10b
    return out


def _off(predicted: float, measured: float) -> float:
    """How far a prediction is from a measurement, as a factor >= 1."""
    if not (predicted and measured):
        return float("inf")
    return max(predicted / measured, measured / predicted)


def _judged(what: str, predicted: float, measured: float, how: str, spec: str) -> Figure:
    """A prediction of `shdb plan` judged against what was measured: within 25 %."""
    return Figure.judge(
        f"{what}: predicted / {how.split()[0]}",
        _off(predicted, measured),
        Target.at_most(1.25),
        measured=f"predicted {predicted:{spec}}",
        baseline=f"{how} {measured:{spec}}",
    )


def figures(r: dict[str, Any]) -> list[Figure]:
    out = [
        Figure.judge(
            "6x20 pigeonhole candidates a query at 10 B fingerprints (shdb plan)",
            r["predicted_6x20_at_10b"],
            Target.at_most(60, unit=""),
            measured=f"{r['predicted_6x20_at_10b']:.1f}",
            baseline="5x10: 14 N / 2^26",
        )
    ]
    for row in r["candidates"]:
        sampled = f" (sampled 1/{2 ** row['sample_bits']})" if row["sample_bits"] else ""
        what = f"{row['scheme']} candidates a query at {row['n']:,}"
        out.append(_judged(what, row["predicted"], row["counted"], f"counted{sampled}", ".3f"))
    for row in r["bytes"]:
        what = f"{row['scheme']} embedded bytes a document at {row['n']:,}"
        out.append(_judged(what, row["predicted"], row["measured"], "measured (bulk load)", ".0f"))
    return out


def render(results: dict[str, Any]) -> str:
    r = results["schemes"]
    rows = [
        (x["scheme"], f"{x['n']:,}", f"1/{2 ** x['sample_bits']}", f"{x['counted']:.3f}",
         f"{x['predicted']:.3f}")
        for x in r["candidates"]
    ]  # fmt: skip
    header = ("scheme", "N", "sampled", "candidates counted", "predicted")
    return report.fill("bench/schemes.md", table=report.table(header, rows))


register(Section("schemes", "Schemes at scale (shdb plan)", run, figures, render, order=27))
