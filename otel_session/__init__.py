"""otel-session: OpenTelemetry-native session/run instrumentation, bundles and replay for agents."""

from otel_session.journal import EventType, RunKind, run_id_from_trace_id
from otel_session.read import BundleStatus, read_bundle
from otel_session.write import AppendResult, BundleWriter, WriterLimits

__all__ = [
    "AppendResult",
    "BundleStatus",
    "BundleWriter",
    "EventType",
    "RunKind",
    "WriterLimits",
    "read_bundle",
    "run_id_from_trace_id",
]

__version__ = "0.1.0"
