"""Near-duplicates of a corpus on Spark, by both nets, as `shdb dedup` finds them.

The same graph as :func:`simhash_hbase.jobs.ingest.find_duplicates`, and the same
bounded answer (:func:`simhash_hbase.layout.pairs.nearest_earlier`):

1. **Nodes.** Documents with equal fingerprint, sketch and band keys are one node
   (one shuffle, keyed by fingerprint); its ``rep`` is its first input position.
   A million copies of a login wall are one node: no step below sees them apart.
2. **Candidates, as NumPy blocks.** Each task cuts its nodes' keys into
   ``buckets`` arrays by a hash of the key, and a bucket's arrays meet in one
   task: a shuffle of a few records per task, never a Python object per key.
   - Pigeonhole: the key is the index's scan prefix (combination field, flag);
     rows with equal keys within k are pairs, each kept in the first combination
     the two share (:func:`~simhash_hbase.layout.pairs.pairs_in_groups`).
   - LSH: the key is (band, band key); rows sharing one are candidate pairs, and
     so are rows sharing a pigeonhole key at any distance (the index's
     candidates, docs/nets.md: beyond k the similarity decides).
3. **Confirm.** Each candidate meets the fingerprint and sketch of its two nodes
   (two bucket joins) and is kept by :func:`~simhash_hbase.layout.nets.matches`:
   the edges (a, b, distance, similarity) of distinct nodes.
4. **Answers.** The edges come to the driver (24 bytes a near pair of distinct
   nodes; copies never make one). Clusters are their stars
   (:func:`~simhash_hbase.layout.pairs.stars`: every member matches the
   representative, the first input of its cluster); each
   node that has an edge or a copy gets its neighbours' summaries (positions, and
   the members that can be among the ``limit`` smallest ids) and sweeps its members
   in input order: each gets its ``limit`` nearest earlier documents and the count
   of all of them, the line `shdb dedup` prints.

Every candidate pair is judged: in a group of more than
:data:`~simhash_hbase.layout.groups.SMALL` + 1 nodes sharing a key, where `shdb
dedup` judges each node's nearest neighbours only (a lower-bound count), this job
counts exactly, in work quadratic in the group; clusters are the same.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.layout.nets import confirm, sketch_rows, sketches_of
from simhash_hbase.layout.pairs import pairs_in_groups, stars
from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.records import fingerprint_to_hex

if TYPE_CHECKING:
    from pyspark import RDD, Broadcast
    from pyspark.sql import DataFrame, SparkSession

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FLAG_BITS = 8
_BIG_GROUP = 64  # band-key groups larger than this are paired one by one

#: (position, id, fingerprint, sketch, band keys) of one input document.
Doc = tuple[int, str, int, bytes | None, bytes | None]
#: One document's answer: (position, id, [(id, distance, similarity, fp hex)], total).
Answer = tuple[int, str, list[tuple[str, int, float | None, str]], int]
Blob = tuple[np.ndarray, ...]


def spread(key: int) -> int:
    """A well-mixed hash of an integer shuffle key (Python's hash(int) is the int:
    keys sharing low bits would all land in one partition)."""
    return ((key * _GOLDEN) & _MASK64) >> 32


def _bucket(b: int) -> int:
    """Partition of a bucket number: itself (one bucket per partition)."""
    return b


def _by_fp(key: tuple[int, bytes | None, bytes | None]) -> int:
    return spread(key[0])


def _buckets_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    mixed = (keys.astype(np.uint64) * np.uint64(_GOLDEN)) >> np.uint64(32)
    return (mixed % np.uint64(buckets)).astype(np.int64)  # type: ignore[no-any-return]


def _split(where: np.ndarray, buckets: int, *cols: np.ndarray) -> Iterator[tuple[int, Blob]]:
    """(bucket, the rows of ``cols`` in it) for each bucket with rows."""
    order = np.argsort(where, kind="stable")
    bounds = np.searchsorted(where[order], np.arange(buckets + 1)).tolist()
    for b in range(buckets):
        if bounds[b + 1] > bounds[b]:
            rows = order[bounds[b] : bounds[b + 1]]
            yield b, tuple(c[rows] for c in cols)


def _joined(blobs: Iterable[Blob]) -> Blob:
    return tuple(np.concatenate(c) for c in zip(*blobs, strict=True))


@dataclass(frozen=True)
class Node:
    """Distinct (fingerprint, sketch, band keys) and its documents in input order."""

    rep: int
    fp: int
    sketch: bytes | None
    bands: bytes | None
    members: list[tuple[int, str]]


def _node(kv: tuple[tuple[int, bytes | None, bytes | None], Iterable[tuple[int, str]]]) -> Node:
    (fp, sketch, bands), members = kv
    ordered = sorted(members)
    return Node(ordered[0][0], fp, sketch, bands, ordered)


def block_keys(fps: np.ndarray, scheme: Scheme) -> np.ndarray:
    """(n, combos) block keys: field << 8 | flag, the integer of the 5-byte scan prefix."""
    fields = scheme.fields_many(fps).astype(np.uint64)
    flags = np.arange(1, len(scheme.combos) + 1, dtype=np.uint64)
    return (fields << np.uint64(_FLAG_BITS)) | flags  # type: ignore[no-any-return]


def _arrays(nodes: list[Node]) -> tuple[np.ndarray, np.ndarray]:
    fps = np.fromiter((n.fp for n in nodes), dtype=np.uint64, count=len(nodes))
    reps = np.fromiter((n.rep for n in nodes), dtype=np.int64, count=len(nodes))
    return fps, reps


def _block_rows(nodes: Iterable[Node], scheme: Scheme, buckets: int) -> Iterator[tuple[int, Blob]]:
    """Pigeonhole rows of a partition: (bucket, (block keys, fps, reps))."""
    batch = list(nodes)
    if batch:
        fps, reps = _arrays(batch)
        combos = len(scheme.combos)
        keys = block_keys(fps, scheme).ravel()
        rows = (keys, np.repeat(fps, combos), np.repeat(reps, combos))
        yield from _split(_buckets_of(keys, buckets), buckets, *rows)


def _block_pairs(part: Iterable[tuple[int, Blob]], scheme: Scheme, k: int) -> Iterator[Blob]:
    """(a, b, True) rep pairs within k of a bucket's blocks, each in its first block."""
    blobs = [blob for _, blob in part]
    if not blobs:
        return
    keys, fps, reps = _joined(blobs)
    flags = (keys & np.uint64(0xFF)).astype(np.int64)
    for flag in np.unique(flags).tolist():
        rows = np.flatnonzero(flags == flag)
        fields = scheme.fields_many(fps[rows])
        earlier = [fields[:, e] for e in range(flag - 1)]
        a, b, _ = pairs_in_groups(fps[rows], keys[rows], k, earlier)
        x, y = reps[rows][a], reps[rows][b]
        yield np.minimum(x, y), np.maximum(x, y), np.ones(len(x), dtype=bool)


def _band_rows(nodes: Iterable[Node], buckets: int) -> Iterator[tuple[int, Blob]]:
    """LSH rows of a partition's sketched nodes: (bucket, (band << 32 | key, reps))."""
    batch = [n for n in nodes if n.bands is not None and n.sketch is not None]
    if batch:
        _, reps = _arrays(batch)
        raw = b"".join(n.bands for n in batch)  # type: ignore[misc]
        keys = np.frombuffer(raw, dtype=">u4").reshape(len(batch), -1).astype(np.uint64)
        band = np.arange(keys.shape[1], dtype=np.uint64) << np.uint64(32)
        flat = (keys | band[None, :]).ravel()
        rows = (flat, np.repeat(reps, keys.shape[1]))
        yield from _split(_buckets_of(flat, buckets), buckets, *rows)


def _shared_pairs(part: Iterable[tuple[int, Blob]]) -> Iterator[Blob]:
    """(a, b, False) rep pairs sharing a key in a bucket: a band key, or with both
    nets a pigeonhole block key at any distance (the index's candidates: beyond k
    the similarity decides; the pigeonhole's verdict comes from its own pairs).
    Rows are (keys, ..., reps)."""
    blobs = [blob for _, blob in part]
    if not blobs:
        return
    cols = _joined(blobs)
    keys, reps = cols[0], cols[-1]
    order = np.argsort(keys, kind="stable")
    keys, reps = keys[order], reps[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.r_[starts, len(keys)])
    big = sizes > _BIG_GROUP
    found: list[tuple[np.ndarray, np.ndarray]] = []
    for start, size in zip(starts[big].tolist(), sizes[big].tolist()):
        i, j = np.triu_indices(size, 1)
        found.append((reps[start + i], reps[start + j]))
    small = np.repeat(~big, sizes)
    keys, reps = keys[small], reps[small]
    for offset in range(1, _BIG_GROUP):
        same = np.flatnonzero(keys[offset:] == keys[:-offset])
        if not same.size:
            break
        found.append((reps[same], reps[same + offset]))
    for x, y in found:
        yield np.minimum(x, y), np.maximum(x, y), np.zeros(len(x), dtype=bool)


def _table_rows(
    nodes: Iterable[Node], buckets: int, lsh: MinHashParams
) -> Iterator[tuple[int, Blob]]:
    """What the confirm reads of each node: (bucket, (reps, fps, sketches, has))."""
    batch = list(nodes)
    if batch:
        fps, reps = _arrays(batch)
        sketches, has = sketch_rows([n.sketch for n in batch], lsh)
        yield from _split(_buckets_of(reps, buckets), buckets, reps, fps, sketches, has)


def _by_first(blob: Blob, buckets: int) -> Iterator[tuple[int, Blob]]:
    return _split(_buckets_of(blob[0], buckets), buckets, *blob)


def _tagged(rows: Iterable[tuple[int, Blob]], tag: int) -> Iterator[tuple[int, tuple[int, Blob]]]:
    for b, blob in rows:
        yield b, (tag, blob)


def _lookup(part: Iterable[tuple[int, tuple[int, Blob]]]) -> tuple[Blob | None, Blob | None]:
    """A bucket's (candidate pairs, node table) from the tagged union."""
    pairs: list[Blob] = []
    table: list[Blob] = []
    for _, (tag, blob) in part:
        (pairs if tag == 0 else table).append(blob)
    return (_joined(pairs) if pairs else None), (_joined(table) if table else None)


def _rows_of(table: Blob, reps: np.ndarray) -> np.ndarray:
    order = np.argsort(table[0])
    return order[np.searchsorted(table[0], reps, sorter=order)]  # type: ignore[no-any-return]


def _first_side(part: Iterable[tuple[int, tuple[int, Blob]]], buckets: int) -> Iterator[Any]:
    """Distinct candidates of a bucket with their first node's fp and sketch, sent on
    to the second node's bucket."""
    pairs, table = _lookup(part)
    if pairs is None or table is None:
        return
    a, b, near = pairs
    both = np.stack([a, b], axis=1)
    uniq, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    found = np.zeros(len(uniq), dtype=bool)
    np.logical_or.at(found, inverse, near)
    at = _rows_of(table, uniq[:, 0])
    cols = (uniq[:, 0], uniq[:, 1], found, table[1][at], table[2][at], table[3][at])
    yield from _split(_buckets_of(uniq[:, 1], buckets), buckets, *cols)


def _confirm(
    part: Iterable[tuple[int, tuple[int, Blob]]], lsh: MinHashParams | None
) -> Iterator[Blob]:
    """The edges of a bucket: candidates that pass :func:`matches`, as
    (a, b, distance, similarity (NaN: none))."""
    pairs, table = _lookup(part)
    if pairs is None or table is None:
        return
    a, b, near, fp_a, sk_a, has_a = pairs
    near = near.reshape(-1)
    at = _rows_of(table, b)
    dist = np.bitwise_count(fp_a ^ table[1][at]).astype(np.int64)
    if lsh is None:
        keep, sims = near, np.full(len(a), np.nan)
    else:
        rows = sketches_of(np.concatenate([sk_a, table[2][at]]), lsh)
        first, second = np.arange(len(a)), np.arange(len(a)) + len(a)
        keep, sims = confirm(near, has_a & table[3][at], rows, first, second, lsh)
    yield a[keep], b[keep], dist[keep], sims[keep]


@dataclass(frozen=True)
class Near:
    """What a node tells a neighbour: its fingerprint, its members' positions, and
    the members that were among the ``limit`` smallest ids up to their position
    (no other member can ever be among a later document's nearest)."""

    fp: int
    positions: np.ndarray
    smallest: list[tuple[int, str]]


def _summary(node: Node, limit: int) -> Near:
    kept: list[tuple[int, str]] = []
    top: list[tuple[str, int]] = []
    for pos, doc_id in node.members:
        if len(top) < limit or (doc_id, pos) < top[-1]:
            kept.append((pos, doc_id))
            bisect.insort(top, (doc_id, pos))
            del top[limit:]
    positions = np.fromiter((p for p, _ in node.members), dtype=np.int64)
    return Near(node.fp, positions, kept)


@dataclass(frozen=True)
class Graph:
    """The edges of distinct nodes (on the driver), sorted by each end in turn."""

    a: np.ndarray
    b: np.ndarray
    dist: np.ndarray
    sim: np.ndarray

    def touched(self) -> np.ndarray:
        return np.unique(np.concatenate([self.a, self.b]))

    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        """(nodes with an edge, sorted; the rep of each one's representative):
        :func:`~simhash_hbase.layout.pairs.stars`, as `shdb dedup --clusters`."""
        nodes = self.touched()
        a, b = np.searchsorted(nodes, self.a), np.searchsorted(nodes, self.b)
        return nodes, nodes[stars(nodes, np.stack([a, b, self.dist]), self.sim)]

    def neighbours(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ends, others, distances, similarities), both directions, sorted by end."""
        ends = np.concatenate([self.a, self.b])
        order = np.argsort(ends, kind="stable")
        others = np.concatenate([self.b, self.a])[order]
        dist = np.concatenate([self.dist, self.dist])[order]
        return ends[order], others, dist, np.concatenate([self.sim, self.sim])[order]


def _messages(nodes: Iterable[Node], graph: Broadcast[Any], limit: int) -> Iterator[Any]:
    """Each node that has an edge or a copy, keyed by its rep; and its summary,
    sent to each neighbour with the edge's distance and similarity."""
    ends, others, dist, sims = graph.value
    batch = list(nodes)
    _, reps = _arrays(batch)
    los = np.searchsorted(ends, reps).tolist()
    his = np.searchsorted(ends, reps, side="right").tolist()
    for node, lo, hi in zip(batch, los, his):
        if hi == lo and len(node.members) < 2:
            continue
        yield node.rep, (0, node)
        if hi > lo:
            near = _summary(node, limit)
            for other, d, s in zip(
                others[lo:hi].tolist(), dist[lo:hi].tolist(), sims[lo:hi].tolist()
            ):
                yield other, (1, (d, None if s != s else s, near))


def _answers(part: Iterable[tuple[int, tuple[int, Any]]], limit: int) -> Iterator[Answer]:
    nodes: dict[int, Node] = {}
    heard: dict[int, list[tuple[int, float | None, Near]]] = {}
    for rep, (tag, value) in part:
        if tag == 0:
            nodes[rep] = value
        else:
            heard.setdefault(rep, []).append(value)
    for rep, node in nodes.items():
        yield from _sweep(node, heard.get(rep, []), limit)


def _hit_key(hit: tuple[int, str, int, float | None, int]) -> tuple[int, str, int]:
    return hit[0], hit[1], hit[2]


def _sweep(node: Node, heard: list[tuple[int, float | None, Near]], limit: int) -> Iterator[Answer]:
    """Each member's ``limit`` nearest earlier documents (distance, then id) and how
    many there are: its earlier copies, and each neighbour's earlier members."""
    same = 1.0 if node.sketch is not None else None
    own: list[tuple[str, int]] = []
    tops: list[list[tuple[str, int]]] = [[] for _ in heard]
    seen = [0] * len(heard)
    for copies, (pos, doc_id) in enumerate(node.members):
        total = copies
        hits = [(0, i, p, same, node.fp) for i, p in own]
        for n, (d, s, near) in enumerate(heard):
            while seen[n] < len(near.smallest) and near.smallest[seen[n]][0] < pos:
                p, i = near.smallest[seen[n]]
                bisect.insort(tops[n], (i, p))
                del tops[n][limit:]
                seen[n] += 1
            total += int(np.searchsorted(near.positions, pos))
            hits += [(d, i, p, s, near.fp) for i, p in tops[n]]
        if total:
            best = heapq.nsmallest(limit, hits, key=_hit_key)
            found = [(i, d, s, fingerprint_to_hex(fp)) for d, i, _, s, fp in best]
            yield pos, doc_id, found, total
        bisect.insort(own, (doc_id, pos))
        del own[limit:]


def _cluster_rows(nodes: Iterable[Node], labels: Broadcast[Any]) -> Iterator[tuple[int, int, str]]:
    """(cluster label, position, id) of each document in a cluster of two or more."""
    touched, label = labels.value
    batch = list(nodes)
    _, reps = _arrays(batch)
    at = np.minimum(np.searchsorted(touched, reps), max(len(touched) - 1, 0))
    found = (touched[at] == reps) if len(touched) else np.zeros(len(reps), dtype=bool)
    owns = np.where(found, label[at] if len(touched) else reps, reps).tolist()
    for node, has, own in zip(batch, found.tolist(), owns):
        if not has and len(node.members) < 2:
            continue
        for pos, doc_id in node.members:
            yield own, pos, doc_id


@dataclass
class DedupJob:
    """Parameters of one run; ``partitions`` None uses Spark's default parallelism."""

    scheme: Scheme
    k: int
    lsh: MinHashParams | None = None
    limit: int = 10
    partitions: int | None = None

    def _parts(self, rdd: RDD[Any]) -> int:
        return self.partitions or rdd.context.defaultParallelism

    def nodes(self, docs: RDD[Doc]) -> RDD[Node]:
        """Documents grouped into nodes (one shuffle, by fingerprint)."""
        return (
            docs.map(lambda d: ((d[2], d[3], d[4]), (d[0], d[1])))
            .groupByKey(self._parts(docs), partitionFunc=_by_fp)
            .map(_node)
        )

    def edges(self, nodes: RDD[Node]) -> Graph:
        """The confirmed edges of distinct nodes, by both nets, on the driver."""
        scheme, k, lsh, buckets = self.scheme, self.k, self.lsh, self._parts(nodes) * 2
        blocks = nodes.mapPartitions(lambda ns: _block_rows(ns, scheme, buckets))
        placed = blocks.partitionBy(buckets, _bucket)
        cands = placed.mapPartitions(lambda part: _block_pairs(part, scheme, k))
        if lsh is not None:
            bands = nodes.mapPartitions(lambda ns: _band_rows(ns, buckets))
            cands = cands.union(placed.mapPartitions(_shared_pairs))
            cands = cands.union(bands.partitionBy(buckets, _bucket).mapPartitions(_shared_pairs))
        shape = lsh or MinHashParams(evidence=0)  # without the LSH net: no sketch
        table = nodes.mapPartitions(lambda ns: _table_rows(ns, buckets, shape))
        table.persist()
        keyed = cands.flatMap(lambda blob: _tagged(_by_first(blob, buckets), 0))
        tagged = table.mapPartitions(lambda rows: _tagged(rows, 1))
        first = keyed.union(tagged).partitionBy(buckets, _bucket)
        second = first.mapPartitions(lambda part: _tagged(_first_side(part, buckets), 0))
        confirmed = second.union(tagged).partitionBy(buckets, _bucket)
        found = confirmed.mapPartitions(lambda part: _confirm(part, lsh)).collect()
        table.unpersist()
        if not found:
            empty = np.zeros(0, dtype=np.int64)
            return Graph(empty, empty, empty, np.zeros(0))
        a, b, dist, sim = _joined(found)
        return Graph(a, b, dist, sim)

    def answers(self, nodes: RDD[Node], graph: Graph) -> RDD[Answer]:
        """Each document with earlier near-copies: its ``limit`` nearest and the count."""
        shared = nodes.context.broadcast(graph.neighbours())
        limit = self.limit
        messages = nodes.mapPartitions(lambda ns: _messages(ns, shared, limit))
        return messages.partitionBy(self._parts(nodes), spread).mapPartitions(
            lambda part: _answers(part, limit)
        )

    def cluster_rows(self, nodes: RDD[Node], graph: Graph) -> RDD[tuple[int, int, str]]:
        shared = nodes.context.broadcast(graph.labels())
        return nodes.mapPartitions(lambda ns: _cluster_rows(ns, shared))


@dataclass
class DedupResult:
    """DataFrames of the run (lazily computed until written), and the graph's size."""

    matches: DataFrame
    clusters: DataFrame | None
    edges: int
    documents: int


MATCHES_SCHEMA = (
    "pos long, id string, matches array<struct<id: string, distance: int, "
    "similarity: double, fingerprint: string>>, total long, total_exact boolean"
)


def run(
    spark: SparkSession, docs: RDD[Doc], job: DedupJob, *, with_clusters: bool = False
) -> DedupResult:
    """Each document's nearest earlier near-copies (and the clusters), in input
    order: the lines `shdb dedup` prints, as DataFrames."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    job.scheme.check_k(job.k)
    nodes = job.nodes(docs)
    nodes.persist(StorageLevel.MEMORY_AND_DISK)
    graph = job.edges(nodes)
    answers = job.answers(nodes, graph).map(lambda r: (*r, True))
    answers.persist(StorageLevel.MEMORY_AND_DISK)  # the sort samples it, then reads it
    matches = spark.createDataFrame(answers, MATCHES_SCHEMA).orderBy("pos").drop("pos")
    clusters = None
    if with_clusters:
        labels = spark.createDataFrame(
            job.cluster_rows(nodes, graph), "cluster long, pos long, id string"
        )
        clusters = (
            labels.groupBy("cluster")
            .agg(F.array_sort(F.collect_list(F.struct("pos", "id"))).alias("members"))
            .orderBy("cluster")
            .select(
                F.col("members")[0]["id"].alias("first"),
                F.size("members").alias("size"),
                F.col("members.id").alias("ids"),
            )
        )
    documents = nodes.map(lambda node: len(node.members)).sum()
    return DedupResult(matches, clusters, len(graph.a), documents)
