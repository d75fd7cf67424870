"""`shdb plan`: which scheme, and what it costs, for an expected number of documents.

A capacity model, not a measurement: candidates per query from the scheme's key
widths (random fingerprints; real ones cluster, so treat it as a floor), bytes
from the per-row costs this project measured (sources in :data:`ROW_COSTS` and
docs/scale.md), HBase regions from a target region size. ``benchmarks/schemes.py``
checks the candidate figures against counted ones from 1 M to 100 M.

In the layout layer because the HBase store sizes the tables it creates from it
(``hbase://...?expect=N``: docs/hbase.md, "Regions and split points").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simhash_hbase.errors import InvalidSetting
from simhash_hbase.layout.scheme import FIELD_BITS, SCHEMES, Scheme

#: LSH bands of a document ingested from its text (docs/SPEC.md, "Nets").
BANDS = 25
#: Bytes of the docs row's sketch (64) and band keys (25 x 4) of a text document.
TEXT_DOCS_BYTES = 64 + 4 * BANDS


@dataclass(frozen=True)
class RowCosts:
    """Measured bytes on disk: a fixed share a document (its docs row, with an id
    of ``id_bytes``), one index row (cell), and a byte of a longer id."""

    per_document: float
    per_row: float
    id_bytes: int
    per_id_byte: float
    source: str


ROW_COSTS: dict[str, RowCosts] = {
    # 1 M random fingerprints bulk loaded (ids d0..d999999): 5x10 180.7 B/doc, 6x20
    # 286.1 B/doc (10 more rows: 10.5 B a row), format 4 data.mdb (docs/scale.md).
    "embedded": RowCosts(75.5, 10.54, 7, 2.0, "data.mdb after a bulk load, 1 M documents"),
    # benchmarks/storage.py, 1 M fingerprints, major-compacted with the schema's
    # FAST_DIFF and blooms: 5x10 index 187 B/doc (18.7 B a row), docs 15 B/doc.
    "hbase": RowCosts(15.0, 18.7, 7, 1.0, "HBase HFiles after a major compaction, 1 M documents"),
}

#: A query's pigeonhole candidates are read and compared in the same call as its
#: rows; past ~60 their cells, not the round trip, set the latency: a 4x4 query at
#: 1 M (61 candidates) cost 1.78x a get on HBase, 5x10's (0.2) 1.30x (docs/scale.md).
DEFAULT_MAX_CANDIDATES = 60.0

#: HBase splits a region past ``hbase.hregion.max.filesize`` (10 GiB by default);
#: planning at half of it leaves room to grow before the first split storm.
REGION_BYTES = 5 * 2**30


@dataclass(frozen=True)
class SchemePlan:
    """One scheme's predicted costs at ``documents``."""

    scheme: str
    k: int
    documents: int
    candidates_per_query: float
    band_candidates_per_query: float
    rows_per_document: int
    bytes_per_document: float
    index_bytes: float
    #: HBase regions of the index table (index rows) and of the docs table, at
    #: :data:`REGION_BYTES` each; the meta table is one region at any size.
    index_regions: int
    docs_regions: int
    split_points: tuple[str, ...]
    round_trips: int
    rows_read: int

    def fits(self, max_candidates: float | None, max_bytes_per_document: float | None) -> bool:
        return (max_candidates is None or self.candidates_per_query <= max_candidates) and (
            max_bytes_per_document is None or self.bytes_per_document <= max_bytes_per_document
        )


def collision_rate(scheme: Scheme) -> float:
    """The chance that two random fingerprints share some row key of ``scheme``:
    sum over its combinations of 2^-(key bits), a key holding at most 32 bits."""
    return sum(2.0 ** -min(sum(scheme.widths[i] for i in c), FIELD_BITS) for c in scheme.combos)


def index_split_keys(regions: int) -> list[bytes]:
    """Even split keys of the index table (4 bytes each): its keys start with a
    left-aligned segment field, uniform over the first bytes (docs/SPEC.md)."""
    return [((i << FIELD_BITS) // regions).to_bytes(4, "big") for i in range(1, regions)]


def split_points(regions: int) -> tuple[str, ...]:
    """:func:`index_split_keys` as hex, as `shdb plan --splits` prints them."""
    return tuple(key.hex() for key in index_split_keys(regions))


def docs_split_keys(sample: Iterable[bytes], regions: int) -> list[bytes]:
    """Split keys of the docs table from a sample of its row keys (document ids):
    the sample's quantiles, so each region gets an equal share of the sampled ids.
    Ids are user strings (URLs share ``https://``), so nothing else places them;
    fewer distinct ids than regions give fewer splits."""
    keys = sorted(set(sample))
    if regions < 2 or len(keys) < 2:
        return []
    cuts = {keys[(i * len(keys)) // regions] for i in range(1, regions)}
    return sorted(cuts - {keys[0]})


def regions_for(total_bytes: float) -> int:
    """Regions of :data:`REGION_BYTES` that hold ``total_bytes``."""
    return max(1, math.ceil(total_bytes / REGION_BYTES))


def plan_scheme(
    scheme: Scheme, documents: int, k: int, *, store: str = "hbase", texts: bool = True,
    id_bytes: int = 40, index_floor: int = 1,
) -> SchemePlan:  # fmt: skip
    """The predicted costs of ``scheme`` for ``documents`` (``texts``: with the LSH
    net's 25 band rows and the docs row's sketch; ``id_bytes``: a typical id;
    ``index_floor``: the fewest index regions a new HBase index gets, the schema's
    presplit, so that the plan prints the regions and splits ``?expect=`` makes)."""
    scheme.check_k(k)
    costs = ROW_COSTS[store]
    rows = scheme.rows_per_fingerprint + (BANDS if texts else 0)
    per_doc = (
        costs.per_document
        + costs.per_row * rows
        + costs.per_id_byte * max(id_bytes - costs.id_bytes, 0)
        + (TEXT_DOCS_BYTES if texts else 0)
    )
    others = max(documents - 1, 0)
    total = per_doc * documents
    index_rows = costs.per_row * rows * documents
    hbase = store == "hbase"
    index_regions = max(regions_for(index_rows), index_floor) if hbase else 1
    return SchemePlan(
        scheme=scheme.name,
        k=k,
        documents=documents,
        candidates_per_query=others * collision_rate(scheme),
        # Band keys are 32-bit hashes of 5 MinHash values: unrelated documents
        # share one by chance only, whatever the scheme.
        band_candidates_per_query=others * BANDS * 2.0**-FIELD_BITS if texts else 0.0,
        rows_per_document=rows,
        bytes_per_document=per_doc,
        index_bytes=total,
        index_regions=index_regions,
        docs_regions=regions_for(total - index_rows) if hbase else 1,
        split_points=split_points(index_regions),
        # HBase: one multi-row get of every prefix, read by the observer; embedded:
        # one B+tree seek a prefix, no round trip.
        round_trips=1 if store == "hbase" else 0,
        rows_read=rows,
    )


def plan(
    documents: int,
    k: int = 3,
    *,
    store: str = "hbase",
    texts: bool = True,
    id_bytes: int = 40,
    max_candidates: float | None = DEFAULT_MAX_CANDIDATES,
    max_bytes_per_document: float | None = None,
    index_floor: int = 1,
) -> tuple[list[SchemePlan], SchemePlan | None]:
    """Every scheme exact for ``k``, and the recommended one: the fewest bytes a
    document among those within both budgets (None: no scheme is). The latency
    budget counts the pigeonhole's candidates, the part a scheme decides."""
    if documents < 1:
        raise InvalidSetting("documents", f"expected a positive count, got {documents}")
    if store not in ROW_COSTS:
        raise InvalidSetting("store", f"unknown store {store!r}; one of {', '.join(ROW_COSTS)}")
    plans = [
        plan_scheme(
            s, documents, k, store=store, texts=texts, id_bytes=id_bytes, index_floor=index_floor
        )
        for s in SCHEMES.values()
        if k <= s.k
    ]
    if not plans:
        most = max(s.k for s in SCHEMES.values())
        raise InvalidSetting("k", f"no scheme is exact for k={k}; the largest is k={most}")
    fitting = [p for p in plans if p.fits(max_candidates, max_bytes_per_document)]
    best = min(fitting, key=lambda p: (p.bytes_per_document, p.candidates_per_query), default=None)
    return plans, best


def parse_count(text: str) -> int:
    """``10B``, ``500M``, ``2.5k`` or ``1000000`` as an integer."""
    units = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
    raw = text.strip().replace("_", "").replace(",", "")
    scale = units.get(raw[-1:].lower(), 1)
    number = raw[:-1] if scale != 1 else raw
    try:
        value = float(number) * scale
    except ValueError:
        raise InvalidSetting(
            "documents", f"expected a count such as 10B, 500M or 1000000, got {text!r}"
        ) from None
    if not math.isfinite(value) or value < 1:
        raise InvalidSetting("documents", f"expected a positive count, got {text!r}")
    return int(value)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def table_rows(plans: Sequence[SchemePlan]) -> list[tuple[str, ...]]:
    """The table `shdb plan` prints, one row a scheme."""
    return [
        (
            p.scheme,
            f"{p.candidates_per_query:,.1f}",
            f"{p.band_candidates_per_query:,.1f}",
            str(p.rows_per_document),
            f"{p.bytes_per_document:,.0f}",
            human_bytes(p.index_bytes),
            f"{p.index_regions} + {p.docs_regions}",
            f"{p.round_trips} / {p.rows_read}",
        )
        for p in plans
    ]
