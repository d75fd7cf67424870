"""Ingest of precomputed fingerprints vs each store's raw write speed.

For every batch, the index's ``add_fingerprints`` and a raw write of exactly the
same rows alternate (A B, B A, ...). The raw side's keys and values are computed
before its clock starts, so it measures the store alone:

* embedded: one LMDB write transaction per batch with ``putmulti`` of the
  keys/values the embedded store writes (index cells, then docs rows), built with
  the public codec (docs/SPEC.md);
* HBase, over Thrift2 (the production path): one raw Thrift2 ``putMultiple`` per
  table per batch, with the same row keys, columns and timestamps, prepared
  before the clock starts.

Peak memory of ``shdb ingest --fingerprints FILE`` is read from /proc while it
runs (anonymous vs file-backed pages: LMDB maps its file, so touched index pages
count in RSS although they are page cache, not heap) and from wait4's ru_maxrss.
"""

from __future__ import annotations

import cProfile
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import report
from .common import K, log
from .context import Context
from .hbase_instance import thrift2_types
from .registry import Figure, Section, Target, register
from .timing import timed, top_functions

Pairs = list[tuple[str, int]]
SCHEME = "5x10"  # the default scheme, which every ingest here uses
HBASE_STORE = "HBase over Thrift2"
HBASE_PLAIN_BOUND = (
    "4 calls per batch to the raw side's 2, and a checkAndPut per document: a "
    "getMultiple of the batch's docs rows, a claim of each (pipelined; docs/SPEC.md, "
    "Writers), the index putMultiple, then the docs rows' deleteMultiple (columns a "
    "new version lacks) and putMultiple"
)


def _pairs(fps: np.ndarray, start: int, stop: int, tag: str) -> Pairs:
    return [(f"{tag}{i}", int(fps[i])) for i in range(start, stop)]


def _batches(fps: np.ndarray, n: int, size: int, tag: str) -> list[Pairs]:
    return [_pairs(fps, s, min(s + size, n), tag) for s in range(0, n, size)]


def _alternate(
    batches: Sequence[Pairs],
    shdb: Callable[[Pairs], Any],
    raw: Callable[[Pairs], Callable[[], Any]],
) -> dict[str, float]:
    """Total seconds of each side; raw(batch) prepares and returns the timed write."""
    totals = {"shdb": 0.0, "raw": 0.0}
    for n, batch in enumerate(batches):
        write = raw(batch)  # untimed: encoding the raw rows
        order = ("shdb", "raw") if n % 2 == 0 else ("raw", "shdb")
        for side in order:
            dt, _ = timed(shdb, batch) if side == "shdb" else timed(write)
            totals[side] += dt
    return totals


def index_cells(batch: Pairs, scheme_name: str = SCHEME) -> list[tuple[bytes, str]]:
    """(row key, id) of every index cell of ``batch``, from the public codec and scheme."""
    from simhash_hbase.layout import codec
    from simhash_hbase.layout.scheme import get_scheme

    scheme = get_scheme(scheme_name)
    fps = np.fromiter((fp for _, fp in batch), dtype=np.uint64, count=len(batch))
    keys = codec.encode_rowkeys_many(fps, scheme.fields_many(fps))
    ids = [doc_id for doc_id, _ in batch for _ in range(scheme.rows_per_fingerprint)]
    return list(zip(keys, ids))


def _rates(totals: dict[str, float], docs: int) -> dict[str, Any]:
    shdb, raw = docs / totals["shdb"], docs / totals["raw"]
    return {"docs": docs, "shdb_docs_per_s": shdb, "raw_docs_per_s": raw, "ratio": shdb / raw}


# -- embedded -------------------------------------------------------------------
class RawLmdb:
    """An LMDB environment opened like the embedded store's, written directly."""

    def __init__(self, path: Path) -> None:
        import lmdb

        self.env = lmdb.open(
            str(path), map_size=1 << 40, max_dbs=3, readahead=False, metasync=False
        )
        self.index_db = self.env.open_db(b"index")
        self.docs_db = self.env.open_db(b"docs")

    def writer(self, batch: Pairs) -> Callable[[], None]:
        """The embedded layout's keys of ``batch`` (ids short enough not to be folded),
        then a write that does only putmulti."""
        from simhash_hbase.layout import codec
        from simhash_hbase.records import Document
        from simhash_hbase.store.lmdb.columns import pack_columns

        index_items = [(row + codec.encode_doc_id(i), b"") for row, i in index_cells(batch)]
        doc_items = [
            (codec.encode_doc_id(i), pack_columns(codec.doc_to_columns(Document(i, fp))))
            for i, fp in batch
        ]

        def write() -> None:
            with self.env.begin(write=True) as txn:
                txn.cursor(db=self.index_db).putmulti(index_items)
                txn.cursor(db=self.docs_db).putmulti(doc_items)

        return write

    def close(self) -> None:
        self.env.close()


def embedded_pair(
    fps: np.ndarray, n: int, batch: int, find_k: int | None, work: Path, tag: str
) -> dict[str, Any]:
    """shdb embedded index_fingerprints vs raw putmulti of the same rows, interleaved."""
    from simhash_hbase import SimhashIndex
    from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

    shdb_path, raw_path = work / f"ingest-{tag}-shdb", work / f"ingest-{tag}-raw"
    for p in (shdb_path, raw_path):
        shutil.rmtree(p, ignore_errors=True)
    raw = RawLmdb(raw_path)
    try:
        options = IngestOptions(batch_size=batch, find_k=find_k)
        with SimhashIndex.open(str(shdb_path), scheme=SCHEME) as index:
            totals = _alternate(
                _batches(fps, n, batch, "i"),
                lambda b: index_fingerprints(index, b, options),
                raw.writer,
            )
    finally:
        raw.close()
    out = _rates(totals, n)
    out.update(batch_size=batch, find_k=find_k)
    for p in (shdb_path, raw_path):
        shutil.rmtree(p, ignore_errors=True)
    return out


def profile_embedded(fps: np.ndarray, n: int, batch: int, work: Path) -> list[dict[str, Any]]:
    """cProfile of an embedded bulk load: where time goes beyond putmulti."""
    from simhash_hbase import SimhashIndex
    from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

    path = work / "ingest-profile"
    shutil.rmtree(path, ignore_errors=True)
    pairs = _pairs(fps, 0, n, "p")
    profiler = cProfile.Profile()
    with SimhashIndex.open(str(path)) as index:
        profiler.enable()
        index_fingerprints(index, pairs, IngestOptions(batch_size=batch, find_k=None))
        profiler.disable()
    shutil.rmtree(path, ignore_errors=True)
    return top_functions(profiler, 12)


PairRun = Callable[[int, int, int | None, str], dict[str, Any]]


def _modes_and_sweep(
    store: str,
    pair: PairRun,
    docs: tuple[int, int],
    batch_sizes: tuple[int, ...],
    batch_docs: int,
) -> dict[str, Any]:
    """find_k=None and find_k=3 at batch 1000, then find_k=None per batch size.

    pair(docs, batch, find_k, tag) runs one interleaved shdb-vs-raw comparison. The
    share of a find_k=3 ingest spent on near-copy lookups is estimated from the two
    modes' rates in the same run: 1 - rate(find_k=3) / rate(find_k=None).
    """
    out: dict[str, Any] = {
        "find_none": pair(docs[0], 1000, None, "none"),
        "find_k3": pair(docs[1], 1000, K, "k3"),
    }
    none, k3 = out["find_none"], out["find_k3"]
    k3["lookup_share"] = 1 - k3["shdb_docs_per_s"] / none["shdb_docs_per_s"]
    log(
        f"{store} ingest {none['shdb_docs_per_s']:,.0f} docs/s = {none['ratio']:.0%} of raw; "
        f"with find_k=3 {k3['ratio']:.0%}"
    )
    out["batch_sweep"] = [pair(batch_docs, b, None, f"b{b}") for b in batch_sizes]
    for s in out["batch_sweep"]:
        log(f"  batch {s['batch_size']}: {s['shdb_docs_per_s']:,.0f} docs/s ({s['ratio']:.0%})")
    return out


def run_embedded(ctx: Context) -> dict[str, Any]:
    plan, work = ctx.plan, ctx.work
    fps = ctx.fingerprints(plan.ingest_docs)
    log(f"embedded ingest: {plan.ingest_docs:,} docs vs raw LMDB putmulti")
    out = _modes_and_sweep(
        "embedded",
        lambda n, batch, k, tag: embedded_pair(fps, n, batch, k, work, tag),
        (plan.ingest_docs, plan.ingest_find_docs),
        plan.batch_sizes,
        plan.batch_docs,
    )
    out["profile"] = profile_embedded(fps, min(plan.ingest_docs, 100_000), 1000, work)
    return out


# -- HBase ----------------------------------------------------------------------
def _hbase_raw_writer(client: Any, prefix: str, batch: Pairs) -> Callable[[], None]:
    """Thrift2 puts of the rows shdb writes (docs/SPEC.md: index cells are qualifiers
    of family ``d``, the fingerprint is ``f:h``), at one explicit timestamp as shdb
    writes them; only the two putMultiple calls are timed."""
    from simhash_hbase.layout import codec

    t2, ts = thrift2_types(), time.time_ns() // 1_000_000
    index_puts = [
        t2.TPut(row, [t2.TColumnValue(b"d", codec.encode_doc_id(doc_id), b"", ts)], ts)
        for row, doc_id in index_cells(batch)
    ]
    family, _, qualifier = codec.COL_FINGERPRINT.partition(b":")
    docs_puts = [
        t2.TPut(
            codec.encode_doc_id(doc_id),
            [t2.TColumnValue(family, qualifier, codec.fingerprint_to_bytes(fp), ts)],
            ts,
        )
        for doc_id, fp in batch
    ]
    index_table, docs_table = f"{prefix}_index".encode(), f"{prefix}_docs".encode()

    def write() -> None:
        client.putMultiple(index_table, index_puts)
        client.putMultiple(docs_table, docs_puts)

    return write


def hbase_pair(
    fps: np.ndarray, n: int, batch: int, find_k: int | None, hbase: Any, tag: str
) -> dict[str, Any]:
    """shdb over Thrift2 index_fingerprints vs raw Thrift2 putMultiple of the same
    rows, interleaved."""
    from simhash_hbase import SimhashIndex
    from simhash_hbase.jobs.ingest import IngestOptions, index_fingerprints

    client = hbase.thrift2_client()
    shdb_prefix, raw_prefix = hbase.prefix(f"ing_{tag}_shdb"), hbase.prefix(f"ing_{tag}_raw")
    try:
        # The raw tables are created by shdb too, so both sides write the same schema.
        SimhashIndex.open(f"{hbase.thrift2_url}?prefix={raw_prefix}").close()
        url = f"{hbase.thrift2_url}?prefix={shdb_prefix}"
        options = IngestOptions(batch_size=batch, find_k=find_k)
        with SimhashIndex.open(url, scheme=SCHEME) as ix:
            totals = _alternate(
                _batches(fps, n, batch, "h"),
                lambda b: index_fingerprints(ix, b, options),
                lambda b: _hbase_raw_writer(client, raw_prefix, b),
            )
    finally:
        client.close()
    hbase.drop_tables(shdb_prefix, raw_prefix)  # keep the instance light for what follows
    out = _rates(totals, n)
    out.update(batch_size=batch, find_k=find_k)
    return out


def run_hbase(ctx: Context) -> dict[str, Any]:
    plan, hbase = ctx.plan, ctx.require_hbase()
    fps = ctx.fingerprints(plan.hbase_ingest_docs)
    log(f"hbase ingest over Thrift2: {plan.hbase_ingest_docs:,} docs vs raw putMultiple")
    return _modes_and_sweep(
        "hbase (thrift2)",
        lambda n, batch, k, tag: hbase_pair(fps, n, batch, k, hbase, tag),
        (plan.hbase_ingest_docs, plan.hbase_ingest_find_docs),
        plan.hbase_batch_sizes,
        plan.hbase_batch_docs,
    )


# -- peak memory of the CLI -------------------------------------------------------
def write_tsv(fps: np.ndarray, n: int, path: Path, tag: str = "r") -> Path:
    """``ID<TAB>HEX`` lines, the input format of `shdb ingest --fingerprints`."""
    with path.open("w") as f:
        for start in range(0, n, 100_000):
            chunk = fps[start : min(start + 100_000, n)].tolist()
            f.write("".join(f"{tag}{start + i}\t{fp:016x}\n" for i, fp in enumerate(chunk)))
    return path


def _proc_status(pid: int) -> dict[str, int]:
    """Memory lines of /proc/PID/status in KiB ({} once the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _written_bytes(pid: int) -> int:
    """Bytes the process caused to be written to storage (/proc/PID/io write_bytes)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_cli_peak(args: list[str], interval: float = 0.05) -> dict[str, Any]:
    """Run ``python -m simhash_hbase ARGS``; wall time and peak memory in MiB."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "simhash_hbase", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    start = time.perf_counter()
    peak: dict[str, int] = {}
    written = 0
    while True:  # wait4: the child's own CPU time, whatever else this process runs
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        for key, value in _proc_status(proc.pid).items():
            peak[key] = max(peak.get(key, 0), value)
        written = max(written, _written_bytes(proc.pid))
        time.sleep(interval)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"shdb {' '.join(args)} failed ({proc.returncode}):\n{stderr}")
    return {
        "seconds": wall,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": peak.get("VmHWM", 0) / 1024,
        "peak_anon_mib": peak.get("RssAnon", 0) / 1024,
        "peak_file_mib": peak.get("RssFile", 0) / 1024,
        "written_bytes": written,
        "stderr_tail": stderr.strip().splitlines()[-1:] if stderr.strip() else [],
    }


def run_rss(ctx: Context) -> list[dict[str, Any]]:
    """`shdb ingest --fingerprints FILE` (embedded, k=3 as by default) at two sizes."""
    from simhash_hbase import SimhashIndex

    plan, work = ctx.plan, ctx.work
    fps = ctx.fingerprints(plan.rss_lines[-1])
    out = []
    for lines in plan.rss_lines:
        tsv = write_tsv(fps, lines, work / f"fingerprints-{lines}.tsv")
        index = work / f"rss-{lines}"
        shutil.rmtree(index, ignore_errors=True)
        args = ["ingest", "--fingerprints", str(tsv), "--index", str(index), *plan.rss_args]
        result = run_cli_peak(args)
        result.update(
            lines=lines,
            docs_per_s=lines / result["seconds"],
            options=" ".join(plan.rss_args),
            written_bytes_per_doc=result["written_bytes"] / lines,
        )
        with SimhashIndex.open(str(index)) as built:
            result["index_bytes"] = built.stats()["disk_bytes"]
        out.append(result)
        log(
            f"shdb ingest --fingerprints {lines:,} lines: {result['seconds']:.0f} s, peak RSS "
            f"{result['peak_rss_mib']:.0f} MiB (anon {result['peak_anon_mib']:.0f}, "
            f"file {result['peak_file_mib']:.0f})"
        )
        shutil.rmtree(index, ignore_errors=True)
        tsv.unlink()
    return out


# -- report ---------------------------------------------------------------------
def _ingest_figures(
    res: dict[str, Any], store: str, raw: str, plain_bound: str = ""
) -> list[Figure]:
    out = []
    for mode, label in (("find_none", "find_k=None"), ("find_k3", "find_k=3")):
        x = res[mode]
        share = x.get("lookup_share")
        out.append(
            Figure.judge(
                f"{store} ingest {label}: add_fingerprints docs/s / raw writes of the same rows",
                x["ratio"],
                Target.at_least(0.5, unit="%"),
                measured=f"{report.fmt(x['shdb_docs_per_s'])} docs/s",
                baseline=f"raw {raw} {report.fmt(x['raw_docs_per_s'])} docs/s",
                bound=plain_bound
                if share is None
                else f"near-copy lookups ~{share:.0%} of the time",
            )
        )
    return out


def embedded_figures(res: dict[str, Any]) -> list[Figure]:
    return _ingest_figures(res, "embedded", "LMDB putmulti")


def hbase_figures(res: dict[str, Any]) -> list[Figure]:
    return _ingest_figures(res, HBASE_STORE, "Thrift2 putMultiple", HBASE_PLAIN_BOUND)


def dirty_page_allowance_mib(options: str) -> float:
    """One write batch of LMDB dirty pages: 4 KiB per index cell (10 per document).

    LMDB keeps a write transaction's copied pages in heap memory until it commits;
    with random keys that is about one page per cell once the tree has more leaves
    than a batch has cells. It depends on the batch size, not on N.
    """
    words = options.split()
    batch = int(words[words.index("--batch-size") + 1]) if "--batch-size" in words else 1000
    return batch * 10 * 4096 / 2**20


def _heap(x: dict[str, Any]) -> str:
    return (
        f"{report.fmt(x['peak_anon_mib'], 0)} MiB heap (RSS {report.fmt(x['peak_rss_mib'], 0)} MiB)"
    )


def rss_figures(rss: list[dict[str, Any]]) -> list[Figure]:
    if len(rss) < 2:
        return []
    small, big = rss[0], rss[-1]
    allowance = dirty_page_allowance_mib(small.get("options", ""))
    limit = small["peak_anon_mib"] + allowance
    return [
        Figure.judge(
            f"shdb ingest --fingerprints heap at {big['lines']:,} lines / (heap at "
            f"{small['lines']:,} + one batch of LMDB dirty pages, {allowance:.0f} MiB)",
            big["peak_anon_mib"] / limit if limit else float("nan"),
            Target.at_most(1.0),
            measured=_heap(big),
            baseline=_heap(small),
        )
    ]


def _rates_rows(store: str, res: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (
            store,
            f"find_k={x['find_k']}",
            f"{x['docs']:,}",
            report.fmt(x["shdb_docs_per_s"], 0),
            report.fmt(x["raw_docs_per_s"], 0),
            f"{x['ratio']:.0%}",
            f"~{x['lookup_share']:.0%}" if "lookup_share" in x else "-",
        )
        for x in (res["find_none"], res["find_k3"])
    ]


def _sweep_table(res: dict[str, Any]) -> str:
    return report.table(
        ("batch", "docs", "shdb docs/s", "raw docs/s", "shdb / raw"),
        [
            (
                f"{s['batch_size']:,}",
                f"{s['docs']:,}",
                report.fmt(s["shdb_docs_per_s"], 0),
                report.fmt(s["raw_docs_per_s"], 0),
                f"{s['ratio']:.0%}",
            )
            for s in res["batch_sweep"]
        ],
    )


_RATES_HEADER = ("store", "mode", "docs", "shdb docs/s", "raw docs/s", "shdb / raw", "lookups")


def _render(results: dict[str, Any], key: str, store: str, template: str) -> str:
    res, plots = results[key], results.get("_plots", {})
    profile = res.get("profile")
    return report.fill(
        template,
        table=report.table(_RATES_HEADER, _rates_rows(store, res)),
        sweep=_sweep_table(res),
        plot=f"![ingest vs batch size]({plots['ingest']})" if "ingest" in plots else "",
        profile=report.profile_table(profile[:10]) if profile else "(not profiled)",
    )


def render_embedded(results: dict[str, Any]) -> str:
    return _render(results, "ingest_embedded", "embedded", "bench/ingest_embedded.md")


def render_hbase(results: dict[str, Any]) -> str:
    return _render(results, "ingest_hbase", HBASE_STORE, "bench/ingest_hbase.md")


def render_rss(results: dict[str, Any]) -> str:
    rss = results["ingest_rss"]
    options = rss[0].get("options", "")
    header = (
        "lines",
        "seconds",
        "docs/s",
        "peak RSS MiB",
        "peak anon (heap) MiB",
        "peak file-backed MiB",
        "index bytes",
        "written/doc",
    )
    rows = [
        (
            f"{x['lines']:,}",
            f"{x['seconds']:.1f}",
            report.fmt(x["docs_per_s"], 0),
            report.fmt(x["peak_rss_mib"], 0),
            report.fmt(x["peak_anon_mib"], 0),
            report.fmt(x["peak_file_mib"], 0),
            f"{x['index_bytes']:,}",
            f"{x.get('written_bytes_per_doc', 0):,.0f} B",
        )
        for x in rss
    ]
    return report.fill(
        "bench/ingest_rss.md",
        options=f" {options}" if options else "",
        which="the bulk-load options, to fit the quick time budget"
        if options
        else "default options: k=3 lookups, batch 1000",
        table=report.table(header, rows),
    )


register(
    Section(
        "ingest_embedded",
        "Ingest of precomputed fingerprints: embedded",
        run_embedded,
        embedded_figures,
        render_embedded,
        order=40,
    )
)
register(
    Section(
        "ingest_rss",
        "Peak memory of shdb ingest --fingerprints",
        run_rss,
        rss_figures,
        render_rss,
        order=45,
    )
)
register(
    Section(
        "ingest_hbase",
        "Ingest of precomputed fingerprints: HBase (Thrift2)",
        run_hbase,
        hbase_figures,
        render_hbase,
        needs_hbase=True,
        order=60,
    )
)
