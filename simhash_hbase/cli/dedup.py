"""`shdb dedup`: all near-duplicate pairs of a corpus, in memory, no index."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from simhash_hbase.cli.options import (
    BatchSchemeOpt,
    ClustersOpt,
    FingerprintsOpt,
    JsonOpt,
    KOpt,
    LimitOpt,
    PathsArg,
    SimilarityOpt,
    WorkersOpt,
    fingerprint_settings,
    source_options,
    uses,
    window_options,
)
from simhash_hbase.cli.render import (
    EXIT_SKIPPED,
    dumps,
    excluded,
    note,
    open_output,
    predicate,
    print_skips,
    skip_json,
)
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.index.client import DEFAULT_K
from simhash_hbase.jobs.ingest import DedupResult, check_output, find_duplicates
from simhash_hbase.layout.pairs import clusters_of, nearest_earlier
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, get_scheme
from simhash_hbase.layout.window import Window
from simhash_hbase.records import DEFAULT_LIMIT, Match, Matches, check_limit
from simhash_hbase.text.readers import SourceOptions, check_paths

OutputOpt = Annotated[
    str, typer.Option("--output", "-o", metavar="FILE", help="FILE, or - for stdout.")
]


@uses(source=source_options, wanted=fingerprint_settings, window=window_options)
def dedup_cmd(
    paths: PathsArg,
    *,
    fingerprints: FingerprintsOpt = False,
    k: KOpt = DEFAULT_K,
    as_clusters: ClustersOpt = False,
    limit: LimitOpt = DEFAULT_LIMIT,
    output: OutputOpt = "-",
    source: SourceOptions,
    workers: WorkersOpt = 1,
    scheme: BatchSchemeOpt = DEFAULT_SCHEME,
    wanted: dict[str, Any],
    as_json: JsonOpt = False,
    similarity: SimilarityOpt = None,
    window: Window | None,
) -> None:
    """Near-duplicates within each PATH (file, folder, - for stdin), in memory, no
    index: one JSON line per input that has near-copies before it,
    {"id", "matches" (its --limit nearest earlier inputs), "total", "total_exact"}
    (--clusters: one JSON list of ids per cluster, its representative first). Texts
    are matched by both nets, as an index does (docs/nets.md). Memory: an id, a
    fingerprint and a sketch per input, whatever the number of copies; in a mass of
    near-identical texts each is judged against its nearest neighbours in input
    order, so its count may be a lower bound ("total_exact": false), while the
    clusters stay exact. --within/--since/--until (with --time-field): only the
    inputs whose time is in the window take part."""
    check_limit(limit)
    check_paths(paths, source)
    check_output("--output", output, paths)
    lsh = MinHashParams() if similarity is None else MinHashParams().at_similarity(similarity)
    result = find_duplicates(
        paths,
        source,
        k=k,
        scheme=get_scheme(scheme),
        params=FingerprintParams(**wanted),
        workers=workers,
        fingerprints=fingerprints,
        exclude=excluded(output),
        lsh=lsh,
        window=window,
    )
    copies = _write(result, output, None if as_clusters else limit)
    _summary(result, copies, predicate(k, None if fingerprints else lsh), as_json)
    if result.skipped:
        raise typer.Exit(EXIT_SKIPPED)


def _write(result: DedupResult, output: str, limit: int | None) -> int | None:
    """Each input's nearest earlier near-copies (or, without a limit, the clusters);
    the number of inputs that have any (None for clusters)."""
    ids, graph = result.ids, result.graph
    copies = 0
    with open_output(output) as out:
        if limit is None:
            for group in clusters_of(graph):
                out.write(dumps([ids[i] for i in group]) + "\n")
            return None
        for found in nearest_earlier(graph, ids, limit):
            copies += 1
            near = (
                Match(ids[i], int(graph.unique[graph.inverse[i]]), d, s) for i, d, s in found.near
            )
            matches = Matches(near, found.total, found.exact)
            out.write(dumps({"id": ids[found.j], **matches.to_json()}) + "\n")
    return copies


def _summary(result: DedupResult, copies: int | None, rule: str, as_json: bool) -> None:
    pairs = result.graph.pair_count()
    exact = result.graph.exact()
    if as_json:
        summary: dict[str, Any] = {"inputs": len(result.ids), "pairs": pairs}
        if result.outside:
            summary["outside"] = result.outside
        summary["pairs_exact"] = exact
        summary["skipped"] = [skip_json(b) for b in result.skipped]
        if copies is not None:
            summary["with_near_copies"] = copies
        note(dumps(summary))
        return
    listed = "" if copies is None else f", {copies} of them with earlier near-copies"
    if result.outside:
        listed += f" ({result.outside} more outside the window, left out)"
    note(
        f"{len(result.ids)} inputs{listed}, {'' if exact else 'at least '}{pairs} "
        f"near-duplicate pairs ({rule}), "
        f"skipped {len(result.skipped)}"
    )
    print_skips(result.skipped)
