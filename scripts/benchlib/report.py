"""Targets (MET/MISSED) and docs/benchmarks.md, both from one results dict.

Everything here reads the JSON the run wrote, so `scripts/bench --report-only FILE`
regenerates the page from an earlier run without measuring again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

Row = tuple[str, str, str, str]  # target, measured, baseline, status
_LABELS = {"old-version reads": "docs-table reads"}  # the name in earlier results files
Lines = list[str]


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def _status(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "MISSED")


def _step_at(steps: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    return next((s for s in steps if s["n"] == n), None)


def _largest(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return max(steps, key=lambda s: s["n"])


# -- targets --------------------------------------------------------------------
def targets(r: dict[str, Any]) -> list[Row]:
    """Each target of the issue with its number, its baseline, and MET/MISSED."""
    rows: list[Row] = []
    for check in (_t_fingerprint, _t_query, _t_ingest, _t_rss, _t_dedup, _t_storage):
        rows += check(r)
    return rows


def _t_fingerprint(r: dict[str, Any]) -> list[Row]:
    fp = r.get("fingerprint")
    if not fp:
        return []
    rates, m = fp["rates"], fp["map"]
    return [
        (
            "fingerprint overhead beyond jieba.lcut <= 15%",
            f"{fp['overhead_vs_lcut']:+.1%} ({_fmt(rates['shdb Fingerprinter']['mb_per_s'])} MB/s)",
            f"jieba.lcut {_fmt(rates['jieba.lcut']['mb_per_s'])} MB/s",
            _status(fp["overhead_vs_lcut"] <= 0.15),
        ),
        (
            "Fingerprinter.map(workers=2) >= 1.8x workers=1",
            f"{m['speedup']:.2f}x",
            f"workers=1 {m['seconds']['workers=1']:.1f} s; 2 processes of pure-Python "
            f"work got {m['ceiling_speedup']:.2f}x at the same time",
            _status(m["speedup"] >= 1.8),
        ),
    ]


def _t_query(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    emb = r.get("query_embedded")
    for scheme, steps in (emb or {}).get("schemes", {}).items():
        step = _step_at(steps, 1_000_000)
        if step:
            rows.append(
                (
                    f"embedded {scheme} p50 at N=1M >= 20x faster than brute force (aim 50x)",
                    f"{step['speedup_vs_brute_p50']:.0f}x ({_fmt(step['shdb']['p50_ms'], 3)} ms)",
                    f"NumPy brute force {_fmt(step['numpy brute force']['p50_ms'])} ms",
                    _status(step["speedup_vs_brute_p50"] >= 20 and step["wrong_answers"] == 0),
                )
            )
    hb = r.get("query_hbase")
    for scheme, steps in (hb or {}).get("schemes", {}).items():
        rows.append(_hbase_row(f"HBase {scheme}", _largest(steps), "tables as shdb creates them"))
    for scheme, step in (r.get("query_hbase_schema") or {}).items():
        rows.append(_hbase_row(f"HBase {scheme}", step, "compacted, schema's encoding + bloom"))
    return rows


def _hbase_row(label: str, step: dict[str, Any], tables: str) -> Row:
    return (
        f"{label} p50 <= 3x one getRow (N={step['n']:,}; {tables})",
        f"{step['ratio_to_get_p50']:.1f}x ({_fmt(step['shdb']['p50_ms'])} ms)",
        f"raw Thrift getRow {_fmt(step['raw Thrift getRow']['p50_ms'])} ms",
        _status(step["ratio_to_get_p50"] <= 3 and step["wrong_answers"] == 0),
    )


def _t_ingest(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for key, store, raw in (
        ("ingest_embedded", "embedded", "LMDB putmulti"),
        ("ingest_hbase", "HBase", "mutateRows"),
    ):
        res = r.get(key)
        for mode, label in (("find_none", "find_k=None"), ("find_k3", "find_k=3")):
            if not res:
                break
            x = res[mode]
            rows.append(
                (
                    f"{store} ingest {label} >= 50% of raw writes",
                    f"{x['ratio']:.0%} ({_fmt(x['shdb_docs_per_s'])} docs/s)",
                    f"raw {raw} {_fmt(x['raw_docs_per_s'])} docs/s",
                    _status(x["ratio"] >= 0.5),
                )
            )
    return rows


def _heap(x: dict[str, Any]) -> str:
    return f"{_fmt(x['peak_anon_mib'], 0)} MiB heap (RSS {_fmt(x['peak_rss_mib'], 0)} MiB)"


def dirty_page_allowance_mib(options: str) -> float:
    """One write batch of LMDB dirty pages: 4 KiB per index cell (10 per document).

    LMDB keeps a write transaction's copied pages in heap memory until it commits;
    with random keys that is about one page per cell once the tree has more leaves
    than a batch has cells. It depends on the batch size, not on N.
    """
    words = options.split()
    batch = int(words[words.index("--batch-size") + 1]) if "--batch-size" in words else 1000
    return batch * 10 * 4096 / 2**20


def _t_rss(r: dict[str, Any]) -> list[Row]:
    rss = r.get("ingest_rss")
    if not rss or len(rss) < 2:
        return []
    small, big = rss[0], rss[-1]
    allowance = dirty_page_allowance_mib(small.get("options", ""))
    return [
        (
            f"shdb ingest --fingerprints memory bounded: heap at {big['lines']:,} lines <= heap "
            f"at {small['lines']:,} + one batch of LMDB dirty pages ({allowance:.0f} MiB)",
            _heap(big),
            _heap(small),
            _status(big["peak_anon_mib"] <= small["peak_anon_mib"] + allowance),
        )
    ]


def _t_dedup(r: dict[str, Any]) -> list[Row]:
    d = r.get("dedup")
    if not d:
        return []
    target = f"near_duplicate_pairs faster than simhash-py find_all at {d['n']:,}, same pairs"
    if not d.get("peer_best"):
        return [(target, f"{d['ours_best']:.2f} s", "no peer built", "n/a")]
    ok = d["peer_best"] > d["ours_best"] and bool(d["identical_pairs"])
    return [
        (
            target,
            f"{d['ours_best']:.2f} s ({d['speedup_best']:.1f}x faster; {d['pairs']:,} pairs, "
            f"identical: {d['identical_pairs']})",
            f"{d['peer']['used']} find_all {d['peer_best']:.2f} s",
            _status(ok),
        )
    ]


def _t_storage(r: dict[str, Any]) -> list[Row]:
    s = r.get("storage_hbase")
    if not s:
        return []
    compacted = s["major_compacted"]["5x10/index"]["bytes_per_doc"]
    schema = s["schema_compacted"]["5x10/index"]["bytes_per_doc"]
    return [
        (
            "HBase 5x10 index <= 200 B/doc (table as shdb creates it over Thrift1)",
            f"{compacted:.0f} B/doc after major compaction "
            f"({s['flushed']['5x10/index']['bytes_per_doc']:.0f} flushed)",
            f"with the schema's {s['encoding']} + bloom: {schema:.0f} B/doc",
            _status(compacted <= 200),
        )
    ]


# -- markdown -------------------------------------------------------------------
def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> Lines:
    header = list(header)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def _profile_table(profile: list[dict[str, Any]]) -> Lines:
    return _table(
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


def markdown(r: dict[str, Any], plots: dict[str, str]) -> str:
    meta = r["meta"]
    flag = {"quick": " --quick", "smoke": " --smoke"}.get(meta["mode"], "")
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `scripts/bench{flag}` on {meta['date']} ({meta['mode']} mode, "
        f"{meta['seconds'] / 60:.1f} min); raw numbers in `{meta['json']}`. Do not edit by "
        "hand: rerun the script (`--report-only FILE` re-renders a results file).",
        "",
        "The machine is shared (2 cores; other test suites and HBase instances may run at the "
        "same time), so absolute numbers wobble from run to run. Every figure is therefore "
        "measured next to its baseline **in the same run, interleaved** (blocks of queries, "
        "batches, chunks, rounds, alternating which goes first), and the targets judge the "
        f"ratios. Load average at start / end: {meta['load_start']} / {meta['load_end']}.",
        "",
        "## Targets",
        "",
        *_table(("target", "measured", "baseline (same run)", "status"), targets(r)),
        *_machine(r["machine"]),
    ]
    for section in (_fingerprint_md, _query_md, _ingest_md, _dedup_md, _storage_md):
        lines += section(r, plots)
    lines += _notes(r)
    return "\n".join(lines).rstrip() + "\n"


def _machine(m: dict[str, Any]) -> Lines:
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
    return ["## Machine", "", *_table(("what", "version / size"), rows)]


def _fingerprint_md(r: dict[str, Any], _plots: dict[str, str]) -> Lines:
    fp = r.get("fingerprint")
    if not fp:
        return []
    rows = [
        (name, _fmt(x["mb_per_s"]), _fmt(x["docs_per_s"], 0), f"{x['seconds']:.1f}")
        for name, x in fp["rates"].items()
    ]
    m = fp["map"]
    step = r["meta"]["plan"]["fp_doc_step"]
    return [
        "## 1. Fingerprinting",
        "",
        f"{fp['docs']} real Chinese documents ({fp['megabytes']:.1f} MB of UTF-8"
        + (f"; every {step}th" if step > 1 else "; all")
        + f" of the {fp['corpus_docs']} documents of `scripts/corpus.py`: manpages-zh and "
        "gimp-help-zh-cn), one process; each chunk of 16 documents goes through every method "
        "in rotating order.",
        "",
        *_table(("method", "MB/s", "docs/s", "seconds"), rows),
        f"- `Fingerprinter.fingerprint` costs **{fp['overhead_vs_lcut']:+.1%}** beyond "
        "`jieba.lcut` on the same texts (target <= 15%): the median over "
        f"{fp.get('chunks', '?')} chunks of shdb time / lcut time, each pair run back to back "
        f"(ratio of the totals: {fp.get('overhead_vs_lcut_totals', math.nan):+.1%}). "
        "Segmentation is nearly all of a fingerprint's cost.",
        f"- vs PyPI `simhash` (`Simhash(jieba.lcut(text))`, the same segmentation): shdb runs at "
        f"**{fp['speed_vs_pypi_simhash']:.2f}x** its speed; PyPI `Simhash(tokens)` alone is the "
        "last row.",
        f"- `Fingerprinter.map(chunks, workers=2)` vs `workers=1` ({m['rounds']} alternating "
        f"rounds, chunks of {m['chunk_docs']} docs): **{m['speedup']:.2f}x** (same fingerprints: "
        f"{m['identical_fingerprints']}). In the same rounds, the same pure-Python loop in 2 "
        f"processes vs 1 got **{m['ceiling_speedup']:.2f}x**: that is what the shared 2 cores "
        "offered at the time, the ceiling for any 2-process speedup. CPU seconds / wall seconds: "
        + ", ".join(f"{k} {v:.2f}" for k, v in m["cores_used"].items())
        + ".",
        "",
    ]


def _query_md(r: dict[str, Any], plots: dict[str, str]) -> Lines:
    emb, hb = r.get("query_embedded"), r.get("query_hbase")
    if not emb and not hb:
        return []
    lines = [
        "## 2. Query latency and candidates vs N",
        "",
        "`SimhashIndex.open(url, scheme=...).query_fingerprint(fp, k=3)` on synthetic random "
        "64-bit fingerprints, bulk-loaded with `add_fingerprints(..., find_k=None)`. Half the "
        "queries are random, half are stored fingerprints with 0-3 bits flipped; every answer "
        "is checked against brute force (`wrong` must be 0). Latencies in ms; queries alternate "
        "with their baselines in blocks of 20.",
        "",
    ]
    if "latency" in plots:
        lines += [f"![latency vs N]({plots['latency']})", ""]
    if emb:
        lines += _embedded_query_md(emb, plots)
    if hb:
        lines += _hbase_query_md(hb, r.get("query_hbase_schema"))
    return lines


def _embedded_query_md(emb: dict[str, Any], plots: dict[str, str]) -> Lines:
    rows = []
    for scheme, steps in emb["schemes"].items():
        for s in steps:
            pypi = s.get("PyPI simhash.SimhashIndex")
            rows.append(
                (
                    scheme,
                    f"{s['n']:,}",
                    _fmt(s["shdb"]["p50_ms"], 3),
                    _fmt(s["shdb"]["p99_ms"], 3),
                    _fmt(s["numpy brute force"]["p50_ms"], 3),
                    f"{s['speedup_vs_brute_p50']:.1f}x",
                    _fmt(pypi["p50_ms"], 3) if pypi else "-",
                    f"{s['candidates']['mean']:.2f}",
                    f"{s['candidates']['theory_total']:.2f}",
                    s["wrong_answers"],
                )
            )
    lines = [
        "### Embedded (LMDB)",
        "",
        *_table(
            (
                "scheme",
                "N",
                "p50",
                "p99",
                "brute p50",
                "brute / p50",
                "PyPI SimhashIndex p50",
                "cells/query",
                "theory",
                "wrong",
            ),
            rows,
        ),
        f"PyPI `simhash.SimhashIndex` (k=3: 4 blocks, in memory) is built only up to "
        f"N={emb['pypi_cap']:,}: its `add` runs at ~{_fmt(emb['pypi_add_docs_per_s'], 0)} "
        "docs/s in pure Python and keeps every entry as a string in a set.",
        "",
        "Theory for cells examined: a random query hits N x (sum over combinations of "
        "2^-width) cells (5x10: six 26-bit and four 25-bit combinations, 14N/2^26, the README's "
        "~10N/2^26; 4x4: 4N/2^16), plus its true matches' cells (one per combination a match "
        "agrees on), counted exactly per query.",
        "",
    ]
    if "candidates" in plots:
        lines += [f"![candidates vs N]({plots['candidates']})", ""]
    for scheme, steps in emb["schemes"].items():
        top = _largest(steps)
        if top.get("profile"):
            lines += [
                f"Where an embedded {scheme} query's time goes at N={top['n']:,} (cProfile "
                f"of the same {top['shdb']['n']} queries, by own time; profiling inflates "
                "Python-level calls):",
                "",
                *_profile_table(top["profile"][:8]),
            ]
    return lines


def _hbase_query_md(hb: dict[str, Any], schema: dict[str, Any] | None) -> Lines:
    rows = []
    for scheme, steps in hb["schemes"].items():
        for s in steps:
            rows.append(_hbase_query_row(scheme, "as created by shdb", s))
    for scheme, s in (schema or {}).items():
        rows.append(_hbase_query_row(scheme, "compacted + schema settings", s))
    lines = [
        "### HBase (standalone, Thrift1 via happybase)",
        "",
        *_table(
            (
                "scheme",
                "tables",
                "N",
                "p50",
                "p99",
                "getRow p50",
                "p50 / getRow",
                "cells/query",
                "theory",
                "wrong",
                "bulk load docs/s",
            ),
            rows,
        ),
        "*compacted + schema settings*: the same tables re-queried after section 5 "
        "major-compacted them with the schema's FAST_DIFF and bloom filters (a 5-byte "
        "row-prefix bloom on the index), which Thrift1 cannot set.",
        "",
    ]
    cpu = [
        (scheme, tables, c)
        for scheme, steps in hb["schemes"].items()
        for tables, c in (("as created by shdb", _largest(steps).get("cpu_per_query")),)
        if c
    ] + [
        (scheme, "compacted + schema settings", s["cpu_per_query"])
        for scheme, s in (schema or {}).items()
        if s.get("cpu_per_query")
    ]
    if cpu:
        lines += [
            "CPU per query at the largest N (the same queries once more, back to back): the "
            "client process and the two HBase JVMs share the machine's 2 cores, so a query "
            "whose CPU adds up to ~2x its wall time is bound by CPU, not by waiting.",
            "",
            *_table(
                ("scheme", "tables", "wall ms", "client CPU ms", "HBase CPU ms", "CPU / wall"),
                [
                    (
                        scheme,
                        tables,
                        _fmt(c["wall_ms"]),
                        _fmt(c["client_cpu_ms"]),
                        _fmt(c["hbase_cpu_ms"]),
                        f"{(c['client_cpu_ms'] + c['hbase_cpu_ms']) / c['wall_ms']:.2f}",
                    )
                    for scheme, tables, c in cpu
                ],
            ),
        ]
    rt = hb.get("round_trips")
    if rt:
        serial = sum(v["p50_ms"] for v in rt.values())
        lines += [
            "What a query is made of: each prefix scan (10 for 5x10, 4 for 4x4) is three "
            "Thrift calls, here timed one after another on one connection (p50 ms): "
            + ", ".join(f"`{k}` {_fmt(v['p50_ms'])}" for k, v in rt.items())
            + f"; {_fmt(serial)} ms per scan. shdb runs a query's scans concurrently on pooled "
            "connections (then one `getRows` to confirm hits).",
            "",
        ]
    return lines


def _hbase_query_row(scheme: str, tables: str, s: dict[str, Any]) -> tuple[Any, ...]:
    return (
        scheme,
        tables,
        f"{s['n']:,}",
        _fmt(s["shdb"]["p50_ms"]),
        _fmt(s["shdb"]["p99_ms"]),
        _fmt(s["raw Thrift getRow"]["p50_ms"]),
        f"{s['ratio_to_get_p50']:.1f}x",
        f"{s['candidates']['mean']:.2f}",
        f"{s['candidates']['theory_total']:.2f}",
        s["wrong_answers"],
        _fmt(s["build_docs_per_s"], 0) if "build_docs_per_s" in s else "-",
    )


def _ingest_md(r: dict[str, Any], plots: dict[str, str]) -> Lines:
    emb, hb, rss = r.get("ingest_embedded"), r.get("ingest_hbase"), r.get("ingest_rss")
    if not (emb or hb or rss):
        return []
    lines = [
        "## 3. Ingest of precomputed fingerprints",
        "",
        "Per batch, `add_fingerprints` and a raw write of exactly the same rows alternate. "
        "Embedded raw = one LMDB write transaction with `putmulti` of the store's own "
        "keys/values (index cells, docs rows); HBase raw = happybase `Batch.send()` "
        "(`mutateRows`) of the same row keys and columns, built before the clock starts. "
        "Fresh indexes; batch size 1000 unless stated.",
        "",
    ]
    rows = []
    for store, res in (("embedded", emb), ("HBase", hb)):
        for mode in ("find_none", "find_k3") if res else ():
            x = res[mode]  # type: ignore[index]
            rows.append(
                (
                    store,
                    f"find_k={x['find_k']}",
                    f"{x['docs']:,}",
                    _fmt(x["shdb_docs_per_s"], 0),
                    _fmt(x["raw_docs_per_s"], 0),
                    f"{x['ratio']:.0%}",
                    ", ".join(
                        f"{_LABELS.get(k, k)} {v:.0%}" for k, v in x.get("shares", {}).items()
                    ),
                )
            )
    lines += _table(
        ("store", "mode", "docs", "shdb docs/s", "raw docs/s", "shdb / raw", "shdb time in"),
        rows,
    )
    lines += [
        "*shdb time in*: shares of shdb's own time spent in near-copy lookups (`find_k`, "
        "scans plus their confirming reads), in reads of the docs table (the documents' old "
        "versions, and the lookups' confirming reads again) and, for HBase, in the "
        "`mutateRowsTs` calls; the rest is client-side Python.",
        "",
    ]
    if "ingest" in plots:
        lines += [f"![ingest vs batch size]({plots['ingest']})", ""]
    for store, res in (("embedded", emb), ("HBase", hb)):
        if res:
            lines += [f"Batch-size sweep, {store}:", ""]
            lines += _table(
                ("batch", "docs", "shdb docs/s", "raw docs/s", "shdb / raw"),
                [
                    (
                        f"{s['batch_size']:,}",
                        f"{s['docs']:,}",
                        _fmt(s["shdb_docs_per_s"], 0),
                        _fmt(s["raw_docs_per_s"], 0),
                        f"{s['ratio']:.0%}",
                    )
                    for s in res["batch_sweep"]
                ],
            )
    if emb and emb.get("profile"):
        lines += [
            "Where an embedded bulk load spends its time (cProfile, find_k=None, batch 1000):",
            "",
            *_profile_table(emb["profile"][:10]),
        ]
    if rss:
        lines += _rss_md(rss)
    return lines


def _rss_md(rss: list[dict[str, Any]]) -> Lines:
    options = rss[0].get("options", "")
    return [
        "Peak memory of `shdb ingest --fingerprints FILE "
        + (
            f"{options}` (quick mode: the bulk-load options, to fit its time budget; "
            if options
            else "` (default options: k=3 lookups, batch 1000; "
        )
        + "lines `ID<TAB>HEX`, embedded index), sampled from /proc every 50 ms. LMDB maps its "
        "file, so the index pages the process touched count in its RSS as file-backed pages "
        "(page cache the kernel can drop); the heap is the anonymous part. The heap holds one "
        "batch, plus LMDB's copies of the pages a write transaction dirties (about 4 KiB per "
        "index cell once the tree has more leaves than a batch has cells): it grows with the "
        "batch size and levels off with N. *written/doc*: `write_bytes` of /proc/PID/io over "
        "the documents; every commit rewrites each leaf page it touched, so random keys cost "
        "up to a page per index cell, and more as the tree outgrows a batch.",
        "",
        *_table(
            (
                "lines",
                "seconds",
                "docs/s",
                "peak RSS MiB",
                "peak anon (heap) MiB",
                "peak file-backed MiB",
                "index bytes",
                "written/doc",
            ),
            [
                (
                    f"{x['lines']:,}",
                    f"{x['seconds']:.1f}",
                    _fmt(x["docs_per_s"], 0),
                    _fmt(x["peak_rss_mib"], 0),
                    _fmt(x["peak_anon_mib"], 0),
                    _fmt(x["peak_file_mib"], 0),
                    f"{x['index_bytes']:,}",
                    f"{x.get('written_bytes_per_doc', 0):,.0f} B",
                )
                for x in rss
            ],
        ),
    ]


def _dedup_md(r: dict[str, Any], _plots: dict[str, str]) -> Lines:
    d = r.get("dedup")
    if not d:
        return []
    peer = d["peer"]
    tried = "; ".join(f"{k}: {v}" for k, v in peer.items() if k not in ("used", "path"))
    lines = [
        "## 4. All-pairs near-duplicate search in memory",
        "",
        f"{d['n']:,} distinct fingerprints, 1% of them planted copies of others with 1-3 bits "
        "flipped; k=3. `near_duplicate_pairs(fps, 3, SCHEMES['5x10'])` in process vs "
        f"`{peer.get('used') or 'no peer'}` `find_all(hashes, 5, 3)` in a subprocess (timed "
        f"around the call only), {d['rounds']} alternating rounds, best of each.",
        "",
        *_table(
            ("implementation", "best s", "all rounds s", "pairs"),
            [
                (
                    "shdb near_duplicate_pairs",
                    f"{d['ours_best']:.2f}",
                    ", ".join(f"{x:.2f}" for x in d["ours_seconds"]),
                    f"{d['pairs']:,}",
                ),
                (
                    f"{peer.get('used') or '-'} find_all",
                    _fmt(d["peer_best"]),
                    ", ".join(f"{x:.2f}" for x in d["peer_seconds"]),
                    _fmt(d["peer_pairs"], 0),
                ),
            ],
        ),
        f"Identical pair sets: **{d['identical_pairs']}**. simhash-py's published figure is "
        "1M fingerprints, 5 blocks, k=3 in 1.6 s (other hardware). simhash-pybind wraps the "
        "same C++ `find_all` as simhash-py." + (f" Build notes: {tried}." if tried else ""),
        "",
    ]
    cli = d.get("cli")
    if cli:
        lines += [
            f"`shdb dedup --fingerprints FILE -o OUT` end to end on the same {d['n']:,} "
            f"(`ID<TAB>HEX` lines; parse, search, write JSON lines): **{cli['seconds']:.1f} s**, "
            f"{cli['pairs']:,} pairs (same count: {cli['same_count']}), peak RSS "
            f"{_fmt(cli['peak_rss_mib'], 0)} MiB.",
            "",
        ]
    return lines


def _storage_md(r: dict[str, Any], _plots: dict[str, str]) -> Lines:
    emb, hb = r.get("storage_embedded"), r.get("storage_hbase")
    if not emb and not hb:
        return []
    lines = ["## 5. Storage", ""]
    if emb:
        lines += [
            "Embedded: size of `data.mdb` / documents (index + docs tables; synthetic ids "
            "`d0`..`dN`, fingerprints only), after the bulk loads of section 2:",
            "",
            *_table(
                ("scheme", "N", "data.mdb bytes", "bytes/doc"),
                [
                    (scheme, f"{x['n']:,}", f"{x['bytes']:,}", f"{x['bytes_per_doc']:.0f}")
                    for scheme, xs in emb.items()
                    for x in xs
                ],
            ),
        ]
    if hb:
        lines += [
            f"HBase: HFile bytes per document of the tables of section 2 (N={hb['docs']:,}), "
            "under the bench instance's data dir. *flushed*: memstores flushed (all HFiles); "
            "*major compacted*: one HFile per store; *schema settings*: the schema's "
            f"{hb['encoding']} encoding and bloom filters ("
            + ", ".join(f"`{s}`" for s in hb["schema_specs"])
            + "), which Thrift1 cannot set, applied with the Java Admin API "
            "(scripts/benchlib/HBaseAdminTool.java) and major-compacted again. Compression is "
            "what the tables were created with (schema/hbase-tables.json).",
            "",
            *_table(
                ("table", "flushed B/doc", "major compacted B/doc", "schema settings B/doc"),
                [
                    (
                        k,
                        f"{hb['flushed'][k]['bytes_per_doc']:.0f}",
                        f"{hb['major_compacted'][k]['bytes_per_doc']:.0f}",
                        f"{hb['schema_compacted'][k]['bytes_per_doc']:.0f}",
                    )
                    for k in hb["flushed"]
                ],
            ),
        ]
    return lines


def _notes(r: dict[str, Any]) -> Lines:
    notes: list[str] = r.get("notes", [])
    errors: dict[str, str] = r.get("errors", {})
    out = ["## Notes", "", *[f"- {n}" for n in notes]]
    out += [
        f"- Section `{name}` failed in this run: `{tb.strip().splitlines()[-1]}`"
        for name, tb in errors.items()
    ]
    return [*out, ""] if len(out) > 2 else []


def print_targets(r: dict[str, Any], emit: Callable[[str], None]) -> None:
    for target, measured, baseline, status in targets(r):
        emit(f"{status:7} {target}: {measured} (baseline: {baseline})")
