"""The collector's counters at GET /metrics (Prometheus text) and its rate-limited refusal log (issue 31)."""

from __future__ import annotations

import http.client
import logging

import orjson
from prometheus_client.parser import text_string_to_metric_families

from otel_session.collector.counters import Counters, RefusalLog, Refused

from .conftest import CANARY_EMAIL, sealed_bundles, wait_for
from .test_receivers import otlp_json_request, post

CANARY_SESSION = f"{CANARY_EMAIL}-session-7f3a9c"
CANARY_TRACE = "7f3a9c0000000000000000000000cafe"


def scrape(port: int) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    return response.status, response.getheader("Content-Type"), text


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_count_what_was_received_bundled_and_refused_and_name_no_session(make_collector, bundle_root):
    collector = make_collector(bundle_root)
    port = collector.http_port
    assert post(port, orjson.dumps(otlp_json_request(session_id=CANARY_SESSION, trace_hex=CANARY_TRACE)))[0].status == 200
    sealed_bundles(bundle_root)
    wait_for(lambda: collector.sink.open_run_count == 0)
    late = otlp_json_request(session_id=CANARY_SESSION, trace_hex=CANARY_TRACE, root=False, span_hex="00000000000000a2")
    assert orjson.loads(post(port, orjson.dumps(late))[1])["partialSuccess"]["rejectedSpans"] == "1"
    assert post(port, b"{not json")[0].status == 400
    open_trace = CANARY_TRACE[:-4] + "beef"
    assert post(port, orjson.dumps(otlp_json_request(session_id=CANARY_SESSION, trace_hex=open_trace, root=False)))[0].status == 200

    status, content_type, text = scrape(port)
    assert status == 200 and content_type.startswith("text/plain")
    found = samples(text)
    assert found[("otel_session_collector_received_total", ())] == 3
    assert found[("otel_session_collector_bundled_total", ())] == 2
    assert found[("otel_session_collector_refused_total", (("reason", "sealed"), ("what", "span")))] == 1
    assert found[("otel_session_collector_refused_total", (("reason", "malformed"), ("what", "request")))] == 1
    assert found[("otel_session_collector_open_runs", ())] == 1
    assert found[("otel_session_collector_forward_queue_bytes", ())] == 0
    assert found[("otel_session_collector_forward_dropped_total", ())] == 0
    assert found[("otel_session_collector_forward_retried_total", ())] == 0
    assert found[("otel_session_collector_catalog_lag_seconds", ())] == 0
    for secret in (CANARY_SESSION, CANARY_EMAIL, "canary", CANARY_TRACE, open_trace, "7f3a9c", "run-"):
        assert secret not in text, secret


def test_the_catalog_lag_gauge_is_a_hook(make_collector, bundle_root):
    collector = make_collector(bundle_root)
    collector.metrics.gauge("catalog_lag_seconds", "How far the catalog is behind.", lambda: 2.5)
    assert samples(scrape(collector.http_port)[2])[("otel_session_collector_catalog_lag_seconds", ())] == 2.5


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_refusals_are_logged_once_per_reason_per_interval_with_their_count(caplog):
    clock = FakeClock()
    counters = Counters(refusal_log=RefusalLog(10, clock=clock))
    with caplog.at_level(logging.WARNING, logger="otel_session.collector.counters"):
        for _ in range(5):
            counters.refuse(Refused.SPAN, "sealed", 2)
        counters.refuse(Refused.REQUEST, "overloaded")
        clock.now += 4
        counters.refuse(Refused.SPAN, "sealed", 3)
        counters.refusal_log.flush()  # within the interval: nothing due yet
        lines = [record.getMessage() for record in caplog.records]
        assert lines == [
            "refused 2 span(s): sealed (further refusals for this reason: one line every 10 s with their count)",
            "refused 1 request(s): overloaded (further refusals for this reason: one line every 10 s with their count)",
        ]
        clock.now += 6
        counters.refusal_log.flush()
        assert caplog.records[-1].getMessage() == "refused 11 span(s) in the last 10 s: sealed"
        assert all(record.levelno == logging.WARNING for record in caplog.records)
        counters.refusal_log.flush()
        assert len(caplog.records) == 3, "nothing held back, nothing logged"
    assert counters.refused_snapshot() == {(Refused.SPAN, "sealed"): 13, (Refused.REQUEST, "overloaded"): 1}
