"""The OTLP receivers (gRPC and HTTP) and the collector that owns them.

Contract::

    collector = Collector(root, grpc_address="127.0.0.1:4317", http_address="127.0.0.1:4318")
    collector.start()              # binds; collector.grpc_port / http_port are the bound ports
    collector.receiver.export(request) -> ExportTraceServiceResponse   # raises Overloaded
    collector.receiver.export_logs(request) -> ExportLogsServiceResponse
    collector.stop()               # drain, seal open runs, stop threads; idempotent; -> Stopped
                                   # (bounded: TIMED_OUT after options.shutdown_timeout_s, runs left resumable)
    collector.metrics.exposition() # Prometheus text, also GET /metrics on the OTLP/HTTP port

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

OTLP/HTTP is served by :class:`~otel_session.collector.http_receiver.HttpReceiver` (waitress; its
module has the full table, framing errors included).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from enum import Enum
from pathlib import Path
from typing import Any

import grpc
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
from otel_session.collector.counters import Refused, SubmitResult
from otel_session.collector.http_receiver import MAX_MESSAGE_BYTES, HttpReceiver, _split_address
from otel_session.collector.metrics import CollectorMetrics
from otel_session.collector.options import CollectorOptions
from otel_session.collector.otlp import (
    ExportRequest,
    OtlpDecodeError,
    Signal,
    log_events_of,
    parse_protobuf,
    spans_of,
)
from otel_session.collector.sink import BundleSink, Counters, EventRedactor, Overloaded, TooManyRequests
from otel_session.core.log import get_logger, log_setting
from otel_session.bundle.read import RunInfo, iter_runs
from otel_session.core.journal import CaptureStatus
from otel_session.bundle.write import BundleWriter, WriterLimits
from otel_session.bundle.hooks import chain_hooks
from otel_session.catalog import CatalogError, CatalogKeeper, open_catalog, writer_hooks
from otel_session.collector.storing import backlog_guard, close_locations, store_uploader
from otel_session.collector.claiming import RunClaims, open_claims, set_aside, store_guard
from otel_session.replay.indexer import seal_indexer

__all__ = [
    "SERVING_GC_THRESHOLD",
    "Collector",
    "Stopped",
    "ListenError",
    "Receiver",
    "TooManyRequests",
    "default_redactor",
    "raise_open_files_limit",
    "settle_heap_for_serving",
]

logger = get_logger(__name__)

_MAX_CONCURRENT_EXPORTS = 64
_GRPC_WORKERS = 16
_DRAIN_TIMEOUT_MS = 600_000
_CATALOG_PASS_S = 300.0
"""How often a collector's catalog keeper looks for bundles it lacks (its own runs are written as they go)."""
_SERVICES = {
    Signal.TRACES: trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    Signal.LOGS: logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}


SERVING_GC_THRESHOLD = 10_000
"""Allocations between two young collections in a process that only serves (CPython's default: 700)."""


def settle_heap_for_serving() -> None:
    """Tune the cyclic garbage collector for a process that is a collector and nothing else.

    A collector allocates a few hundred short-lived objects a span and makes almost no reference
    cycles (reference counting frees them), so with CPython's defaults about 7 % of its CPU went to
    collections that found nothing, the oldest generation's each walking every object the imports
    left (grpc, protobuf, the policy's patterns). After start-up: one collection, then
    ``gc.freeze()`` (those objects are never walked again) and a young-generation threshold of
    :data:`SERVING_GC_THRESHOLD` (cycles are still collected, in fewer, larger passes). And large
    blocks go back to the system when freed (``_fix_mmap_threshold``).
    Process-wide, so ``otel-session collect`` calls it, never :class:`Collector`: an application
    embedding a collector keeps its own settings.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(SERVING_GC_THRESHOLD, older, oldest)
    _fix_mmap_threshold()


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_MMAP_THRESHOLD_BYTES = 128 * 1024


def _fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at its 128 KiB start: blocks that large are mapped and given
    back to the system when freed. By default the threshold rises to the size of the largest block
    freed (up to 32 MiB), after which request bodies and large span attributes are carved from the
    heap and their memory stays with the process: 300 spans of 512 KiB, each freed once journaled,
    left a peak of 216 MiB instead of about 50 (issue 31 §4). No-op where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (AttributeError, OSError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return ``(before, after)``.

    Each OTLP/HTTP connection, gRPC stream and open run journal is a descriptor; the soft limit is
    often 1,024 while the hard limit allows far more. Process-wide, so ``otel-session collect``
    calls it, never :class:`Collector`.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open files limit from %d to %d: %s", soft, hard, exc)
            return soft, soft
        logger.info("open files limit raised from %d to %d", soft, hard)
    return soft, hard


def default_redactor(root: str | os.PathLike[str]) -> EventRedactor:
    """The redactor the in-process path uses: policy from the environment, key under ``root``."""
    from otel_session.redact import RedactionPolicy, Redactor, load_or_create_key

    return Redactor(RedactionPolicy.from_env(), key=load_or_create_key(root))


class Stopped(str, Enum):
    """How :meth:`Collector.stop` ended."""

    CLEAN = "clean"
    """Every run sealed, every queue drained."""
    TIMED_OUT = "timed_out"
    """The shutdown's time ran out; what was not sealed is left recording (resumable)."""
    FAILED = "failed"
    """A step of the shutdown raised (logged); what was not sealed is left recording (resumable)."""


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
            self._count_rejected(Refused.SPAN, result)
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
            self._count_rejected(Refused.LOG_RECORD, result)
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
            self.counters.refuse(Refused.REQUEST, "too_many_requests")
            raise TooManyRequests(f"more than {_MAX_CONCURRENT_EXPORTS} concurrent export requests; retry later")
        try:
            with self._refusals_counted():
                yield
        finally:
            self._slots.release()

    @contextlib.contextmanager
    def _refusals_counted(self) -> Iterator[None]:
        """A retryable refusal of the whole request, counted by its reason (an ``Overloaded`` may
        name one in ``reason``; else ``overloaded``) and let through to the transport."""
        try:
            yield
        except Overloaded as exc:
            self.counters.refuse(Refused.REQUEST, getattr(exc, "reason", "overloaded"))
            raise

    def _count_rejected(self, what: Refused, result: SubmitResult) -> None:
        for reason, count in result.rejected_by.items():
            self.counters.refuse(what, reason.value, count)


# -- gRPC ------------------------------------------------------------------------------------


def _grpc_handler(receiver: Receiver, signal: Signal) -> grpc.GenericRpcHandler:
    """``TraceService/Export`` or ``LogsService/Export`` taking raw bytes, so a malformed body
    gets INVALID_ARGUMENT."""

    def export(body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse | ExportLogsServiceResponse:
        try:
            request = parse_protobuf(body, signal)
        except OtlpDecodeError as exc:
            receiver.counters.refuse(Refused.REQUEST, "malformed")
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


# -- the collector ---------------------------------------------------------------------------


class ListenError(OSError):
    """A listener could not bind its address (in use, not local, not allowed)."""

    def __init__(self, transport: str, address: str, setting: str, flag: str, error: OSError) -> None:
        self.transport, self.address, self.setting, self.flag = transport, address, setting, flag
        reason = os.strerror(error.errno) if error.errno else str(error)
        super().__init__(error.errno, f"cannot listen for {transport} on {address} ({flag}): {reason}")

    def __str__(self) -> str:
        return self.strerror


def _check_can_listen(transport: str, address: str, setting: str, flag: str) -> None:
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
        raise ListenError(transport, address, setting, flag, exc) from None


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
        if writer_limits is None:
            writer_limits = WriterLimits(max_queue_bytes=options.max_run_queue_bytes)
        self.claims = open_claims(self.root, options, self.counters) if bundle else None
        """The runs this collector holds in a shared catalog (None with the root's own catalog)."""
        self.uploader = store_uploader(self.root, options, may_store=store_guard(self.root, self.claims)) if bundle else None
        """Sealed runs to ``--store`` (None without one); the writer's hooks close it at shutdown."""
        self.indexer = seal_indexer(self.root, store_removes_local=self.uploader is not None and not self.uploader.keep_local) \
            if bundle else None
        """Long runs' replay index, built as they seal (None when off, or when the store removes local copies)."""
        self.writer = BundleWriter(self.root, limits=writer_limits, identifier=getattr(self.redactor, "identifier", None),
                                   hooks=chain_hooks(writer_hooks(self.root), self.indexer, self.uploader) if bundle else None)
        self._catalog_keeper: CatalogKeeper | None = None
        self.sink = BundleSink(self.writer, self.redactor, options, counters=self.counters, claims=self.claims,
                               admit_run=backlog_guard(self.uploader, options))
        self.forwarder = (
            Forwarder(
                options.forward,
                text_redactor=self.redactor.text if options.forward_redacted else None,
                counters=self.counters,
                protocol=options.forward_protocol,
                queue_bytes=options.forward_queue_bytes,
            )
            if options.forward
            else None
        )
        self.receiver = Receiver(self.sink, forwarder=self.forwarder) if bundle else _ReceiveOnly(self.counters)
        self.metrics = CollectorMetrics(self.counters)
        self.metrics.gauge("open_runs", "Runs open now (recording, not sealed).", lambda: self.sink.open_run_count)
        self.metrics.gauge("forward_queue_bytes", "Bytes of requests waiting for the forward endpoint.",
                           lambda: self.forwarder.queued_bytes if self.forwarder is not None else 0)
        self._grpc_address = options.grpc_address
        self._http_address = options.http_address
        self._status_interval_s = options.status_interval_s
        self._grpc_server: grpc.Server | None = None
        self._http_server: HttpReceiver | None = None
        self._stop = threading.Event()
        self._stopped: Stopped | None = None
        self._stage = "starting"
        self._open_at_stop = "unknown number of"
        self._stop_lock = threading.Lock()
        self._timer = threading.Thread(target=self._tick, name="otel-session-sealer", daemon=True)
        self.grpc_port: int | None = None
        self.http_port: int | None = None

    def start(self) -> None:
        """Bind the listeners (``ListenError`` before anything else is touched), resume the runs a
        crashed collector left open, and start serving."""
        if self._grpc_address:
            _check_can_listen("OTLP/gRPC", self._grpc_address, "grpc_address", "--grpc")
        if self._http_address:
            _check_can_listen("OTLP/HTTP", self._http_address, "http_address", "--http")
        if isinstance(self.receiver, Receiver):  # runs a crashed collector left open continue, or end interrupted
            self.writer.remove_abandoned_builds()
            self.sink.resume_orphans(_ours(self.root, self.claims))
            self._catalog_keeper = _start_catalog_keeper(self.root)
            if self.uploader is not None:  # runs sealed before a crash and not yet stored go first
                self.uploader.start()
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
            self._http_server = HttpReceiver(
                self.receiver, self._http_address,
                header_timeout_s=self.options.http_header_timeout_s,
                connection_limit=self.options.http_connection_limit,
                metrics=self.metrics.exposition,
                on_refused=self.counters.refuse,
            )
            self._http_server.start()
            self.http_port = self._http_server.port
        self._timer.start()
        logger.info("collector listening grpc=%s http=%s root=%s", self.grpc_port, self.http_port, log_setting(str(self.root)))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` was called (or ``timeout``); True when stopped."""
        return self._stop.wait(timeout)

    def stop(self, grace_s: float = 5.0, *, timeout_s: float | None = None) -> Stopped:
        """Stop receiving, finish in-flight requests, seal every open run, drain. Idempotent.

        Bounded: returns within ``timeout_s`` (default ``options.shutdown_timeout_s``) whatever the
        disk does. When the time is up (a write blocked, a seal that cannot finish), it logs one
        WARNING line saying what is left and returns ``Stopped.TIMED_OUT``; the runs not sealed
        stay ``recording`` on disk, with every acknowledged span in their journals, and the next
        collector on this root resumes them. The caller should then end the process
        (``otel-session collect`` does, exit status 1): a thread may still be blocked in the write.
        """
        with self._stop_lock:
            if self._stopped is not None:
                return self._stopped
            self._stopped = Stopped.CLEAN
        timeout_s = self.options.shutdown_timeout_s if timeout_s is None else timeout_s
        self._stop.set()
        stopper = threading.Thread(target=self._stop_guarded, args=(min(grace_s, timeout_s / 4),),
                                   name="otel-session-stopper", daemon=True)
        stopper.start()
        stopper.join(timeout_s)
        if stopper.is_alive():
            self._stopped = Stopped.TIMED_OUT
            logger.warning(
                "shutdown did not finish within %d s (stuck %s); of the %s run(s) open when the listeners stopped, "
                "those not sealed are left recording, every acknowledged span in their journals: the next "
                "collector on %s resumes them", round(timeout_s), self._stage, self._open_at_stop, self.root,
            )
        return self._stopped

    def _stop_guarded(self, grace_s: float) -> None:
        try:
            self._stop_all(grace_s)
        except Exception:  # noqa: BLE001 - logged (redacted), and stop() says the shutdown failed
            logger.exception("shutdown failed while %s; runs not sealed are left recording for the next collector",
                             self._stage)
            self._stopped = Stopped.FAILED

    def _stop_all(self, grace_s: float) -> None:
        self._stage = "stopping the listeners"
        # A listener that fails to stop must not keep the runs from being sealed and drained below.
        if self._grpc_server is not None:
            _guarded_stop("gRPC", lambda: self._grpc_server.stop(grace_s).wait(grace_s + 1))
        if self._http_server is not None:
            _guarded_stop("HTTP", lambda: self._http_server.stop(grace_s))
        if self._timer.is_alive():
            self._timer.join(2)
        if isinstance(self.receiver, Receiver):
            self._open_at_stop = str(self.sink.open_run_count)
            self._stage = "sealing the open runs"
            sealed = self.sink.seal_all()
            if sealed:
                logger.info("sealed %d open run(s) at shutdown", len(sealed))
        if self.forwarder is not None:
            self._stage = "draining the forward queue"
            self.forwarder.shutdown(timeout_s=grace_s)
        self._stage = "draining the bundle writer"
        # Sealing rewrites each open run's journal; give the writer the time that takes (the
        # shutdown's own bound still applies).
        self.writer.shutdown(timeout_millis=_DRAIN_TIMEOUT_MS)
        close_locations(self.uploader)
        if self.claims is not None:
            self.claims.close()
        self.counters.refusal_log.flush(force=True)
        if self._catalog_keeper is not None:
            self._catalog_keeper.stop()
            self._catalog_keeper.catalog.close()
        logger.info("collector stopped: %s", self.counters.status_line())

    def _tick(self) -> None:
        interval = max(0.05, min(1.0, self.sink.seal_after_s / 4, self.sink.hold_unrouted_s / 4))
        last_status = ""
        elapsed = 0.0
        while not self._stop.wait(interval):
            try:
                if isinstance(self.receiver, Receiver):
                    self.sink.seal_quiet_runs()
                    if self.claims is not None:
                        self.claims.renew_if_due()
            except Exception:  # noqa: BLE001 - the timer must survive one bad run
                logger.exception("sealing failed")
            self.counters.refusal_log.flush()
            elapsed += interval
            if elapsed >= self._status_interval_s:
                elapsed = 0.0
                status = self.counters.status_line()
                if status != last_status:
                    logger.info("collector status: %s open_runs=%d", status, self.sink.open_run_count)
                    last_status = status


def _ours(root: Path, claims: RunClaims | None) -> list[RunInfo]:
    """The runs under ``root``, but those left recording that another collector took over since
    (its lease ran out while this root's collector was gone): those are set aside, never resumed."""
    runs = list(iter_runs(root, include_evals=True))
    left_open = {uuid.UUID(run.run_id.removeprefix("run-")).int: run for run in runs
                 if run.capture_status == CaptureStatus.RECORDING.value}
    if claims is None or not left_open:
        return runs
    taken = claims.not_ours(left_open)
    for trace_id in taken:
        moved = set_aside(root, left_open[trace_id].path)
        logger.warning("run %s was taken over by another collector while this one was gone: its part here is "
                       "set aside in %s, never resumed or stored", left_open[trace_id].run_id, moved)
    return [run for run in runs if not (run.capture_status == CaptureStatus.RECORDING.value
                                        and uuid.UUID(run.run_id.removeprefix("run-")).int in taken)]


def _start_catalog_keeper(root: Path) -> CatalogKeeper | None:
    """Catch the run catalog up with the bundles under ``root`` in the background (ones it lacks
    added, deleted ones dropped; SPEC §5.6); None when it is off or cannot be opened (logged)."""
    try:
        catalog = open_catalog(root)
    except CatalogError as exc:
        logger.warning("catalog: unusable (%s); recording goes on without it", exc)
        return None
    return CatalogKeeper(catalog, root, interval_s=_CATALOG_PASS_S).start() if catalog is not None else None


def _guarded_stop(listener: str, stop: Callable[[], object]) -> None:
    try:
        stop()
    except Exception:  # noqa: BLE001 - logged; the collector goes on to seal and drain
        logger.exception("the OTLP/%s listener did not stop cleanly", listener)


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
