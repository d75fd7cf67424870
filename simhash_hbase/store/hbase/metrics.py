"""Client-side figures of the HBase gateways this process calls: call latency,
retries and errors, per gateway.

The transport pool reports to a :class:`GatewayObserver`; the default one,
:data:`GATEWAY_STATS`, keeps process-wide totals (cumulative, as Prometheus wants
them) that ``shdb serve`` exports on ``/metrics``. Plain Python: the store needs
no Prometheus client, and a process that never looks costs a lock and a few adds
per call.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Protocol

#: Upper bounds (seconds) of the call latency histogram, as serve's request latency.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class GatewayObserver(Protocol):
    """What the transport pool tells about each gateway (``host:port``)."""

    def call(self, gateway: str, seconds: float) -> None:
        """A call (or a pipelined set of calls) answered."""
        ...

    def retry(self, gateway: str) -> None:
        """A call failed on the network and is tried again (maybe on another gateway)."""
        ...

    def error(self, gateway: str, kind: str) -> None:
        """A failure: ``kind`` is ``connect``, ``dropped``, ``timeout``, ``tls`` or ``call``."""
        ...


@dataclass
class GatewayFigures:
    """One gateway's totals: the histogram counts are per bucket (not cumulative),
    the last one past the largest bound."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    seconds: float = 0.0
    calls: int = 0
    retries: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class GatewayStats:
    """Totals per gateway since the process started (a :class:`GatewayObserver`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gateways: dict[str, GatewayFigures] = {}

    def _of(self, gateway: str) -> GatewayFigures:
        figures = self._gateways.get(gateway)
        if figures is None:
            figures = self._gateways[gateway] = GatewayFigures()
        return figures

    def call(self, gateway: str, seconds: float) -> None:
        with self._lock:
            figures = self._of(gateway)
            figures.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            figures.seconds += seconds
            figures.calls += 1

    def retry(self, gateway: str) -> None:
        with self._lock:
            self._of(gateway).retries += 1

    def error(self, gateway: str, kind: str) -> None:
        with self._lock:
            errors = self._of(gateway).errors
            errors[kind] = errors.get(kind, 0) + 1

    def snapshot(self) -> dict[str, GatewayFigures]:
        """A copy of every gateway's totals, taken at once."""
        with self._lock:
            return {
                name: GatewayFigures(list(f.buckets), f.seconds, f.calls, f.retries, dict(f.errors))
                for name, f in self._gateways.items()
            }


#: The figures of every HBase store of this process.
GATEWAY_STATS = GatewayStats()
