"""Forwarding: every received export request also goes to another OTLP endpoint (HTTP or gRPC).

Contract::

    forwarder = Forwarder("http://127.0.0.1:4318/v1/traces", redactor=redactor, counters=c)
    forwarder = Forwarder("http://tempo:4317", protocol=ForwardProtocol.GRPC, redactor=redactor, counters=c)
    forwarder.submit(request, item_count)   # traces or logs; never blocks the receiver; over the bound → dropped, counted
    forwarder.queued_bytes                  # what waits for the next hop (bounded by queue_bytes)
    forwarder.shutdown(timeout_s=5)         # sends what is queued within timeout_s; the rest is dropped, counted

The protocol values are ``OTEL_EXPORTER_OTLP_PROTOCOL``'s: ``http/protobuf`` (default; the URL's
path defaults to ``/v1/traces``, and logs go to the same URL with ``/v1/logs`` in its place) and
``grpc`` (``http://`` for plaintext, ``https://`` for TLS with the system's roots; the path is
ignored; logs go to ``LogsService/Export`` on the same target).

The payload is the OTLP protobuf request as received, after (by default) it went through one
redaction step with the bundles' policy, field by field (``otel_session.redact.otlp.redact_otlp``:
every value type and key of every field, slot values as the bundle hashes them), so it is never
less redacted than the bundle. The step runs on the forwarder's thread, on a copy: the receiver
only serializes. A request whose redaction fails is not forwarded (counted, logged).
``redactor=None`` forwards the raw payload (opt-in); ``text_redactor=redactor.text`` is the older
spelling of ``redactor=redactor``.
Retryable answers (HTTP 429/502/503/504, gRPC UNAVAILABLE/RESOURCE_EXHAUSTED/DEADLINE_EXCEEDED/
ABORTED, connection errors) are retried with backoff, honouring ``Retry-After``; what finally fails
is counted as ``forward_failed`` and logged, never silent; each repeated attempt counts
``forward_retried``.

The queue is bounded by bytes (``queue_bytes``, the serialized requests waiting; default
:data:`DEFAULT_QUEUE_BYTES`), not by a count of requests: 512 requests of up to 16 MiB each allowed
8 GiB. A request that would take the queue over the bound is not queued: its forward copy is
dropped, counted (``forward_dropped`` / ``log_records_forward_dropped``, and as refused for reason
``forward_queue_full``) and logged at WARNING, rate-limited. Its bundle is not affected: the
receiver only serializes and queues, so local bundles never wait on the next hop.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from enum import Enum

import grpc

from otel_session.collector.otlp import ExportRequest, Signal
from otel_session.collector.counters import Counters, Refused
from otel_session.core.log import get_logger, log_setting
from otel_session.redact import Redactor
from otel_session.redact.otlp import redact_otlp

__all__ = ["DEFAULT_QUEUE_BYTES", "ForwardProtocol", "Forwarder", "forward_url", "grpc_target"]

logger = get_logger(__name__)

_RETRYABLE = frozenset({429, 502, 503, 504})
_RETRYABLE_GRPC = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
})
_GRPC_EXPORTS = {
    Signal.TRACES: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    Signal.LOGS: "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
_COUNTERS = {
    Signal.TRACES: ("forwarded", "forward_failed"),
    Signal.LOGS: ("log_records_forwarded", "log_records_forward_failed"),
}
_DROPPED = {Signal.TRACES: ("forward_dropped", Refused.SPAN), Signal.LOGS: ("log_records_forward_dropped", Refused.LOG_RECORD)}
_MAX_ATTEMPTS = 5
_TIMEOUT_S = 10.0

DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
"""Serialized requests waiting for the next hop, at most (``OTEL_SESSION_FORWARD_QUEUE_BYTES``)."""
QUEUE_FULL = "forward_queue_full"
"""The refusal reason of a forward copy dropped at the queue's bound."""


class ForwardProtocol(str, Enum):
    """How forwarded requests travel (the values of ``OTEL_EXPORTER_OTLP_PROTOCOL``)."""

    HTTP_PROTOBUF = "http/protobuf"
    GRPC = "grpc"


class _Sent(Enum):
    SENT = "sent"
    RETRY = "retry"
    REFUSED = "refused"


def grpc_target(url: str) -> tuple[str, bool]:
    """``(host:port, tls)`` of an OTLP/gRPC URL such as ``http://tempo:4317``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--forward with grpc needs http://HOST:PORT (plaintext) or https://HOST:PORT, got {url!r}")
    return f"{parts.hostname}:{parts.port or 4317}", parts.scheme == "https"


def forward_url(url: str, signal: Signal = Signal.TRACES) -> str | None:
    """Where ``signal`` goes for the ``--forward`` URL ``url`` (only http(s) is accepted).

    The traces URL is ``url``, with ``/v1/traces`` added when it names only a host. Logs go to
    ``/v1/logs`` in place of its ``/v1/traces``; a URL with another path has no logs URL (None).
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--forward needs an http(s) OTLP/HTTP URL, got {url!r}")
    path = parts.path
    if path in ("", "/"):
        path = signal.path
    elif signal is Signal.LOGS:
        if not path.endswith(Signal.TRACES.path):
            return None
        path = path.removesuffix(Signal.TRACES.path) + signal.path
    return urllib.parse.urlunsplit(parts._replace(path=path))


class Forwarder:
    """Posts OTLP/HTTP protobuf requests to one endpoint from a background thread."""

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor | None = None,
        text_redactor: Callable[[str], str] | None = None,
        counters: Counters,
        protocol: ForwardProtocol | str = ForwardProtocol.HTTP_PROTOBUF,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self.protocol = ForwardProtocol(protocol)
        self._channel: grpc.Channel | None = None
        if self.protocol is ForwardProtocol.GRPC:
            target, tls = grpc_target(url)
            self.url = f"{'https' if tls else 'http'}://{target}"
            self._channel = (
                grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)
            )
            self._exports = {
                signal: self._channel.unary_unary(method, request_serializer=None, response_deserializer=None)
                for signal, method in _GRPC_EXPORTS.items()
            }
            self._send = self._send_grpc
        else:
            self.url = forward_url(url)
            self._urls = {signal: forward_url(url, signal) for signal in Signal}
            if self._urls[Signal.LOGS] is None:
                logger.warning("logs are not forwarded: %s does not end in /v1/traces, so it has no /v1/logs", log_setting(url))
            self._send = self._send_http
        if redactor is None and text_redactor is not None:
            redactor = getattr(text_redactor, "__self__", None)
            if not isinstance(redactor, Redactor):
                raise TypeError("text_redactor must be a Redactor's text method; pass redactor=")
        self.redacting = redactor is not None
        self._redactor = redactor
        self._counters = counters
        self.queue_bytes = queue_bytes
        self._queued_bytes = 0
        self._bytes_lock = threading.Lock()
        self._deadline: float | None = None  # set by shutdown: no retry waits past it
        self._abandoned = False  # set when shutdown's time is up: what is still queued is dropped
        self._queue: queue.SimpleQueue[tuple[Signal, bytes, int] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="otel-session-forwarder", daemon=True)
        self._thread.start()

    def submit(self, request: ExportRequest, item_count: int) -> None:
        """Queue ``request`` (redacted on the forwarder's thread unless raw forwarding was chosen;
        ``request`` itself is left as it is). ``item_count`` is its spans or log records, for the
        counters."""
        signal = Signal.of(request)
        failed = _COUNTERS[signal][1]
        if self.protocol is ForwardProtocol.HTTP_PROTOBUF and self._urls[signal] is None:
            self._counters.add(failed, item_count)
            return
        size = request.ByteSize()  # checked before serializing: a dropped copy is never made
        with self._bytes_lock:
            queued = self._deadline is None and self._queued_bytes + size <= self.queue_bytes
            if queued:
                self._queued_bytes += size
        if queued:
            body = request.SerializeToString()
            self._queue.put((signal, body, item_count))
        else:
            self._drop(signal, item_count, QUEUE_FULL if self._deadline is None else "forwarder_stopped")

    @property
    def queued_bytes(self) -> int:
        """Bytes of serialized requests waiting for the next hop (at most ``queue_bytes``)."""
        with self._bytes_lock:
            return self._queued_bytes

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Send what is queued within ``timeout_s`` (no retry waits past it) and stop the thread;
        what is still queued then is dropped and counted. Idempotent; returns within about
        ``timeout_s`` plus one attempt's timeout even if the next hop never answers."""
        if self._deadline is not None:
            return
        self._deadline = time.monotonic() + timeout_s
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._abandoned = True
            while (item := self._take_nowait()) is not None:
                self._drop(item[0], item[2], "forwarder_stopped")
            self._queue.put(None)  # the end, for the thread once its attempt returns
        if self._channel is not None:
            self._channel.close()

    def _take_nowait(self) -> tuple[Signal, bytes, int] | None:
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is not None:
            self._release(len(item[1]))
        return item

    def _release(self, size: int) -> None:
        with self._bytes_lock:
            self._queued_bytes -= size

    def _drop(self, signal: Signal, item_count: int, reason: str) -> None:
        counter, what = _DROPPED[signal]
        self._counters.add(counter, item_count)
        self._counters.refuse(what, reason, item_count)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            signal, body, item_count = item
            self._release(len(body))
            if self._abandoned:
                self._drop(signal, item_count, "forwarder_stopped")
                continue
            forwarded, failed = _COUNTERS[signal]
            redacted = self._redacted(signal, body)
            self._counters.add(forwarded if redacted is not None and self._post(signal, redacted) else failed, item_count)

    def _redacted(self, signal: Signal, body: bytes) -> bytes | None:
        """``body`` through the bundles' redaction (as it is when forwarding raw); None when the
        redaction failed: such a request is never sent."""
        if self._redactor is None:
            return body
        try:
            request = signal.request_type.FromString(body)
            redact_otlp(request, self._redactor)
            return request.SerializeToString()
        except Exception:  # noqa: BLE001 - a request that cannot be redacted is not forwarded
            logger.exception("a %s request could not be redacted; it is not forwarded", signal.value)
            return None

    def _post(self, signal: Signal, body: bytes) -> bool:
        """Send one request, retrying what the next hop says may be retried."""
        delay = 0.2
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            outcome, wait = self._send(signal, body, attempt)
            if outcome is _Sent.SENT:
                return True
            if outcome is _Sent.REFUSED:
                return False
            pause = min(wait if wait is not None else delay, 5.0)
            if attempt == _MAX_ATTEMPTS or (self._deadline is not None and time.monotonic() + pause > self._deadline):
                break
            time.sleep(pause)
            delay *= 2
            self._counters.add("forward_retried")
        logger.error("forward to %s failed after %d attempt(s)", log_setting(self.url), attempt)
        return False

    def _attempt_timeout(self) -> float:
        """One attempt's timeout: never past the shutdown's deadline."""
        if self._deadline is None:
            return _TIMEOUT_S
        return max(0.1, min(_TIMEOUT_S, self._deadline - time.monotonic()))

    def _send_http(self, signal: Signal, body: bytes, attempt: int) -> tuple[_Sent, float | None]:
        url = self._urls[signal]
        request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(request, timeout=self._attempt_timeout()) as response:
                response.read()
            return _Sent.SENT, None
        except urllib.error.HTTPError as exc:
            if exc.code not in _RETRYABLE:
                logger.error("forward to %s refused: HTTP %d %s", log_setting(url), exc.code, self._answer(exc.read()[:200]))
                return _Sent.REFUSED, None
            retry_after = exc.headers.get("Retry-After")
            return _Sent.RETRY, float(retry_after) if retry_after and retry_after.isdigit() else None
        except (urllib.error.URLError, OSError) as exc:
            logger.warning("forward to %s failed (attempt %d): %s", log_setting(url), attempt, exc)
            return _Sent.RETRY, None

    def _send_grpc(self, signal: Signal, body: bytes, attempt: int) -> tuple[_Sent, float | None]:
        try:
            self._exports[signal](body, timeout=self._attempt_timeout())
            return _Sent.SENT, None
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code not in _RETRYABLE_GRPC:
                details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                logger.error("forward to %s refused: %s %s", log_setting(self.url), code, self._answer(details or ""))
                return _Sent.REFUSED, None
            logger.warning("forward to %s failed (attempt %d): %s", log_setting(self.url), attempt, code)
            return _Sent.RETRY, None

    def _answer(self, answer: bytes | str) -> str:
        """The next hop's error text for a log line: it may echo what was sent, so it is redacted
        (left out when forwarding raw, where there is no redactor)."""
        text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
        if self._redactor is None:
            return f"({len(text)} characters)"
        return self._redactor.text(text)
