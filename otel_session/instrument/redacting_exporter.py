"""``OTEL_TRACES_EXPORTER`` / ``OTEL_LOGS_EXPORTER=otel_session_otlp``: the official OTLP exporters, redacted like the bundle.

Contract::

    exporter = RedactingOTLPSpanExporter()              # what the SDK builds from the entry point
    exporter = RedactingOTLPSpanExporter(redactor=r, protocol="http/protobuf", endpoint=...)
    exporter = RedactingOTLPLogExporter()               # the same for log records (GenAI log events)

Registered as ``otel_session_otlp`` under the ``opentelemetry_traces_exporter`` and
``opentelemetry_logs_exporter`` entry point groups. Every span and log record leaves the process
through the same redaction step the collector's forwarder applies
(``otel_session.redact.otlp.redact_otlp``, over the whole request) with the bundle's policy
(``Redactor.from_env(config.bundle_dir())``: ``OTEL_SESSION_REDACT_*`` and the key under
``OTEL_SESSION_DIR``), so nothing exported is less redacted than the bundle (SPEC §6). Use them when
an app exports straight to a vendor; the plain ``otlp`` exporters are fine when it exports to the
otel-session collector, which redacts before forwarding.

The protocol follows the SDK's rule for ``otlp``: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (or
``..._LOGS_PROTOCOL``), else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``grpc``; ``http/protobuf`` is
the other choice. All other ``OTEL_EXPORTER_OTLP_*`` settings are the official exporters' own.
Hooks: the gRPC exporters' ``_translate_data`` (the request they send, redacted in place); the
HTTP exporters encode with ``encode_spans`` / ``encode_logs``, and their ``export`` is replaced by
encode, redact, serialize and their client's send. A failure (encoding, redaction, sending) is
logged and returned as ``FAILURE``, never raised.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_LOGS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_session.core import config
from otel_session.core.log import get_logger
from otel_session.redact import Redactor
from otel_session.redact.otlp import redact_otlp

__all__ = ["RedactingOTLPLogExporter", "RedactingOTLPSpanExporter"]

logger = get_logger(__name__)

PROTOCOLS = ("grpc", "http/protobuf")


def _protocol(signal: _Signal, explicit: str | None) -> str:
    protocol = (
        explicit or os.environ.get(signal.protocol_env) or os.environ.get(OTEL_EXPORTER_OTLP_PROTOCOL) or "grpc"
    ).strip()
    if protocol not in PROTOCOLS:
        raise ValueError(f"otel_session_otlp: unsupported OTLP protocol {protocol!r} (choose one of {PROTOCOLS})")
    return protocol


class _WithRedactor:
    """An official exporter's constructor, plus the redactor and the signal its subclass applies."""

    def __init__(self, redactor: Redactor, signal: _Signal, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._redactor = redactor
        self._what = signal  # not _signal: the official gRPC exporter has one


class _RedactingGrpc(_WithRedactor):
    """An official gRPC exporter; the request it builds is redacted before it is sent."""

    def _translate_data(self, data: Sequence[Any]) -> Message:
        request = super()._translate_data(data)  # type: ignore[misc]
        redact_otlp(request, self._redactor)
        return request


class _RedactingHttp(_WithRedactor):
    """An official HTTP/protobuf exporter; the encoded request is redacted before serializing."""

    _shutdown: bool
    _client: Any

    def export(self, batch: Sequence[Any]) -> Any:
        failure = self._what.result.FAILURE  # type: ignore[attr-defined]
        if self._shutdown:
            logger.warning("otel_session_otlp: exporter already shut down, %d %s not sent", len(batch), self._what.items)
            return failure
        request = self._what.encode(batch)
        redact_otlp(request, self._redactor)
        result = self._client.export(request.SerializePartialToString())
        if not result.success:
            logger.error("otel_session_otlp: %d %s not exported: %s", len(batch), self._what.items, result.error)
            return failure
        return self._what.result.SUCCESS  # type: ignore[attr-defined]


class _GrpcSpans(_RedactingGrpc, GrpcSpanExporter):
    pass


class _HttpSpans(_RedactingHttp, HttpSpanExporter):
    pass


class _GrpcLogs(_RedactingGrpc, GrpcLogExporter):
    pass


class _HttpLogs(_RedactingHttp, HttpLogExporter):
    pass


@dataclass(frozen=True)
class _Signal:
    """What differs between the span and the log record exporters."""

    items: str
    """What a batch holds, for log lines ("spans", "log records")."""
    protocol_env: str
    result: type[Enum]
    """``SpanExportResult`` or ``LogRecordExportResult`` (both SUCCESS / FAILURE)."""
    encode: Callable[[Sequence[Any]], Message]
    grpc: type[_RedactingGrpc]
    http: type[_RedactingHttp]


_SPANS = _Signal("spans", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, SpanExportResult, encode_spans, _GrpcSpans, _HttpSpans)
_LOGS = _Signal("log records", OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, LogRecordExportResult, encode_logs, _GrpcLogs, _HttpLogs)


class _Redacting:
    """The official OTLP exporter of a signal behind the bundle's redaction; never raises."""

    _signal: _Signal

    def __init__(self, redactor: Redactor | None = None, protocol: str | None = None, **kwargs: Any) -> None:
        """``kwargs`` go to the official exporter (``endpoint``, ``headers``, ``timeout``…)."""
        redactor = redactor if redactor is not None else Redactor.from_env(config.bundle_dir())
        inner = self._signal.http if _protocol(self._signal, protocol) == "http/protobuf" else self._signal.grpc
        self._inner = inner(redactor, self._signal, **kwargs)

    def export(self, batch: Sequence[Any]) -> Any:
        try:
            return self._inner.export(batch)
        except Exception:  # the instrumented app never sees an export failure
            logger.exception("otel_session_otlp: %d %s not exported", len(batch), self._signal.items)
            return self._signal.result.FAILURE  # type: ignore[attr-defined]

    def shutdown(self) -> None:
        try:
            self._inner.shutdown()
        except Exception:
            logger.exception("otel_session_otlp: shutdown failed")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return self._inner.force_flush(timeout_millis)
        except Exception:
            logger.exception("otel_session_otlp: force_flush failed")
            return False


class RedactingOTLPSpanExporter(_Redacting, SpanExporter):
    """The official OTLP span exporter behind the bundle's redaction; see the module's docstring."""

    _signal = _SPANS

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return super().export(spans)


class RedactingOTLPLogExporter(_Redacting, LogRecordExporter):
    """The official OTLP log record exporter behind the bundle's redaction (GenAI log events)."""

    _signal = _LOGS

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return super().export(batch)
