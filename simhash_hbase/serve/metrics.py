"""Prometheus metrics (one registry per app) and the recent window of the status page."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from simhash_hbase.errors import ShdbError
from simhash_hbase.serve.worker import Observer
from simhash_hbase.store.hbase.metrics import GATEWAY_STATS, LATENCY_BUCKETS, GatewayStats

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SIZES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
BUCKET_SECONDS = 10
WINDOW_BUCKETS = 60  # ten minutes on the status page
_SAMPLES = 256  # latencies kept per bucket (a uniform sample beyond that)


class Recent:
    """Requests and their latencies in 10-second buckets over the last ten minutes."""

    def __init__(self) -> None:
        self._buckets: deque[tuple[int, list[int], list[float]]] = deque(maxlen=WINDOW_BUCKETS)

    def add(self, seconds: float, now: float | None = None) -> None:
        slot = int((time.time() if now is None else now) // BUCKET_SECONDS)
        if not self._buckets or self._buckets[-1][0] != slot:
            self._buckets.append((slot, [0], []))
        _, count, samples = self._buckets[-1]
        count[0] += 1
        if len(samples) < _SAMPLES:
            samples.append(seconds)
        elif (j := random.randrange(count[0])) < _SAMPLES:
            samples[j] = seconds

    def summary(self, now: float | None = None) -> list[dict[str, Any]]:
        """Per bucket, oldest first: its start, requests per second, p50 and p99 in ms."""
        oldest = int((time.time() if now is None else now) // BUCKET_SECONDS) - WINDOW_BUCKETS
        rows = []
        for slot, count, samples in self._buckets:
            if slot <= oldest:
                continue
            ordered = sorted(samples)
            rows.append(
                {
                    "start": slot * BUCKET_SECONDS,
                    "rate": round(count[0] / BUCKET_SECONDS, 2),
                    "p50_ms": round(_quantile(ordered, 0.5) * 1000, 2),
                    "p99_ms": round(_quantile(ordered, 0.99) * 1000, 2),
                }
            )
        return rows


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class GatewayCollector(Collector):
    """The HBase gateways' client-side figures (:mod:`simhash_hbase.store.hbase.metrics`),
    read at each scrape: none until an HBase store made a call."""

    def __init__(self, stats: GatewayStats = GATEWAY_STATS) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        snapshot = self._stats.snapshot()
        seconds = HistogramMetricFamily(
            "shdb_hbase_call_seconds", "HBase gateway call latency", labels=["gateway"]
        )
        retries = CounterMetricFamily(
            "shdb_hbase_retries", "HBase gateway calls tried again", labels=["gateway"]
        )
        errors = CounterMetricFamily(
            "shdb_hbase_errors", "HBase gateway failures, by kind", labels=["gateway", "kind"]
        )
        for gateway, figures in sorted(snapshot.items()):
            bounds = [str(b) for b in LATENCY_BUCKETS] + ["+Inf"]
            counts = list(accumulate(figures.buckets))
            seconds.add_metric([gateway], list(zip(bounds, counts)), figures.seconds)
            retries.add_metric([gateway], figures.retries)
            for kind, count in sorted(figures.errors.items()):
                errors.add_metric([gateway, kind], count)
        yield from (seconds, retries, errors)


class Metrics(Observer):
    """Requests, latencies, batch sizes, documents, commits and store errors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "shdb_requests", "HTTP requests answered", ["endpoint", "status"], registry=r
        )
        self.latency = Histogram(
            "shdb_request_seconds", "Request latency", ["endpoint"], buckets=_LATENCY, registry=r
        )
        self.batch = Histogram(
            "shdb_batch_items", "Items per request", ["endpoint"], buckets=_SIZES, registry=r
        )
        self.documents = Counter(
            "shdb_documents", "Items processed, by outcome", ["endpoint", "outcome"], registry=r
        )
        self.commit = Histogram(
            "shdb_commit_documents", "Documents per group commit", buckets=_SIZES, registry=r
        )
        self.commit_seconds = Histogram(
            "shdb_commit_seconds", "Duration of a group commit", buckets=_LATENCY, registry=r
        )
        self.queue = Gauge("shdb_queue_documents", "Documents waiting to be written", registry=r)
        self.store_errors = Counter(
            "shdb_store_errors", "Store operations that failed", ["kind"], registry=r
        )
        self.recent = Recent()
        r.register(GatewayCollector())

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)
        self.recent.add(seconds)

    # -- Observer (called on the store thread) ----------------------------------------
    def group(self, docs: int, seconds: float) -> None:
        self.commit.observe(docs)
        self.commit_seconds.observe(seconds)

    def store_error(self, error: ShdbError) -> None:
        self.store_errors.labels(type(error).__name__).inc()

    def queued(self, documents: int) -> None:
        self.queue.set(documents)
