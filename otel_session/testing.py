"""Test helpers: record runs into a temporary bundle root and read them back.

::

    with capture_bundle() as captured:
        with otel_session.session("s"), otel_session.run(agent="a"):
            ...
    assert [e["type"] for e in captured.bundle.events][:1] == ["run_started"]
    assert captured.spans  # what an in-memory exporter received

Like structlog's ``capture_logs``: it configures recording for the block and restores the
unconfigured state afterwards (recording is shut down, bundles are sealed and read).
"""

from __future__ import annotations

import gzip
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_session.instrument._runtime import Recorder, configure
from otel_session.bundle.read import BundleRead, find_bundles, read_bundle
from otel_session.redact import RedactionPolicy
from otel_session.bundle.write import WriterLimits

__all__ = ["CapturedBundles", "OtlpHttpCapture", "bundles", "capture_bundle", "running_collectors", "wait_for"]


@dataclass
class CapturedBundles:
    """What one ``capture_bundle()`` block recorded (bundles are read when the block ends)."""

    root: Path
    exporter: InMemorySpanExporter
    recorder: Recorder
    bundles: list[BundleRead] = field(default_factory=list)

    @property
    def bundle(self) -> BundleRead:
        """The one bundle recorded (fails when there are none or several)."""
        if len(self.bundles) != 1:
            raise AssertionError(f"expected one bundle, found {len(self.bundles)} under {self.root}")
        return self.bundles[0]

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def events(self, event_type: str | None = None) -> list[dict[str, Any]]:
        """Records of the one bundle, optionally of one type."""
        return [event for event in self.bundle.events if event_type is None or event["type"] == event_type]


@contextmanager
def capture_bundle(
    root: str | os.PathLike[str] | None = None,
    *,
    redaction: RedactionPolicy | None = None,
    tracer_provider: TracerProvider | None = None,
    writer_limits: WriterLimits | None = None,
) -> Iterator[CapturedBundles]:
    """Record into ``root`` (a new temporary directory by default) with an in-memory span exporter."""
    path = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="otel-session-"))
    provider = tracer_provider or TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = configure(path, redaction or RedactionPolicy(), provider, writer_limits=writer_limits)
    captured = CapturedBundles(path, exporter, recorder)
    try:
        yield captured
    finally:
        recorder.shutdown()
        captured.bundles = sorted(
            (read_bundle(bundle) for bundle in find_bundles([path])),
            key=lambda read: ((read.manifest or {}).get("created_at", ""), read.run_id or ""),
        )


def bundles(root: Path) -> list[BundleRead]:
    """Every bundle at or below ``root``, read (none if ``root`` does not exist yet)."""
    return [read_bundle(path) for path in find_bundles([root])] if root.exists() else []


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail after ``timeout``
    (generous: a loaded machine may take many times longer than an idle one, and a pass returns at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


@contextmanager
def running_collectors(**defaults: Any) -> Iterator[Callable[..., Any]]:
    """``make(root, **options)`` starts a collector (``defaults`` overridden by ``options``);
    every one started is stopped when the block ends."""
    from otel_session.collector.server import Collector

    started: list[Collector] = []

    def make(root: Path, **options: Any) -> Collector:
        collector = Collector(root, **{**defaults, **options})
        collector.start()
        started.append(collector)
        return collector

    try:
        yield make
    finally:
        for collector in started:
            collector.stop()


class OtlpHttpCapture:
    """A loopback OTLP/HTTP endpoint that keeps every body it is sent (gzip undone): a next hop
    or an exporter's destination whose bytes a test can search. Answers ``status`` with an empty
    body; ``requests`` holds ``(path, body)`` in arrival order, ``bodies`` the bodies alone.

    ::

        with OtlpHttpCapture() as endpoint:
            exporter = OTLPSpanExporter(endpoint=f"{endpoint.url}/v1/traces")
            ...
        assert b"[email]" in b"".join(endpoint.bodies)
    """

    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, bytes]] = []
        self.bodies: list[bytes] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                capture.requests.append((self.path, body))
                capture.bodies.append(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> OtlpHttpCapture:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
