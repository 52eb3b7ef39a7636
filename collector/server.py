"""The OTLP receivers (gRPC and HTTP) and the collector that owns them.

Contract::

    collector = Collector(root, grpc_address="127.0.0.1:4317", http_address="127.0.0.1:4318")
    collector.start()              # binds; collector.grpc_port / http_port are the bound ports
    collector.receiver.export(request) -> ExportTraceServiceResponse   # raises Overloaded
    collector.receiver.export_logs(request) -> ExportLogsServiceResponse
    collector.stop()               # drain, seal open runs, stop threads; idempotent

Both transports share one :class:`Receiver`: decode → bundle (normalize → redact → write) →
forward. Traces (``TraceService/Export``, ``POST /v1/traces``) and logs (``LogsService/Export``,
``POST /v1/logs``: the GenAI message events some instrumentors emit as log records) are taken
alike. What the receiver answers:

=======================  =====================================  ===================================
situation                OTLP/HTTP                              OTLP/gRPC
=======================  =====================================  ===================================
accepted                 200 + Export…ServiceResponse           OK
some items rejected      200 + ``partial_success``              OK + ``partial_success``
malformed payload        400 + google.rpc.Status                INVALID_ARGUMENT
writer behind / closing  503 + ``Retry-After`` (retry)          UNAVAILABLE (retry)
too many requests        429 + ``Retry-After`` (retry)          RESOURCE_EXHAUSTED (retry)
too large                413                                    RESOURCE_EXHAUSTED (grpc limit)
=======================  =====================================  ===================================
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import threading
import zlib
from collections.abc import Iterator
from concurrent import futures
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import orjson
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_session.collector.forward import Forwarder
from otel_session.collector.options import CollectorOptions
from otel_session.collector.otlp import (
    ExportRequest,
    OtlpDecodeError,
    Signal,
    log_events_of,
    parse_json,
    parse_protobuf,
    spans_of,
)
from otel_session.collector.sink import BundleSink, Counters, EventRedactor, Overloaded
from otel_session.read import iter_runs
from otel_session.write import BundleWriter, WriterLimits

__all__ = [
    "Collector",
    "ListenError",
    "Receiver",
    "TooManyRequests",
    "default_redactor",
]

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Largest accepted request, compressed or not (the gRPC limit too)."""
_MAX_CONCURRENT_EXPORTS = 64
_GRPC_WORKERS = 16
_DRAIN_TIMEOUT_MS = 600_000
_SERVICES = {
    Signal.TRACES: trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    Signal.LOGS: logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}
_SIGNAL_OF_PATH = {signal.path: signal for signal in Signal}


class TooManyRequests(Overloaded):
    """More concurrent export requests than the collector serves at once."""


def default_redactor(root: str | os.PathLike[str]) -> EventRedactor:
    """The redactor the in-process path uses: policy from the environment, key under ``root``."""
    from otel_session.redact import RedactionPolicy, Redactor, load_or_create_key

    return Redactor(RedactionPolicy.from_env(), key=load_or_create_key(root))


class Receiver:
    """Handles one decoded export request for either transport."""

    def __init__(self, sink: BundleSink, *, forwarder: Forwarder | None = None) -> None:
        self.sink = sink
        self.forwarder = forwarder
        self.counters = sink.counters
        self._slots = threading.BoundedSemaphore(_MAX_CONCURRENT_EXPORTS)

    def export(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        """Bundle and forward ``request``; raise ``Overloaded`` (retryable) before taking any of it."""
        with self._slot():
            self.sink.check_capacity()
            spans = list(spans_of(request))
            self.counters.add("received", len(spans))
            result = self.sink.submit(spans)
            if self.forwarder is not None:
                self.forwarder.submit(request, len(spans))
        response = ExportTraceServiceResponse()
        if result.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=result.rejected, error_message=result.error_message)
            )
        return response

    def export_logs(self, request: ExportLogsServiceRequest) -> ExportLogsServiceResponse:
        """Join the request's GenAI log events to their spans, and forward it; other records are
        ignored (counted). Raises ``Overloaded`` (retryable) before taking any of it."""
        with self._slot():
            events, ignored = log_events_of(request)
            self.counters.add("log_records_received", len(events) + ignored)
            self.counters.add("log_records_ignored", ignored)
            result = self.sink.submit_log_events(events)
            if self.forwarder is not None:
                self.forwarder.submit(request, len(events) + ignored)
        response = ExportLogsServiceResponse()
        if result.rejected:
            response.partial_success.CopyFrom(
                ExportLogsPartialSuccess(rejected_log_records=result.rejected, error_message=result.error_message)
            )
        return response

    def handle(self, request: ExportRequest) -> ExportTraceServiceResponse | ExportLogsServiceResponse:
        """:meth:`export` or :meth:`export_logs`, by the request's signal."""
        return self.export_logs(request) if isinstance(request, ExportLogsServiceRequest) else self.export(request)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            raise TooManyRequests(f"more than {_MAX_CONCURRENT_EXPORTS} concurrent export requests; retry later")
        try:
            yield
        finally:
            self._slots.release()


# -- gRPC ------------------------------------------------------------------------------------


def _grpc_handler(receiver: Receiver, signal: Signal) -> grpc.GenericRpcHandler:
    """``TraceService/Export`` or ``LogsService/Export`` taking raw bytes, so a malformed body
    gets INVALID_ARGUMENT."""

    def export(body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse | ExportLogsServiceResponse:
        try:
            request = parse_protobuf(body, signal)
        except OtlpDecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            return receiver.handle(request)
        except TooManyRequests as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except Overloaded as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    return grpc.method_handlers_generic_handler(
        _SERVICES[signal],
        {"Export": grpc.unary_unary_rpc_method_handler(export, response_serializer=lambda response: response.SerializeToString())},
    )


# -- HTTP ------------------------------------------------------------------------------------

_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


_GRPC_CODE_OF_STATUS = {
    HTTPStatus.BAD_REQUEST: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.TOO_MANY_REQUESTS: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.SERVICE_UNAVAILABLE: code_pb2.UNAVAILABLE,
    HTTPStatus.NOT_FOUND: code_pb2.NOT_FOUND,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.LENGTH_REQUIRED: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.METHOD_NOT_ALLOWED: code_pb2.UNIMPLEMENTED,
}


class _OtlpHttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-session-collector"
    receiver: Receiver  # set on the subclass made per server

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        reply_type = _JSON if content_type == _JSON else _PROTOBUF
        try:
            signal = _SIGNAL_OF_PATH.get(self.path.split("?")[0])
            if signal is None:
                self._discard_body()
                raise _HttpError(
                    HTTPStatus.NOT_FOUND, f"no OTLP endpoint at {self.path}; traces go to /v1/traces, logs to /v1/logs"
                )
            body = self._read_body()
            if content_type == _PROTOBUF:
                request = parse_protobuf(body, signal)
            elif content_type == _JSON:
                request = parse_json(body, signal)
            else:
                raise _HttpError(
                    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    f"Content-Type {content_type or '(none)'!r}: use {_PROTOBUF} or {_JSON}",
                )
            try:
                response = self.receiver.handle(request)
            except TooManyRequests as exc:
                raise _HttpError(HTTPStatus.TOO_MANY_REQUESTS, str(exc), retry_after=1) from None
            except Overloaded as exc:
                raise _HttpError(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), retry_after=1) from None
        except OtlpDecodeError as exc:
            self._send_error(_HttpError(HTTPStatus.BAD_REQUEST, str(exc)), reply_type)
            return
        except _HttpError as exc:
            self._send_error(exc, reply_type)
            return
        if reply_type == _JSON:
            payload = {}
            if response.HasField("partial_success"):
                partial = response.partial_success
                rejected = "rejectedSpans" if signal is Signal.TRACES else "rejectedLogRecords"
                payload["partialSuccess"] = {
                    rejected: str(partial.rejected_spans if signal is Signal.TRACES else partial.rejected_log_records),
                    "errorMessage": partial.error_message,
                }
            self._send(HTTPStatus.OK, _JSON, orjson.dumps(payload))
        else:
            self._send(HTTPStatus.OK, _PROTOBUF, response.SerializeToString())

    def do_GET(self) -> None:  # noqa: N802
        self._send_error(_HttpError(HTTPStatus.METHOD_NOT_ALLOWED, "OTLP/HTTP takes POST /v1/traces and /v1/logs"), _JSON)

    def _read_body(self) -> bytes:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            self.close_connection = True
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        try:
            length = int(length_header)
        except ValueError:
            self.close_connection = True
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length_header!r}") from None
        if length > MAX_MESSAGE_BYTES:
            self.close_connection = True
            raise _HttpError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body of {length} bytes; the limit is {MAX_MESSAGE_BYTES}"
            )
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding == "identity":
            return body
        if encoding not in ("gzip", "deflate"):
            raise _HttpError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"Content-Encoding {encoding!r}: use gzip or none")
        decompressor = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        try:
            data = decompressor.decompress(body, MAX_MESSAGE_BYTES + 1)
        except zlib.error as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"body is not valid {encoding}: {exc}") from None
        if len(data) > MAX_MESSAGE_BYTES:
            raise _HttpError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"decompressed body exceeds {MAX_MESSAGE_BYTES} bytes"
            )
        if not decompressor.eof:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"body is a truncated {encoding} stream")
        return data

    def _discard_body(self) -> None:
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= MAX_MESSAGE_BYTES:
            self.rfile.read(int(length))
        else:
            self.close_connection = True

    def _send_error(self, error: _HttpError, reply_type: str) -> None:
        code = _GRPC_CODE_OF_STATUS.get(error.status, code_pb2.UNKNOWN)
        if reply_type == _JSON:
            body = orjson.dumps({"code": code, "message": str(error)})
        else:
            body = status_pb2.Status(code=code, message=str(error)).SerializeToString()
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
        self._send(error.status, reply_type, body, headers)

    def _send(self, status: HTTPStatus, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
        logger.debug("%s " + format, self.address_string(), *args)


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


# -- the collector ---------------------------------------------------------------------------


class ListenError(OSError):
    """A listener could not bind its address (in use, not local, not allowed)."""

    def __init__(self, transport: str, address: str, setting: str, reason: str) -> None:
        self.transport, self.address, self.setting = transport, address, setting
        super().__init__(f"cannot listen for {transport} on {address}: {reason}")


def _check_can_listen(transport: str, address: str, setting: str) -> None:
    """Raise ``ListenError`` if ``address`` cannot be bound now (before any listener touches it,
    so a busy port is one clear error, not a transport's own log lines and traceback)."""
    host, port = _split_address(address)
    if port == 0:
        return
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is fine
            probe.bind(sockaddr)
    except OSError as exc:
        reason = "address already in use (is another collector running?)" if exc.errno == errno.EADDRINUSE else (
            exc.strerror or str(exc))
        raise ListenError(transport, address, setting, reason) from None


class Collector:
    """OTLP receivers + bundle sink + optional forwarder + the sealing timer.

    Settings are ``options`` (default: ``CollectorOptions()``, from the ``OTEL_SESSION_*``
    environment) with ``settings`` (``grpc_address=``, ``seal_after_s=``, … any of its fields)
    applied. ``redactor`` defaults to the in-process default (:func:`default_redactor`);
    ``bundle=False`` only decodes and counts (the benchmark's receiver-only baseline).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        options: CollectorOptions | None = None,
        *,
        redactor: EventRedactor | None = None,
        writer_limits: WriterLimits | None = None,
        bundle: bool = True,
        **settings: Any,
    ) -> None:
        self.options = options = (options or CollectorOptions()).with_values(**settings)
        self.root = Path(root)
        self.redactor = redactor if redactor is not None else default_redactor(self.root)
        self.counters = Counters()
        self.writer = BundleWriter(self.root, limits=writer_limits)
        self.sink = BundleSink(self.writer, self.redactor, options, counters=self.counters)
        self.forwarder = (
            Forwarder(
                options.forward,
                text_redactor=self.redactor.text if options.forward_redacted else None,
                counters=self.counters,
                protocol=options.forward_protocol,
            )
            if options.forward
            else None
        )
        self.receiver = Receiver(self.sink, forwarder=self.forwarder) if bundle else _ReceiveOnly(self.counters)
        self._grpc_address = options.grpc_address
        self._http_address = options.http_address
        self._status_interval_s = options.status_interval_s
        self._grpc_server: grpc.Server | None = None
        self._http_server: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._timer = threading.Thread(target=self._tick, name="otel-session-sealer", daemon=True)
        self.grpc_port: int | None = None
        self.http_port: int | None = None

    def start(self) -> None:
        """Bind the listeners (``ListenError`` before anything else is touched), resume the runs a
        crashed collector left open, and start serving."""
        if self._grpc_address:
            _check_can_listen("OTLP/gRPC", self._grpc_address, "grpc_address")
        if self._http_address:
            _check_can_listen("OTLP/HTTP", self._http_address, "http_address")
        if isinstance(self.receiver, Receiver):  # runs a crashed collector left open continue, or end interrupted
            self.writer.remove_abandoned_builds()
            self.sink.resume_orphans(iter_runs(self.root, include_evals=True))
        if self._grpc_address:
            self._grpc_server = grpc.server(
                futures.ThreadPoolExecutor(max_workers=_GRPC_WORKERS, thread_name_prefix="otlp-grpc"),
                handlers=[_grpc_handler(self.receiver, signal) for signal in Signal],
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.so_reuseport", 0),
                ],
            )
            self.grpc_port = self._grpc_server.add_insecure_port(self._grpc_address)
            if not self.grpc_port:
                raise OSError(f"cannot bind OTLP/gRPC to {self._grpc_address}")
            self._grpc_server.start()
        if self._http_address:
            handler = type("OtlpHttpHandler", (_OtlpHttpHandler,), {"receiver": self.receiver})
            self._http_server = ThreadingHTTPServer(_split_address(self._http_address), handler)
            self._http_server.daemon_threads = True
            self.http_port = self._http_server.server_address[1]
            self._http_thread = threading.Thread(
                target=self._http_server.serve_forever, name="otlp-http", kwargs={"poll_interval": 0.2}, daemon=True
            )
            self._http_thread.start()
        self._timer.start()
        logger.info("collector listening grpc=%s http=%s root=%s", self.grpc_port, self.http_port, self.root)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` was called (or ``timeout``); True when stopped."""
        return self._stop.wait(timeout)

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop receiving, finish in-flight requests, seal every open run, drain. Idempotent."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        self._stop.set()
        if self._grpc_server is not None:
            self._grpc_server.stop(grace_s).wait(grace_s + 1)
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
        if self._timer.is_alive():
            self._timer.join(2)
        if isinstance(self.receiver, Receiver):
            sealed = self.sink.seal_all()
            if sealed:
                logger.info("sealed %d open run(s) at shutdown", len(sealed))
        if self.forwarder is not None:
            self.forwarder.shutdown()
        # Sealing rewrites each open run's journal; give the writer the time that takes.
        self.writer.shutdown(timeout_millis=_DRAIN_TIMEOUT_MS)
        logger.info("collector stopped: %s", self.counters.status_line())

    def _tick(self) -> None:
        interval = max(0.05, min(1.0, self.sink.seal_after_s / 4, self.sink.hold_unrouted_s / 4))
        last_status = ""
        elapsed = 0.0
        while not self._stop.wait(interval):
            try:
                if isinstance(self.receiver, Receiver):
                    self.sink.seal_quiet_runs()
            except Exception:  # noqa: BLE001 - the timer must survive one bad run
                logger.exception("sealing failed")
            elapsed += interval
            if elapsed >= self._status_interval_s:
                elapsed = 0.0
                status = self.counters.status_line()
                if status != last_status:
                    logger.info("collector status: %s open_runs=%d", status, self.sink.open_run_count)
                    last_status = status


class _ReceiveOnly:
    """A receiver that decodes and counts, writing nothing (the benchmark's baseline)."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def export(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        self.counters.add("received", sum(1 for _ in spans_of(request)))
        return ExportTraceServiceResponse()

    def handle(self, request: ExportRequest) -> ExportTraceServiceResponse | ExportLogsServiceResponse:
        if isinstance(request, ExportLogsServiceRequest):
            events, ignored = log_events_of(request)
            self.counters.add("log_records_received", len(events) + ignored)
            return ExportLogsServiceResponse()
        return self.export(request)
