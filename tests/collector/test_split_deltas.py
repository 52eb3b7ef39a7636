"""A value split across streamed deltas, sent unredacted by the app, reaches the collector's bundle
only whole and redacted: the collector redacts a message's deltas as one stream."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

import otel_session
from otel_session.bundle.read import BundleStatus
from otel_session.redact import FieldMode, RedactionPolicy

from .conftest import CANARY_CARD, CANARY_EMAIL, all_bytes, sealed_bundles

TEXT = f"mail {CANARY_EMAIL} or pay with {CANARY_CARD} today"
FRAGMENTS = ["canary.ja", "jane.doe", "doe@", "@exam", "4111 11", "1111 1111"]


def test_deltas_sent_raw_are_redacted_as_one_stream(make_provider, collector, bundle_root, tmp_path):
    provider = make_provider(OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True))
    recorder = otel_session.configure(
        bundle_dir=tmp_path / "in-process", tracer_provider=provider,
        redaction=RedactionPolicy(text=FieldMode.KEEP),  # the app sends its text as it is
    )
    try:
        with otel_session.session("split-at-the-collector"), otel_session.run(agent="booking"):
            with otel_session.message("assistant") as m:
                for start in range(0, len(TEXT), 4):
                    m.delta(TEXT[start : start + 4])
    finally:
        recorder.shutdown()

    (bundle,) = sealed_bundles(bundle_root)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    deltas = [event["payload"]["delta"] for event in bundle.events if event["type"] == "assistant_delta"]
    assert "".join(deltas) == "mail [email] or pay with [card] today"
    stored = all_bytes(bundle_root)
    for fragment in FRAGMENTS:
        assert fragment.encode() not in stored, f"{fragment!r} reached the collector's disk"
