"""Section 3: ingest of precomputed fingerprints vs each store's raw write speed.

For every batch, the index's ``add_fingerprints`` and a raw write of exactly the
same rows alternate (A B, B A, ...). The raw side's keys and values are computed
before its clock starts, so it measures the store alone:

* embedded: one LMDB write transaction per batch with ``putmulti`` of the very
  keys/values the embedded store writes (index cells, then docs rows);
* HBase: one happybase ``Batch.send()`` (a Thrift ``mutateRows``) per table per
  batch, with the same row keys and columns, prepared before the clock starts.

Peak memory of ``shdb ingest --fingerprints FILE`` is read from /proc while it
runs (anonymous vs file-backed pages: LMDB maps its file, so touched index pages
count in RSS although they are page cache, not heap) and from wait4's ru_maxrss.
"""

from __future__ import annotations

import cProfile
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .common import K, Plan, log, timed, top_functions

Pairs = list[tuple[str, int]]


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


def _time_calls(targets: dict[str, tuple[Any, str]]) -> dict[str, float]:
    """Accumulate the seconds spent in some methods of some instances.

    Each instance attribute is wrapped (behaviour unchanged), so a shdb ingest can
    be split into near-copy lookups (find_k), reads of the documents' old versions,
    and writes: the profile of a missed target, measured in the same run.
    """
    spent = dict.fromkeys(targets, 0.0)

    def wrap(name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            dt, out = timed(inner, *args, **kwargs)
            spent[name] += dt
            return out

        return call

    for name, (obj, attr) in targets.items():
        setattr(obj, attr, wrap(name, getattr(obj, attr)))
    return spent


def _split(spent: dict[str, float], total: float) -> dict[str, float]:
    return {name: s / total for name, s in spent.items()}


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

    def writer(self, index: Any, batch: Pairs) -> Callable[[], None]:
        """The store's own encoding of ``batch``, then a write that does only putmulti."""
        from simhash_hbase.records import Document

        docs = [Document(doc_id, fp) for doc_id, fp in batch]
        index_items = index.store._index_items(index.cells(docs))
        doc_items = [index.store._doc_item(d) for d in docs]

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
    """shdb embedded add_fingerprints vs raw putmulti of the same rows, interleaved."""
    from simhash_hbase import SimhashIndex

    shdb_path, raw_path = work / f"ingest-{tag}-shdb", work / f"ingest-{tag}-raw"
    for p in (shdb_path, raw_path):
        shutil.rmtree(p, ignore_errors=True)
    raw = RawLmdb(raw_path)
    try:
        with SimhashIndex.open(str(shdb_path), batch_size=batch) as index:
            spent = _time_calls(
                {
                    "lookups": (index, "_find_at_insert"),
                    "docs-table reads": (index.store, "_get_docs"),
                }
            )
            totals = _alternate(
                _batches(fps, n, batch, "i"),
                lambda b: index.add_fingerprints(b, find_k=find_k),
                lambda b: raw.writer(index, b),
            )
    finally:
        raw.close()
    out = _rates(totals, n)
    out.update(batch_size=batch, find_k=find_k, shares=_split(spent, totals["shdb"]))
    for p in (shdb_path, raw_path):
        shutil.rmtree(p, ignore_errors=True)
    return out


def profile_embedded(fps: np.ndarray, n: int, batch: int, work: Path) -> list[dict[str, Any]]:
    """cProfile of an embedded bulk load: where time goes beyond putmulti."""
    from simhash_hbase import SimhashIndex

    path = work / "ingest-profile"
    shutil.rmtree(path, ignore_errors=True)
    pairs = _pairs(fps, 0, n, "p")
    profiler = cProfile.Profile()
    with SimhashIndex.open(str(path), batch_size=batch) as index:
        profiler.enable()
        index.add_fingerprints(pairs, find_k=None)
        profiler.disable()
    shutil.rmtree(path, ignore_errors=True)
    return top_functions(profiler, 12)


def run_embedded(plan: Plan, fps: np.ndarray, work: Path) -> dict[str, Any]:
    log(f"embedded ingest: {plan.ingest_docs:,} docs vs raw LMDB putmulti")
    out: dict[str, Any] = {
        "find_none": embedded_pair(fps, plan.ingest_docs, 1000, None, work, "none"),
        "find_k3": embedded_pair(fps, plan.ingest_find_docs, 1000, K, work, "k3"),
    }
    log(
        f"embedded ingest {out['find_none']['shdb_docs_per_s']:,.0f} docs/s = "
        f"{out['find_none']['ratio']:.0%} of raw; with find_k=3 {out['find_k3']['ratio']:.0%}"
    )
    sweep = []
    for b in plan.batch_sizes:
        sweep.append(embedded_pair(fps, plan.batch_docs, b, None, work, f"b{b}"))
        log(f"  batch {b}: {sweep[-1]['shdb_docs_per_s']:,.0f} docs/s ({sweep[-1]['ratio']:.0%})")
    out["batch_sweep"] = sweep
    out["profile"] = profile_embedded(fps, min(plan.ingest_docs, 100_000), 1000, work)
    return out


# -- HBase ----------------------------------------------------------------------
def _hbase_raw_writer(conn: Any, prefix: str, index: Any, batch: Pairs) -> Callable[[], None]:
    """happybase batches with the very rows shdb writes; only send() is timed."""
    from simhash_hbase import codec
    from simhash_hbase.records import Document

    docs = [Document(doc_id, fp) for doc_id, fp in batch]
    index_batch = conn.table(f"{prefix}_index").batch()
    for row, doc_id in index.cells(docs):
        index_batch.put(row, {b"d:" + doc_id.encode(): b""})
    docs_batch = conn.table(f"{prefix}_docs").batch()
    for doc in docs:
        docs_batch.put(doc.doc_id.encode(), {b"f:h": codec.fingerprint_to_bytes(doc.fingerprint)})

    def write() -> None:
        index_batch.send()
        docs_batch.send()

    return write


def hbase_pair(
    fps: np.ndarray, n: int, batch: int, find_k: int | None, hbase: Any, tag: str
) -> dict[str, Any]:
    """shdb HBase add_fingerprints vs raw mutateRows of the same rows, interleaved."""
    from simhash_hbase import SimhashIndex

    conn = hbase.connection()
    shdb_prefix, raw_prefix = f"ing_{tag}_shdb", f"ing_{tag}_raw"
    try:
        # The raw tables are created by shdb too, so both sides write the same schema.
        SimhashIndex.open(f"{hbase.url_base}?prefix={raw_prefix}").close()
        with SimhashIndex.open(f"{hbase.url_base}?prefix={shdb_prefix}", batch_size=batch) as ix:
            spent = _time_calls(
                {
                    "lookups": (ix, "_find_at_insert"),
                    "docs-table reads": (ix.store, "get_docs"),
                    "writes (mutateRowsTs)": (ix.store, "_mutate"),
                }
            )
            totals = _alternate(
                _batches(fps, n, batch, "h"),
                lambda b: ix.add_fingerprints(b, find_k=find_k),
                lambda b: _hbase_raw_writer(conn, raw_prefix, ix, b),
            )
        for prefix in (shdb_prefix, raw_prefix):  # keep the instance light for what follows
            for table in ("index", "docs", "meta"):
                conn.delete_table(f"{prefix}_{table}", disable=True)
    finally:
        conn.close()
    out = _rates(totals, n)
    out.update(batch_size=batch, find_k=find_k, shares=_split(spent, totals["shdb"]))
    return out


def run_hbase(plan: Plan, fps: np.ndarray, hbase: Any) -> dict[str, Any]:
    log(f"hbase ingest: {plan.hbase_ingest_docs:,} docs vs raw mutateRows")
    out: dict[str, Any] = {
        "find_none": hbase_pair(fps, plan.hbase_ingest_docs, 1000, None, hbase, "none"),
        "find_k3": hbase_pair(fps, plan.hbase_ingest_find_docs, 1000, K, hbase, "k3"),
    }
    log(
        f"hbase ingest {out['find_none']['shdb_docs_per_s']:,.0f} docs/s = "
        f"{out['find_none']['ratio']:.0%} of raw; with find_k=3 {out['find_k3']['ratio']:.0%}"
    )
    sweep = []
    for b in plan.hbase_batch_sizes:
        sweep.append(hbase_pair(fps, plan.hbase_batch_docs, b, None, hbase, f"b{b}"))
        log(f"  batch {b}: {sweep[-1]['shdb_docs_per_s']:,.0f} docs/s ({sweep[-1]['ratio']:.0%})")
    out["batch_sweep"] = sweep
    return out


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
    while proc.poll() is None:
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
        "peak_rss_mib": peak.get("VmHWM", 0) / 1024,
        "peak_anon_mib": peak.get("RssAnon", 0) / 1024,
        "peak_file_mib": peak.get("RssFile", 0) / 1024,
        "written_bytes": written,
        "stderr_tail": stderr.strip().splitlines()[-1:] if stderr.strip() else [],
    }


def run_rss(plan: Plan, fps: np.ndarray, work: Path) -> list[dict[str, Any]]:
    """`shdb ingest --fingerprints FILE` (embedded, k=3 as by default) at two sizes."""
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
        result["index_bytes"] = (index / "data.mdb").stat().st_size
        out.append(result)
        log(
            f"shdb ingest --fingerprints {lines:,} lines: {result['seconds']:.0f} s, peak RSS "
            f"{result['peak_rss_mib']:.0f} MiB (anon {result['peak_anon_mib']:.0f}, "
            f"file {result['peak_file_mib']:.0f})"
        )
        shutil.rmtree(index, ignore_errors=True)
        tsv.unlink()
    return out
