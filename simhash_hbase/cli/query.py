"""Reading an index: `shdb query`, `fingerprint`, `get` and `stats`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from simhash_hbase.cli.options import (
    IdsArg,
    IndexOpt,
    JsonOpt,
    KOpt,
    LimitOpt,
    QueryProbesOpt,
    SampleOpt,
    ScanWorkersOpt,
    SimilarityOpt,
    TextInput,
    fingerprint_settings,
    text_input,
    uses,
    window_options,
)
from simhash_hbase.cli.render import (
    EXIT_NO_MATCH,
    echo_json,
    note,
    predicate,
    print_missing,
    region_progress,
    stats_report,
    table,
)
from simhash_hbase.errors import InvalidInput
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams
from simhash_hbase.index.client import DEFAULT_K, SimhashIndex
from simhash_hbase.jobs.census import count
from simhash_hbase.layout.window import Window
from simhash_hbase.records import (
    DEFAULT_LIMIT,
    Match,
    Matches,
    check_limit,
    fingerprint_to_hex,
    parse_fingerprint_hex,
    time_to_text,
)

FingerprintOpt = Annotated[
    str | None,
    typer.Option(metavar="HEX", help="Look up a 64-bit hex fingerprint instead of text."),
]
TermsOpt = Annotated[bool, typer.Option(metavar="", help="Also print the weighted terms used.")]


@uses(given=text_input, wanted=fingerprint_settings, window=window_options)
def query_cmd(
    *,
    given: TextInput,
    wanted: dict[str, Any],
    window: Window | None,
    fingerprint: FingerprintOpt = None,
    k: KOpt = DEFAULT_K,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    probes: QueryProbesOpt = None,
    limit: LimitOpt = DEFAULT_LIMIT,
    similarity: SimilarityOpt = None,
) -> None:
    """Near-copies of TEXT (or --file, --fingerprint) held in the index, nearest
    first, at most --limit rows, and how many there are in all. The table's columns:
    distance (how many of the 64 fingerprint bits differ), similarity (the share of
    the texts' character 5-grams they have in common, estimated from their sketches,
    0 to 1; - for --fingerprint, which has no sketch), fingerprint and id (--json:
    {"matches": [...], "total", "total_exact"}); --within/--since/--until: only the
    documents that arrived in that window. Exit 1 if none."""
    if fingerprint is not None and given.given:
        raise InvalidInput("give exactly one of TEXT, --file or --fingerprint")
    check_limit(limit)
    if fingerprint is not None and probes:
        raise InvalidInput(
            "--fingerprint cannot be probed: which bits are weak comes from the text's "
            "term weights; query with TEXT or --file to use --probes"
        )
    query_fp = parse_fingerprint_hex(fingerprint) if fingerprint is not None else None
    probe = 0 if query_fp is not None else DEFAULT_QUERY_PROBES if probes is None else probes
    with SimhashIndex.open(index, readonly=True, params=wanted, similarity=similarity) as ix:
        seen = ix.within(window)
        if query_fp is not None:
            matches = seen.query_fingerprint(query_fp, k, limit=limit)
        else:
            matches = seen.query(given.read(ix.params.html), k, probes=probe, limit=limit)
    _print_matches(matches, predicate(k, ix.lsh if query_fp is None else None, probe), as_json)
    if not matches:
        raise typer.Exit(EXIT_NO_MATCH)


def _print_matches(matches: Matches, rule: str, as_json: bool) -> None:
    if as_json:
        echo_json(matches.to_json())
    elif matches:
        table(("distance", "similarity", "fingerprint", "id"), (_row(m) for m in matches))
        more = "" if matches.total_exact else ">= "
        note(f"{len(matches)} shown of {more}{matches.total} matches ({rule})")
    else:
        note(f"no match ({rule})")


def _row(m: Match) -> tuple[object, ...]:
    similarity = "-" if m.similarity is None else m.similarity
    return (m.distance, similarity, fingerprint_to_hex(m.fingerprint), m.doc_id)


@uses(given=text_input, wanted=fingerprint_settings)
def fingerprint_cmd(
    *,
    given: TextInput,
    terms: TermsOpt = False,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    wanted: dict[str, Any],
) -> None:
    """The 64-bit SimHash of TEXT (or --file) as 16 hex digits, made as the index
    (-i) or the options say (default: a new index's settings)."""
    if index is not None:
        with SimhashIndex.open(index, readonly=True, params=wanted) as ix:
            fp = ix.fingerprinter
    else:
        fp = Fingerprinter(FingerprintParams(**wanted))
    body = given.read(fp.params.html)
    value = fingerprint_to_hex(fp.fingerprint(body))
    weighted = fp.weighted_terms(body) if terms else []
    if as_json:
        row: dict[str, Any] = {"fingerprint": value}
        if terms:
            row["terms"] = [{"term": t, "weight": round(w, 6)} for t, w in weighted]
        echo_json(row)
        return
    typer.echo(value)
    if terms:
        table(("weight", "term"), ((f"{w:.3f}", t) for t, w in weighted))


def stats_cmd(
    index: IndexOpt = None,
    workers: ScanWorkersOpt = 1,
    sample: SampleOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Documents, index cells, disk use and the settings of an index. With --workers
    or --sample, documents and cells are counted region by region (docs/hbase.md)."""
    regions = workers != 1 or sample is not None  # --workers 0 too: count() refuses it
    with SimhashIndex.open(index, readonly=True) as ix:
        stats = ix.stats(counts=not regions)
        if regions:
            counts = count(
                ix,
                workers=workers,
                sample=sample,
                progress=None if as_json else region_progress,  # --json: no chatter
            )
            by = (
                "a sample of key ranges, extrapolated (shdb stats --sample)"
                if sample
                else ("region by region (shdb stats --workers)")
            )
            stats.update(counts.to_json(), counted_by=by)
    stats_report(stats, as_json)


def get_cmd(doc_ids: IdsArg, index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Stored documents by ID: a table of id, fingerprint, text, meta and when each
    arrived (--json: one JSON object per line). Exit 1 if an id is not held."""
    with SimhashIndex.open(index, readonly=True) as ix:
        found = ix.get_many(doc_ids)
    docs = [found[d] for d in doc_ids if d in found]
    if as_json:
        for doc in docs:
            echo_json(doc.to_json())
    elif docs:
        table(
            ("id", "fingerprint", "text", "meta", "time"),
            (
                (
                    d.doc_id,
                    fingerprint_to_hex(d.fingerprint),
                    json.dumps(d.text, ensure_ascii=False),
                    json.dumps(d.meta, ensure_ascii=False),
                    time_to_text(d.time) or "-",
                )
                for d in docs
            ),
        )
    missing = [d for d in doc_ids if d not in found]
    print_missing(missing)
    if missing:
        raise typer.Exit(EXIT_NO_MATCH)
