"""``OTEL_TRACES_EXPORTER=otel_session_otlp``: the official OTLP exporter, redacted like the bundle.

Contract::

    exporter = RedactingOTLPSpanExporter()              # what the SDK builds from the entry point
    exporter = RedactingOTLPSpanExporter(redactor=r, protocol="http/protobuf", endpoint=...)

Registered under the ``opentelemetry_traces_exporter`` entry point group as ``otel_session_otlp``.
Every span leaves the process through the same redaction step the collector's forwarder applies
(``otel_session.redact.otlp.redact_otlp``) with the bundle's policy
(``Redactor.from_env(config.bundle_dir())``: ``OTEL_SESSION_REDACT_*`` and the key under
``OTEL_SESSION_DIR``), so no exported span is less redacted than the bundle (SPEC §6). Use it when
an app exports straight to a vendor; the plain ``otlp`` exporter is fine when it exports to the
otel-session collector, which redacts before forwarding.

The protocol follows the SDK's rule for ``otlp``: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else
``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``grpc``; ``http/protobuf`` is the other choice. All other
``OTEL_EXPORTER_OTLP_*`` settings are the official exporters' own. Hooks: the gRPC exporter's
``_translate_data`` (the request it sends, redacted in place); the HTTP exporter encodes with
``encode_spans``, and its ``export`` is replaced by encode, redact, serialize and its client's send.
A failure (encoding, redaction, sending) is logged and returned as ``FAILURE``, never raised.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.environment_variables import OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_session import config
from otel_session.log import get_logger
from otel_session.redact import Redactor
from otel_session.redact.otlp import redact_otlp

__all__ = ["RedactingOTLPSpanExporter"]

logger = get_logger(__name__)

PROTOCOLS = ("grpc", "http/protobuf")


def _protocol(explicit: str | None) -> str:
    protocol = (
        explicit or os.environ.get(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) or os.environ.get(OTEL_EXPORTER_OTLP_PROTOCOL) or "grpc"
    ).strip()
    if protocol not in PROTOCOLS:
        raise ValueError(f"otel_session_otlp: unsupported OTLP protocol {protocol!r} (choose one of {PROTOCOLS})")
    return protocol


class _WithRedactor:
    """An official exporter's constructor, plus the redactor its subclass applies."""

    def __init__(self, redactor: Redactor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._redactor = redactor


class _RedactingGrpc(_WithRedactor, GrpcSpanExporter):
    """The official gRPC exporter; the request it builds is redacted before it is sent."""

    def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        request = super()._translate_data(data)
        redact_otlp(request, self._redactor)
        return request


class _RedactingHttp(_WithRedactor, HttpSpanExporter):
    """The official HTTP/protobuf exporter; the encoded request is redacted before serializing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            logger.warning("otel_session_otlp: exporter already shut down, %d spans not sent", len(spans))
            return SpanExportResult.FAILURE
        request = encode_spans(spans)
        redact_otlp(request, self._redactor)
        result = self._client.export(request.SerializePartialToString())
        if not result.success:
            logger.error("otel_session_otlp: %d spans not exported: %s", len(spans), result.error)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class RedactingOTLPSpanExporter(SpanExporter):
    """The official OTLP span exporter behind the bundle's redaction; see the module's docstring."""

    def __init__(self, redactor: Redactor | None = None, protocol: str | None = None, **kwargs: Any) -> None:
        """``kwargs`` go to the official exporter (``endpoint``, ``headers``, ``timeout``…)."""
        redactor = redactor if redactor is not None else Redactor.from_env(config.bundle_dir())
        inner = _RedactingHttp if _protocol(protocol) == "http/protobuf" else _RedactingGrpc
        self._inner: SpanExporter = inner(redactor, **kwargs)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            return self._inner.export(spans)
        except Exception:  # the instrumented app never sees an export failure
            logger.exception("otel_session_otlp: %d spans not exported", len(spans))
            return SpanExportResult.FAILURE

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
