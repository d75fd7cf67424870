"""`shdb plan`: the scheme and the capacity for an expected number of documents."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Annotated

import typer

from simhash_hbase.cli.options import JsonOpt, KOpt
from simhash_hbase.cli.render import echo_json, note, table
from simhash_hbase.layout.plan import (
    DEFAULT_MAX_CANDIDATES,
    ROW_COSTS,
    parse_count,
    plan,
    table_rows,
)


class StoreKind(str, Enum):
    hbase = "hbase"
    embedded = "embedded"


DocumentsArg = Annotated[
    str, typer.Argument(metavar="DOCUMENTS", help="Expected documents: 10B, 500M, 2.5k or 1000000.")
]
StoreOpt = Annotated[StoreKind, typer.Option(help="Where the index lives.")]
FingerprintsOpt = Annotated[
    bool,
    typer.Option(
        "--fingerprints", metavar="", help="Documents added by fingerprint (no sketch, no bands)."
    ),
]
IdBytesOpt = Annotated[int, typer.Option(metavar="N", help="A typical id's length in bytes.")]
MaxCandidatesOpt = Annotated[
    float, typer.Option(metavar="N", help="Latency budget: pigeonhole candidates a query.")
]
MaxBytesOpt = Annotated[
    float | None,
    typer.Option("--max-bytes", metavar="N", help="Storage budget: at most N bytes a document."),
]
SplitsOpt = Annotated[
    bool, typer.Option("--splits", metavar="", help="Print the recommended scheme's split points.")
]


def plan_cmd(
    documents: DocumentsArg,
    k: KOpt = 3,
    store: StoreOpt = StoreKind.hbase,
    fingerprints: FingerprintsOpt = False,
    id_bytes: IdBytesOpt = 40,
    max_candidates: MaxCandidatesOpt = DEFAULT_MAX_CANDIDATES,
    max_bytes: MaxBytesOpt = None,
    splits: SplitsOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Predict each scheme's candidates a query, rows and bytes a document, index size
    and HBase regions, and recommend one (docs/scale.md). Exit 1 if none fits the budget."""
    from simhash_hbase.store.hbase.tables import presplit_regions  # the schema, no extra

    n = parse_count(documents)
    plans, best = plan(
        n, k, store=store.value, texts=not fingerprints, id_bytes=id_bytes,
        max_candidates=max_candidates, max_bytes_per_document=max_bytes,
        index_floor=presplit_regions("index"),
    )  # fmt: skip
    if as_json:
        echo_json(
            {
                "documents": n,
                "plans": [dataclasses.asdict(p) for p in plans],
                "recommended": best.scheme if best else None,
            }
        )
    else:
        header = ("scheme", "candidates/query", "band candidates", "rows/doc", "bytes/doc",
                  "index size", "regions (index + docs)", "round trips / rows read")  # fmt: skip
        table(header, table_rows(plans))
        if splits and best is not None:
            for key in best.split_points:
                typer.echo(key)
        note(
            f"{n:,} documents, k={k}, {store.value}: bytes from {ROW_COSTS[store.value].source}; "
            "candidates for random fingerprints (real ones cluster: a floor)"
        )
        note(
            f"recommended: --scheme {best.scheme}"
            if best
            else "no scheme fits the budget: raise --max-candidates or --max-bytes"
        )
    if best is None:
        raise typer.Exit(1)
