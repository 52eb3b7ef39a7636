"""An app whose own policy keeps everything: its own spans leave raw, over plain OTLP/gRPC, to the
collector, which must redact them with the bundle's policy. Run by the leak test:

    python keep_everything_app.py COLLECTOR_GRPC_ADDRESS FIRST_SERIAL PLACED.json

The canaries it places are written to ``PLACED.json`` (kind, value, where, control) for the parent's grep.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.redact import FieldMode, RedactionPolicy


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name.split('_', 1)[1]}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main(address: str, first_serial: int, placed_file: str) -> None:
    canaries_module, telemetry = _load("leak_canaries"), _load("leak_telemetry")
    canaries = canaries_module.Canaries()  # type: ignore[attr-defined]
    canaries._serial = first_serial
    keep = FieldMode.KEEP
    policy = RedactionPolicy(slot_values=keep, text=keep, tool_arguments=keep, tool_results=keep, identifiers=keep)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=address, insecure=True)))
    with tempfile.TemporaryDirectory() as own_bundles:
        recorder = otel_session.configure(bundle_dir=own_bundles, redaction=policy, tracer_provider=provider)
        telemetry.exercise_api(canaries, "keep-everything app")  # type: ignore[attr-defined]
        recorder.shutdown()
    provider.shutdown()
    Path(placed_file).write_text(json.dumps([[p.kind, p.value, p.where, p.control] for p in canaries.placed]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
