"""All near-duplicate pairs of a corpus on Spark: the pigeonhole as a shuffle.

The same scheme as the index and as :func:`simhash_hbase.layout.pairs.near_duplicate_pairs`,
which this job matches pair for pair:

1. **Exact duplicates first.** Records are grouped by fingerprint (one shuffle);
   each distinct fingerprint goes on with one representative (its first input
   position) and a count. Thousands of copies of a boilerplate page become one
   row, so they cannot make one block huge. Their own pairs (distance 0) are
   emitted from the group's position list, in tiles (step 4).
2. **Blocks.** Each distinct fingerprint is exploded into its (flag, field) block
   keys, one per segment combination (:meth:`Scheme.fields_many`; the key is the
   integer of the index's 5-byte scan prefix). Rows are shuffled by block key and
   each partition sorts its rows and compares, with NumPy, the members of each
   block. A block still larger than ``tile`` distinct fingerprints (planted near
   copies, adversarial input) is cut into chunks by a hash of the fingerprint;
   every chunk pair is its own group, so no group compares more than
   ``(2*tile)**2 / 2`` pairs and the work spreads over partitions.
3. **Each pair once.** Two fingerprints within k share several blocks; a pair
   is kept only in the first block (lowest flag) the two share, so no
   ``distinct`` shuffle is needed.
4. **Back to records.** A pair of distinct fingerprints stands for every pair of
   their records; products larger than ``tile**2`` are cut into tiles that are
   spread over partitions before they are expanded.

Clusters are the connected components of the distinct-fingerprint graph, by
min-label propagation (each round: every node takes the smallest label among
itself and its neighbours; rounds = the graph's diameter); the label is the
first input position, so clusters come out ordered as `shdb dedup` orders them.
Exact copies join their fingerprint's cluster without any edge between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_hbase.layout.scheme import Scheme
from simhash_hbase.spark import DEFAULT_TILE

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

_TILE_BITS = 20  # shuffle key = block key << 20 | tile number
_MAX_CHUNKS = 1 << (_TILE_BITS // 2)  # chunks per block: tile numbers fit in 20 bits
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FLAG_BITS = 8

# Members of a block: side 0 = all pairs among them; in a tile between two
# chunks, side 1 (first chunk) pairs only with side 2 (second chunk).
_WITHIN, _LEFT, _RIGHT = 0, 1, 2


def spread(key: int) -> int:
    """A well-mixed hash of an integer shuffle key (Python's hash(int) is the int:
    keys sharing low bits would all land in one partition)."""
    return ((key * _GOLDEN) & _MASK64) >> 32


@dataclass(frozen=True)
class Distinct:
    """One distinct fingerprint: its first input position and how many records hold it."""

    fp: int
    rep: int
    count: int


def _chunk_of(fp: int, chunks: int) -> int:
    return spread(fp ^ 0x5BD1E995) % chunks


def block_keys(fps: np.ndarray, scheme: Scheme) -> np.ndarray:
    """(n, combos) block keys: field << 8 | flag, the integer of the 5-byte scan prefix."""
    fields = scheme.fields_many(fps).astype(np.uint64)
    flags = np.arange(1, len(scheme.combos) + 1, dtype=np.uint64)
    return (fields << np.uint64(_FLAG_BITS)) | flags  # type: ignore[no-any-return]


def _block_rows(
    items: Iterable[Distinct], scheme: Scheme, big: dict[int, int]
) -> Iterator[tuple[int, tuple[int, int, int, int]]]:
    """(shuffle key, (side, fp, rep, count)) rows of a partition of distinct fingerprints."""
    batch = list(items)
    if not batch:
        return
    fps = np.fromiter((d.fp for d in batch), dtype=np.uint64, count=len(batch))
    for d, keys in zip(batch, block_keys(fps, scheme).tolist()):
        for block in keys:
            chunks = big.get(block)
            if chunks is None:
                yield block << _TILE_BITS, (_WITHIN, d.fp, d.rep, d.count)
                continue
            mine = _chunk_of(d.fp, chunks)
            for other in range(chunks):
                lo, hi = min(mine, other), max(mine, other)
                side = _WITHIN if lo == hi else (_LEFT if mine == lo else _RIGHT)
                yield (block << _TILE_BITS) | (lo * chunks + hi), (side, d.fp, d.rep, d.count)


def _compare_blocks(
    rows: Iterable[tuple[int, tuple[int, int, int, int]]], k: int, scheme: Scheme
) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """Pairs within ``k`` of each block group in a partition, each pair in its first
    common block only: (fp_a, fp_b, distance, rep_a, count_a, rep_b, count_b)."""
    data = list(rows)
    if not data:
        return
    n = len(data)
    keys = np.fromiter((r[0] for r in data), dtype=np.uint64, count=n)
    cols = np.array([r[1] for r in data], dtype=np.uint64).reshape(n, 4)
    order = np.argsort(keys, kind="stable")
    keys, cols = keys[order], cols[order]
    sides, fps = cols[:, 0], cols[:, 1]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.r_[starts, n])
    size_of = np.repeat(sizes, sizes)
    rank = np.arange(n) - np.repeat(starts, sizes)
    flags = ((keys >> np.uint64(_TILE_BITS)) & np.uint64(0xFF)).astype(np.int64)
    combos = np.arange(len(scheme.combos))
    active = np.flatnonzero(size_of > 1)
    offset = 1
    while True:
        # Row i and row i+offset are in one group iff i's rank + offset < group size.
        active = active[rank[active] + offset < size_of[active]]
        if not active.size:
            return
        i, j = active, active + offset
        dist = np.bitwise_count(fps[i] ^ fps[j])
        keep = ((sides[i] == _WITHIN) | (sides[i] != sides[j])) & (dist <= k)
        i, j, dist = i[keep], j[keep], dist[keep]
        if i.size:
            # Drop the pair here if the two already share a block of a lower flag.
            same = block_keys(fps[i], scheme) == block_keys(fps[j], scheme)
            earlier = (same & (combos[None, :] < flags[i][:, None] - 1)).any(axis=1)
            i, j, dist = i[~earlier], j[~earlier], dist[~earlier]
            for a, b, d in zip(cols[i].tolist(), cols[j].tolist(), dist.tolist()):
                first, second = (a, b) if a[2] < b[2] else (b, a)
                yield first[1], second[1], d, first[2], first[3], second[2], second[3]
        offset += 1


def _tiles(
    left: list[int], right: list[int] | None, distance: int, tile: int
) -> Iterator[tuple[list[int], list[int] | None, int]]:
    """Cut the product of two position lists (``right`` None: pairs within ``left``)."""
    lefts = [left[s : s + tile] for s in range(0, len(left), tile)]
    if right is None:
        for x, a in enumerate(lefts):
            yield a, None, distance
            for b in lefts[x + 1 :]:
                yield a, b, distance
        return
    rights = [right[s : s + tile] for s in range(0, len(right), tile)]
    for a in lefts:
        for b in rights:
            yield a, b, distance


def _expand(unit: tuple[list[int], list[int] | None, int]) -> Iterator[tuple[int, int, int]]:
    """Record-position pairs (i < j) of one tile."""
    left, right, distance = unit
    if right is None:
        for n, a in enumerate(left):
            for b in left[n + 1 :]:
                yield a, b, distance
        return
    for a in left:
        for b in right:
            yield (a, b, distance) if a < b else (b, a, distance)


@dataclass
class DedupJob:
    """Parameters of one run; ``partitions`` None uses Spark's default parallelism."""

    scheme: Scheme
    k: int
    tile: int = DEFAULT_TILE
    partitions: int | None = None

    def _partitions(self, rdd: RDD[Any]) -> int:
        return self.partitions or rdd.context.defaultParallelism

    def distinct(self, records: RDD[tuple[int, int]]) -> RDD[tuple[int, list[int]]]:
        """(fp, sorted positions) of (position, fp) records: the exact-duplicate groups."""
        return (
            records.map(lambda r: (r[1], r[0]))
            .groupByKey(self._partitions(records), partitionFunc=spread)
            .mapValues(sorted)
        )

    def near_pairs(
        self, groups: RDD[tuple[int, list[int]]]
    ) -> RDD[tuple[int, int, int, int, int, int, int]]:
        """Pairs of distinct fingerprints within k (each once), with their reps and counts."""
        scheme, k, tile = self.scheme, self.k, self.tile
        distinct = groups.map(lambda g: Distinct(g[0], g[1][0], len(g[1])))
        distinct.persist()
        counts = distinct.mapPartitions(
            lambda ds: ((int(b), 1) for b in _keys_of(ds, scheme))
        ).reduceByKey(lambda a, b: a + b, partitionFunc=spread)
        big = {
            block: min(_MAX_CHUNKS, -(-size // tile))
            for block, size in counts.filter(lambda kv: kv[1] > tile).collect()
        }
        shared = groups.context.broadcast(big)
        rows = distinct.mapPartitions(lambda ds: _block_rows(ds, scheme, shared.value))
        return rows.partitionBy(self._partitions(groups) * 2, spread).mapPartitions(
            lambda part: _compare_blocks(part, k, scheme)
        )

    def pairs(
        self, groups: RDD[tuple[int, list[int]]], near: RDD[tuple[int, ...]]
    ) -> RDD[tuple[int, int, int]]:
        """Every (position i < j, distance) pair of records within k."""
        tile = self.tile
        parts = self._partitions(groups)
        multi = groups.filter(lambda g: len(g[1]) > 1)
        singles = near.filter(lambda p: p[4] == 1 and p[6] == 1).map(lambda p: (p[3], p[5], p[2]))
        # Pairs touching an exact-duplicate group need the group's positions.
        crowded = (
            near.filter(lambda p: p[4] > 1 or p[6] > 1)
            .map(lambda p: (p[0], (p[1], p[2], p[3], p[5], p[6])))
            .leftOuterJoin(multi)
            .map(lambda kv: (kv[1][0][0], (kv[1][1] or [kv[1][0][2]], kv[1][0])))
            .leftOuterJoin(multi)
            .map(lambda kv: (kv[1][0][0], kv[1][1] or [kv[1][0][1][3]], kv[1][0][1][1]))
        )
        units = crowded.union(multi.map(lambda g: (g[1], None, 0)))
        small = units.filter(lambda u: _product(u) <= tile * tile).flatMap(_expand)
        large = (
            units.filter(lambda u: _product(u) > tile * tile)
            .flatMap(lambda u: _tiles(u[0], u[1], u[2], tile))
            .repartition(parts)
            .flatMap(_expand)
        )
        return singles.union(small).union(large)

    def cluster_labels(
        self, groups: RDD[tuple[int, list[int]]], near: RDD[tuple[int, ...]]
    ) -> RDD[tuple[int, int]]:
        """(position, cluster label) of every record in a cluster of two or more;
        the label is the cluster's first position."""
        parts = self._partitions(groups)
        edges = near.flatMap(lambda p: ((p[0], p[1]), (p[1], p[0]))).partitionBy(parts, spread)
        edges.persist()
        labels = near.flatMap(lambda p: ((p[0], p[3]), (p[1], p[5]))).reduceByKey(
            min, parts, spread
        )
        rounds = 0
        while True:
            labels.persist()
            proposed = (
                edges.join(labels)
                .map(lambda kv: (kv[1][0], kv[1][1]))
                .union(labels)
                .reduceByKey(min, parts, spread)
            )
            proposed.persist()
            rounds += 1
            if rounds % 8 == 0:
                proposed.localCheckpoint()  # keeps the lineage short on long chains
            changed = proposed.join(labels).filter(lambda kv: kv[1][0] != kv[1][1]).count()
            labels.unpersist()
            labels = proposed
            if not changed:
                break
        edges.unpersist()
        return groups.leftOuterJoin(labels).flatMap(_member_labels)


def _product(unit: tuple[list[int], list[int] | None, int]) -> int:
    left, right, _ = unit
    return len(left) * (len(left) if right is None else len(right))


def _keys_of(items: Iterable[Distinct], scheme: Scheme) -> Iterator[int]:
    batch = list(items)
    if batch:
        fps = np.fromiter((d.fp for d in batch), dtype=np.uint64, count=len(batch))
        yield from block_keys(fps, scheme).ravel().tolist()


def _member_labels(kv: tuple[int, tuple[list[int], int | None]]) -> Iterator[tuple[int, int]]:
    positions, label = kv[1]
    if label is None and len(positions) < 2:
        return  # a record with no near copy and no exact copy is in no cluster
    own = positions[0] if label is None else label
    for pos in positions:
        yield pos, own


@dataclass
class DedupResult:
    """DataFrames of the run (lazily computed until written)."""

    pairs: DataFrame
    clusters: DataFrame | None


def run(
    spark: SparkSession,
    records: RDD[tuple[int, str, int]],
    job: DedupJob,
    *,
    with_clusters: bool = False,
) -> DedupResult:
    """Pairs (and clusters) of (position, id, fingerprint) records, with ids, in
    input order: the rows `shdb dedup` prints, in its order (``id`` the later
    record, ``near_id`` the earlier one)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    job.scheme.check_k(job.k)
    records.persist()
    ids = spark.createDataFrame(
        records.map(lambda r: (r[0], r[1])),
        StructType([StructField("pos", LongType(), False), StructField("id", StringType(), False)]),
    )
    groups = job.distinct(records.map(lambda r: (r[0], r[2])))
    groups.persist()
    near = job.near_pairs(groups)
    near.persist()
    pair_schema = StructType(
        [StructField(name, LongType(), False) for name in ("a_pos", "b_pos", "distance")]
    )
    positions = spark.createDataFrame(job.pairs(groups, near), pair_schema)
    a, b = ids.alias("a"), ids.alias("b")
    pairs = (
        positions.join(a, F.col("a_pos") == F.col("a.pos"))
        .join(b, F.col("b_pos") == F.col("b.pos"))
        .orderBy("a_pos", "b_pos")
        .select(
            F.col("b.id").alias("id"), F.col("a.id").alias("near_id"), F.col("distance").cast("int")
        )
    )
    clusters = None
    if with_clusters:
        label_schema = StructType(
            [StructField("pos", LongType(), False), StructField("cluster", LongType(), False)]
        )
        labels = spark.createDataFrame(job.cluster_labels(groups, near), label_schema)
        clusters = (
            labels.join(ids, "pos")
            .groupBy("cluster")
            .agg(F.array_sort(F.collect_list(F.struct("pos", "id"))).alias("members"))
            .orderBy("cluster")
            .select(
                F.col("members")[0]["id"].alias("first"),
                F.size("members").alias("size"),
                F.col("members.id").alias("ids"),
            )
        )
    return DedupResult(pairs, clusters)
