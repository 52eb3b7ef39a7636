"""otel-session: OpenTelemetry-native session/run instrumentation, bundles and replay for agents.

The names below are imported when first used (PEP 562), so that a command or a tool that imports
one module of the package (the CLI, ``opentelemetry-instrument``'s entry points) does not pay for
the instrumentation API, the writer and the OpenTelemetry SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_session._version import __version__
from otel_session.core.lazy import lazy_exports

if TYPE_CHECKING:
    from otel_session.bundle.read import BundleStatus, read_bundle
    from otel_session.bundle.write import AppendResult, BundleWriter, WriterLimits
    from otel_session.core.journal import EventType, RunKind, run_id_from_trace_id
    from otel_session.instrument import (
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
    from otel_session.redact import FieldMode, RedactionPolicy, Redactor

_HOMES = {
    **dict.fromkeys(("EventType", "RunKind", "run_id_from_trace_id"), "otel_session.core.journal"),
    **dict.fromkeys(("BundleStatus", "read_bundle"), "otel_session.bundle.read"),
    **dict.fromkeys(("FieldMode", "RedactionPolicy", "Redactor"), "otel_session.redact"),
    **dict.fromkeys(("AppendResult", "BundleWriter", "WriterLimits"), "otel_session.bundle.write"),
    **dict.fromkeys(("Recorder", "configure", "current_recorder", "current_run", "current_session_id", "guard",
                     "message", "run", "session", "slot_write", "tool", "tool_execution", "transition", "turn"),
                    "otel_session.instrument"),
}

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
    "__version__",
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

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
