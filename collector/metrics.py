"""The collector's counters as Prometheus text, served at ``GET /metrics`` on the OTLP/HTTP port.

Contract::

    metrics = CollectorMetrics(counters)                      # a registry of its own, no global state
    metrics.gauge("open_runs", "Runs open now.", lambda: sink.open_run_count)
    text, content_type = metrics.exposition()                 # what GET /metrics answers

Every counter of :class:`~otel_session.collector.counters.Counters` is exposed as
``otel_session_collector_<name>_total`` (read when scraped: nothing is counted twice), refusals as
``otel_session_collector_refused_total{what, reason}`` (``what`` is ``span``, ``log_record`` or
``request``; ``reason`` a fixed word), and each gauge as ``otel_session_collector_<name>``.
Labels are only those fixed words: never a session, run or trace id, nor any value of a request.

``catalog_lag_seconds`` is registered at 0: the hook for the catalog, which sets it with
``metrics.gauge("catalog_lag_seconds", …, its_function)`` (a later registration replaces one of
the same name).

Why ``prometheus_client`` (not the OTel SDK's Prometheus reader): the counters already exist as
plain numbers; a custom collector on a private ``CollectorRegistry`` turns them into the text format
at scrape time with no second copy, no meter provider, no global state and no extra HTTP server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from otel_session.collector.counters import Counters

__all__ = ["PREFIX", "CollectorMetrics"]

PREFIX = "otel_session_collector_"


class CollectorMetrics(Collector):
    """Counters and gauges of one collector, in a registry of their own."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self._lock = threading.Lock()
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.gauge("catalog_lag_seconds", "How far the catalog is behind the bundles (0 until a catalog sets it).",
                   lambda: 0.0)

    def gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """Expose ``read()`` as the gauge ``otel_session_collector_<name>`` (replacing one of that name)."""
        with self._lock:
            self._gauges[name] = (documentation, read)

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text of every metric, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def collect(self) -> Iterator[Metric]:
        for name, value in self._counters.snapshot().items():
            yield CounterMetricFamily(f"{PREFIX}{name}", f"Collector counter {name} (docs/collector.md, counters).",
                                      value=value)
        refused = CounterMetricFamily(f"{PREFIX}refused", "Items refused, by what (span, log_record, request) "
                                      "and reason.", labels=["what", "reason"])
        for (what, reason), value in sorted(self._counters.refused_snapshot().items()):
            refused.add_metric([what.value, reason], value)
        yield refused
        with self._lock:
            gauges = list(self._gauges.items())
        for name, (documentation, read) in gauges:
            yield GaugeMetricFamily(f"{PREFIX}{name}", documentation, value=read())
