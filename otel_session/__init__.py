"""otel-session: OpenTelemetry-native session/run instrumentation, bundles and replay for agents."""

from otel_session._version import __version__  # noqa: E402

from otel_session.core.journal import EventType, RunKind, run_id_from_trace_id  # noqa: E402
from otel_session.bundle.read import BundleStatus, read_bundle  # noqa: E402
from otel_session.redact import FieldMode, RedactionPolicy, Redactor  # noqa: E402
from otel_session.bundle.write import AppendResult, BundleWriter, WriterLimits  # noqa: E402
from otel_session.instrument import (  # noqa: E402
    Recorder,
    configure,
    current_recorder,
    current_run,
    current_session_id,
    guard,
    message,
    run,
    session,
    slot_write,
    tool,
    tool_execution,
    transition,
    turn,
)

__all__ = [
    "AppendResult",
    "BundleStatus",
    "BundleWriter",
    "EventType",
    "FieldMode",
    "Recorder",
    "RedactionPolicy",
    "Redactor",
    "RunKind",
    "WriterLimits",
    "configure",
    "current_recorder",
    "current_run",
    "current_session_id",
    "guard",
    "message",
    "read_bundle",
    "run",
    "run_id_from_trace_id",
    "session",
    "slot_write",
    "tool",
    "tool_execution",
    "transition",
    "turn",
]
