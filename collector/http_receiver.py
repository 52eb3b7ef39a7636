"""OTLP/HTTP: ``POST /v1/traces`` and ``POST /v1/logs`` served by waitress, in threads of the collector.

Contract::

    server = HttpReceiver(receiver, "127.0.0.1:4318")   # receiver.handle(ExportRequest) -> response
    server = HttpReceiver(receiver, address, header_timeout_s=10, connection_limit=4096,
                          metrics=metrics.exposition, on_refused=counters.refuse)   # GET /metrics; refusals counted
    server.start()          # binds (OSError naming the address when it cannot); server.port
    server.stop(grace_s)    # stop accepting, let requests in flight answer, close every connection

Why waitress: it is a production WSGI server with no dependencies, embeddable in a thread (no
process manager, no event loop to own), and its asynchronous front end reads every request in full
before a worker thread sees it. A slow or stalled client therefore never holds a worker; the accept
backlog (1,024) and the connection limit are a production server's, not ``http.server``'s 5. It
parses framing itself (chunked bodies, ``Content-Length``) and refuses what is malformed. Each
request body is kept in memory (never spooled to a temporary file: an unredacted payload must not
reach disk) up to :data:`MAX_MESSAGE_BYTES`.

Every answer is OTLP's: a body the client can read in the encoding it sent (protobuf unless it
sent JSON). Success is ``Export…ServiceResponse`` (with ``partial_success`` when some items were
rejected); failures carry a ``google.rpc.Status``, including those waitress answers itself
(malformed framing, a ``Content-Length`` over the limit):

======================================================  ======  =================================
request                                                  status  Status code
======================================================  ======  =================================
not OTLP (protobuf, JSON, gzip/deflate), bad framing     400     INVALID_ARGUMENT
a path other than ``/v1/traces`` and ``/v1/logs``         404     NOT_FOUND
a method other than POST                                 405     UNIMPLEMENTED
silent mid-request for ``client_timeout_s``              408     DEADLINE_EXCEEDED
headers not complete ``header_timeout_s`` after opening  408     DEADLINE_EXCEEDED
no ``Content-Length`` and not chunked                    411     INVALID_ARGUMENT
body over the limit, compressed or decompressed          413     RESOURCE_EXHAUSTED
``Content-Type`` / ``Content-Encoding`` not taken         415     INVALID_ARGUMENT
more concurrent exports than served (``Retry-After``)    429     RESOURCE_EXHAUSTED
a bug of ours (logged with its traceback)                500     INTERNAL
an unknown ``Transfer-Encoding``                         501     UNIMPLEMENTED
writer behind or closing (``Retry-After``)               503     UNAVAILABLE
======================================================  ======  =================================

A client silent mid-request holds no worker meanwhile; after ``client_timeout_s`` it hears 408
and its connection closes. Idle keep-alive connections close after the same time. Slowloris: a
request's headers must be complete within ``header_timeout_s`` of the accept (or of its first
byte), however steadily they trickle; past ``connection_limit`` open connections each newcomer
closes the one waiting longest for its headers (see :class:`_OtlpServer`; why waitress is kept:
docs/collector.md, *Hostile connections*). ``GET /metrics`` answers ``metrics()`` when given.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, Protocol

import orjson
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher
from waitress.utilities import Error

from otel_session.collector.counters import Refused
from otel_session.collector.otlp import ExportRequest, OtlpDecodeError, Signal, parse_json, parse_protobuf
from otel_session.collector.sink import Overloaded, TooManyRequests
from otel_session.core.log import get_logger

__all__ = ["DEFAULT_CONNECTION_LIMIT", "DEFAULT_HEADER_TIMEOUT_S", "MAX_MESSAGE_BYTES", "ExportHandler", "HttpReceiver"]

logger = get_logger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Largest accepted request, compressed or not (the gRPC limit too)."""
DEFAULT_HEADER_TIMEOUT_S = 10.0
"""A request's headers must be complete this long after the accept (or its first byte)."""
DEFAULT_CONNECTION_LIMIT = 4096
"""Open OTLP/HTTP connections, at most; past it a newcomer replaces the slowest to send its headers."""
_THREADS = 16
_ACCEPTS_PER_PASS = 64
_BACKLOG = 1024
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
_SIGNAL_OF_PATH = {signal.path: signal for signal in Signal}
_GRPC_CODE_OF_STATUS = {
    HTTPStatus.BAD_REQUEST: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.NOT_FOUND: code_pb2.NOT_FOUND,
    HTTPStatus.METHOD_NOT_ALLOWED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.LENGTH_REQUIRED: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.TOO_MANY_REQUESTS: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.REQUEST_TIMEOUT: code_pb2.DEADLINE_EXCEEDED,
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.INTERNAL_SERVER_ERROR: code_pb2.INTERNAL,
    HTTPStatus.NOT_IMPLEMENTED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.SERVICE_UNAVAILABLE: code_pb2.UNAVAILABLE,
}
_REFUSAL_OF_STATUS = {
    HTTPStatus.BAD_REQUEST: "malformed",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "too_large",
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: "malformed",
}
"""Refusals the application counts (the receiver counts its own: overloaded, too many requests)."""
_NOT_METRICS = "this collector takes traces and logs, not metrics (set OTEL_METRICS_EXPORTER=none)"
_TOO_LARGE = f"the request body exceeds the limit of {MAX_MESSAGE_BYTES} bytes"

Response = ExportTraceServiceResponse | ExportLogsServiceResponse
Answer = tuple[HTTPStatus, str, bytes, list[tuple[str, str]]]


class ExportHandler(Protocol):
    def handle(self, request: ExportRequest) -> Response: ...


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def _split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) → ``(host, port)``."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def _reply_type_of(content_type: str | None) -> str:
    """Answers are JSON to a JSON request, protobuf otherwise."""
    return _JSON if _media_type(content_type) == _JSON else _PROTOBUF


def _error_answer(status: HTTPStatus, message: str, reply_type: str, *, retry_after: int | None = None) -> Answer:
    """A failure as OTLP/HTTP answers it: ``google.rpc.Status`` in the reply's encoding."""
    code = _GRPC_CODE_OF_STATUS.get(status, code_pb2.UNKNOWN)
    if reply_type == _JSON:
        body = orjson.dumps({"code": code, "message": message})
    else:
        body = status_pb2.Status(code=code, message=message).SerializeToString()
    headers = [("Retry-After", str(retry_after))] if retry_after is not None else []
    return status, reply_type, body, headers


class _OtlpApp:
    """The WSGI application: one OTLP export request in, one OTLP answer out; never raises."""

    def __init__(
        self,
        receiver: ExportHandler,
        *,
        metrics: Callable[[], tuple[bytes, str]] | None = None,
        on_refused: Callable[[Refused, str], None] | None = None,
    ) -> None:
        self.receiver = receiver
        self.metrics = metrics
        self.on_refused = on_refused or (lambda what, reason: None)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        reply_type = _reply_type_of(environ.get("CONTENT_TYPE"))
        try:
            status, content_type, body, headers = self.answer(environ, reply_type)
        except Exception:  # noqa: BLE001 - a bug of ours answers 500, never a traceback to the client
            logger.exception("OTLP/HTTP request failed")
            status, content_type, body, headers = _error_answer(
                HTTPStatus.INTERNAL_SERVER_ERROR, "internal error; the collector's log says more", reply_type
            )
        start_response(
            f"{status.value} {status.phrase}",
            [("Content-Type", content_type), ("Content-Length", str(len(body))), *headers],
        )
        return [body]

    def answer(self, environ: dict[str, Any], reply_type: str) -> Answer:
        try:
            if environ.get("PATH_INFO") == "/metrics" and self.metrics is not None:
                if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
                    raise _HttpError(HTTPStatus.METHOD_NOT_ALLOWED, "/metrics takes GET")
                text, content_type = self.metrics()
                return HTTPStatus.OK, content_type, text, []
            if environ["REQUEST_METHOD"] != "POST":
                raise _HttpError(HTTPStatus.METHOD_NOT_ALLOWED, "OTLP/HTTP takes POST /v1/traces and /v1/logs")
            path = environ.get("PATH_INFO", "")
            signal = _SIGNAL_OF_PATH.get(path)
            if signal is None:
                message = _NOT_METRICS if path == "/v1/metrics" else "no OTLP endpoint here"
                raise _HttpError(HTTPStatus.NOT_FOUND, f"{message}; traces go to /v1/traces, logs to /v1/logs")
            content_type = _media_type(environ.get("CONTENT_TYPE"))
            if content_type not in (_PROTOBUF, _JSON):
                raise _HttpError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"Content-Type: use {_PROTOBUF} or {_JSON}")
            body = _body_of(environ)
            request = parse_protobuf(body, signal) if content_type == _PROTOBUF else parse_json(body, signal)
            try:
                response = self.receiver.handle(request)
            except TooManyRequests as exc:
                raise _HttpError(HTTPStatus.TOO_MANY_REQUESTS, str(exc), retry_after=1) from None
            except Overloaded as exc:
                raise _HttpError(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), retry_after=1) from None
        except OtlpDecodeError as exc:
            self.on_refused(Refused.REQUEST, "malformed")
            return _error_answer(HTTPStatus.BAD_REQUEST, str(exc), reply_type)
        except _HttpError as exc:
            if exc.status in _REFUSAL_OF_STATUS:
                self.on_refused(Refused.REQUEST, _REFUSAL_OF_STATUS[exc.status])
            return _error_answer(exc.status, str(exc), reply_type, retry_after=exc.retry_after)
        if reply_type == _JSON:
            return HTTPStatus.OK, _JSON, orjson.dumps(_partial_success_json(response, signal)), []
        return HTTPStatus.OK, _PROTOBUF, response.SerializeToString(), []


def _body_of(environ: dict[str, Any]) -> bytes:
    """The request body, decompressed, within :data:`MAX_MESSAGE_BYTES` (waitress framed it: a
    ``Content-Length`` of digits within the limit, or chunks it decoded)."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    encoding = (environ.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding not in ("gzip", "deflate"):
        raise _HttpError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "Content-Encoding: use gzip, deflate or none")
    decompressor = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        data = decompressor.decompress(body, MAX_MESSAGE_BYTES + 1)
    except zlib.error:
        raise _HttpError(HTTPStatus.BAD_REQUEST, f"body is not valid {encoding}") from None
    if len(data) > MAX_MESSAGE_BYTES:
        raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"decompressed body exceeds {MAX_MESSAGE_BYTES} bytes")
    if not decompressor.eof:
        raise _HttpError(HTTPStatus.BAD_REQUEST, f"body is a truncated {encoding} stream")
    return data


def _partial_success_json(response: Response, signal: Signal) -> dict[str, Any]:
    if not response.HasField("partial_success"):
        return {}
    partial = response.partial_success
    if signal is Signal.TRACES:
        rejected = {"rejectedSpans": str(partial.rejected_spans)}
    else:
        rejected = {"rejectedLogRecords": str(partial.rejected_log_records)}
    return {"partialSuccess": {**rejected, "errorMessage": partial.error_message}}


class _LengthRequired(Error):
    code = 411
    reason = "Length Required"


class _OtlpParser(HTTPRequestParser):
    """waitress's parser, refusing a POST with neither ``Content-Length`` nor chunks (its body, if
    any, would be read as the next request)."""

    def received(self, data: bytes) -> int:
        consumed = super().received(data)
        if (
            self.completed
            and self.error is None
            and self.command == "POST"
            and not self.chunked
            and "CONTENT_LENGTH" not in self.headers
        ):
            self.error = _LengthRequired("Content-Length (or a chunked body) is required")
        return consumed


class _OtlpErrorTask(ErrorTask):
    """What waitress refuses itself (bad framing, too large) answered as OTLP, not as plain text."""

    def execute(self) -> None:
        error = self.request.error
        status = HTTPStatus(error.code)
        # waitress quotes the offending input in a few messages ('Malformed header line "…"'): never echoed.
        detail = str(error.body).split('"')[0].strip()
        message = _TOO_LARGE if status is HTTPStatus.REQUEST_ENTITY_TOO_LARGE else f"{error.reason}: {detail}"
        self.channel.server.on_refused(Refused.REQUEST, "too_large" if status is HTTPStatus.REQUEST_ENTITY_TOO_LARGE else "malformed")
        status, content_type, body, headers = _error_answer(
            status, message, _reply_type_of(self.request.headers.get("CONTENT_TYPE"))
        )
        self.status = f"{status.value} {status.phrase}"
        self.response_headers.extend([("Content-Type", content_type), *headers])
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _OtlpChannel(HTTPChannel):
    parser_class = _OtlpParser
    error_task_class = _OtlpErrorTask
    timed_out = False
    answered_one = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_started = self.creation_time
        """When the headers now awaited began: the accept, or a later request's first byte."""

    def received(self, data: bytes) -> bool:
        if data and self.request is None and self.answered_one:
            self.header_started = time.time()
        taken = super().received(data)
        if taken and (self.request is None or self.requests):
            self.answered_one = True
        return taken

    @property
    def awaiting_headers(self) -> bool:
        """A request's headers are due: none complete yet, or one begun and unfinished."""
        if self.requests or self.will_close or self.close_when_flushed:
            return False
        if self.request is None:
            return not self.answered_one
        return not self.request.headers_finished

    def evictable(self, begun_before: float) -> bool:
        """Holds a slot and nothing of ours: headers still due, idle between requests, or a body
        still coming for a request begun before ``begun_before``."""
        if self.requests or self.total_outbufs_len or self.will_close or self.close_when_flushed:
            return False
        return self.request is None or not self.request.headers_finished or self.header_started < begun_before

    @property
    def waiting_since(self) -> float:
        """Since when the connection has made us wait: its request's start, or its last activity."""
        return self.header_started if self.request is not None or not self.answered_one else self.last_activity

    def time_out(self, why: str) -> None:
        """Answer 408 to a request begun and never finished (once; then the connection closes)."""
        if self.timed_out or self.requests:
            return
        self.timed_out = True
        if self.request is None:  # nothing sent: nothing to answer
            self.will_close = True
            return
        headers = self.request.headers if self.request.headers_finished else {}
        _, content_type, body, _ = _error_answer(
            HTTPStatus.REQUEST_TIMEOUT, why, _reply_type_of(headers.get("CONTENT_TYPE"))
        )
        head = f"HTTP/1.1 408 Request Timeout\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        self.write_soon(head.encode("latin-1") + b"Connection: close\r\n\r\n" + body)


class _OtlpServer(TcpWSGIServer):
    """waitress's server on a socket bound beforehand, with our channels.

    - A client silent mid-request for ``channel_timeout`` hears 408 before its connection closes.
    - A request's headers must be complete within ``header_timeout_s`` of the accept (or of its
      first byte, on a kept-alive connection), however steadily they trickle: then 408 and close.
    - At ``connection_limit`` open connections, accepting goes on: each new connection closes the
      one that has made us wait longest: for its headers, between requests, or for a body still
      coming ``header_timeout_s`` after its request began. Connections with a request being served
      are never closed for a newcomer, so a flood of slow sockets cannot keep a well-behaved client
      out; only when every connection is busy does accepting pause (waitress's own rule).
    """

    channel_class = _OtlpChannel
    header_timeout_s = 10.0
    on_refused: Callable[[Refused, str], None] = staticmethod(lambda what, reason: None)
    _may_evict = True
    _accept_paused_until = 0.0

    def readable(self) -> bool:
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        if now < self._accept_paused_until:
            return False
        return self.accepting and (len(self._map) < self.adj.connection_limit or self._may_evict)

    def accept(self) -> tuple[socket.socket, Any] | None:
        """Out of descriptors, the connection stays in the backlog and accepting pauses for a
        second (counted ``out_of_descriptors``), instead of a warning and a retry on every pass of
        the loop, which spun a core and flooded the log."""
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            self._accept_paused_until = time.time() + 1.0
            self.on_refused(Refused.CONNECTION, "out_of_descriptors")
            return None

    def handle_accept(self) -> None:
        """Take every connection waiting (not one per pass of the loop); over the limit, close the
        longest-waiting evictable connection for each newcomer."""
        for _ in range(_ACCEPTS_PER_PASS):
            before = len(self._map)
            super().handle_accept()
            if len(self._map) == before:
                return  # nothing (more) to accept
            if len(self._map) > self.adj.connection_limit and not self._evict_one():
                self._may_evict = False  # every connection busy: accepting pauses (until maintenance)
                return

    def _evict_one(self) -> bool:
        begun_before = time.time() - self.header_timeout_s
        candidates = [channel for channel in self.active_channels.values() if channel.evictable(begun_before)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda channel: channel.waiting_since)
        self.on_refused(Refused.CONNECTION, "connection_evicted")
        victim.will_close = True  # closed by the loop's next pass: its descriptor is not reused in this one
        return True

    def maintenance(self, now: float) -> None:
        self._may_evict = True
        idle_cutoff = now - self.adj.channel_timeout
        header_cutoff = now - self.header_timeout_s
        for channel in list(self.active_channels.values()):
            if channel.awaiting_headers and channel.header_started < header_cutoff:
                if not channel.timed_out:
                    self.on_refused(Refused.CONNECTION, "header_timeout")
                channel.time_out(f"request headers not complete within {self.header_timeout_s:g} s")
            elif channel.last_activity < idle_cutoff and channel.request is not None:
                if not channel.timed_out:
                    self.on_refused(Refused.CONNECTION, "client_timeout")
                channel.time_out(f"no complete request within {self.adj.channel_timeout} s")
        super().maintenance(now)  # closes every idle channel, those answered above once flushed


class _QueueLog(logging.LoggerAdapter):
    """waitress warns of every request queued behind busy workers: under load that is the design
    (the accept backlog and the queue absorb bursts), so it is a debug line here."""

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)


class HttpReceiver:
    """The OTLP/HTTP listener: a waitress server whose event loop runs in a daemon thread."""

    def __init__(
        self,
        receiver: ExportHandler,
        address: str,
        *,
        threads: int = _THREADS,
        client_timeout_s: int = 30,
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
        connection_limit: int = DEFAULT_CONNECTION_LIMIT,
        metrics: Callable[[], tuple[bytes, str]] | None = None,
        on_refused: Callable[[Refused, str], None] | None = None,
    ) -> None:
        self._app = _OtlpApp(receiver, metrics=metrics, on_refused=on_refused)
        self._address = address
        self._threads = threads
        self._client_timeout_s = client_timeout_s
        self._header_timeout_s = header_timeout_s
        self._on_refused = on_refused
        self.connection_limit = _within_descriptors(connection_limit)
        self._server: Any = None
        self._map: dict[int, Any] = {}
        self._loop: threading.Thread | None = None
        self.port: int | None = None

    def start(self) -> None:
        host, port = _split_address(self._address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            listener = socket.create_server((host, port), family=family, backlog=_BACKLOG)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            error = OSError(f"cannot listen for OTLP/HTTP on {self._address} (--http): {reason}")
            error.errno = exc.errno
            raise error from None
        dispatcher = ThreadedTaskDispatcher()
        dispatcher.queue_logger = _QueueLog(logger, {})
        dispatcher.set_thread_count(self._threads)
        adjustments = Adjustments(
            threads=self._threads,
            backlog=_BACKLOG,
            connection_limit=self.connection_limit,
            max_request_body_size=MAX_MESSAGE_BYTES + 1,  # waitress refuses a body of this size or more
            inbuf_overflow=MAX_MESSAGE_BYTES + 1,  # keep bodies in memory: never spooled to disk
            channel_timeout=self._client_timeout_s,
            cleanup_interval=1,  # deadlines are checked every second
            asyncore_use_poll=True,  # no select() limit on descriptors
            ident="otel-session-collector",
        )
        self._server = _OtlpServer(
            self._app,
            self._map,
            _sock=listener,
            dispatcher=dispatcher,
            adj=adjustments,
            sockinfo=(listener.family, listener.type, listener.proto, listener.getsockname()),
            bind_socket=False,
        )
        self._server.header_timeout_s = self._header_timeout_s
        if self._on_refused is not None:
            self._server.on_refused = self._on_refused
        self.port = int(self._server.effective_port)
        self._loop = threading.Thread(target=self._server.run, name="otlp-http", daemon=True)
        self._loop.start()

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; give queued and running requests ``grace_s`` to answer; flush the answers
        and close every connection. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        dispatcher = server.task_dispatcher
        try:
            server.trigger.pull_trigger(lambda: _stop_accepting(server))
            _wait_until(lambda: not dispatcher.queue and dispatcher.active_count == 0, grace_s)
            dispatcher.shutdown(cancel_pending=True, timeout=1)  # what is still queued after grace_s is cancelled
            # Idle channels close once flushed (waitress's own maintenance: no 408 for a collector stopping).
            server.trigger.pull_trigger(lambda: TcpWSGIServer.maintenance(server, float("inf")))
            _wait_until(lambda: not server.active_channels, 1.0)
            server.trigger.pull_trigger(lambda: wasyncore.close_all(self._map))  # ends the loop
        except OSError as exc:  # the loop's wake-up pipe is gone: close everything from this thread
            logger.warning("OTLP/HTTP listener: its event loop could not be woken (%s); closing its "
                           "connections from the stopping thread", exc)
            dispatcher.shutdown(cancel_pending=True, timeout=1)
            wasyncore.close_all(self._map, ignore_all=True)  # the loop ends at its next poll (≤ 1 s)
        if self._loop is not None:
            self._loop.join(grace_s + 1)


def _within_descriptors(limit: int) -> int:
    """``limit``, or half the process's soft ``RLIMIT_NOFILE`` when that is lower: an accept that
    fails for want of a descriptor leaves the connection queued and the loop spinning on it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = limit if soft == resource.RLIM_INFINITY else max(64, soft // 2)
    if room < limit:
        logger.warning("OTLP/HTTP connection limit lowered from %d to %d: the process may open %d files "
                       "(raise ulimit -n)", limit, room, soft)
    return min(limit, room)


def _stop_accepting(server: Any) -> None:
    server.accepting = False
    server.del_channel()
    server.socket.close()


def _wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
