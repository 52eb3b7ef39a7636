"""The collector's settings, with their defaults and environment variables, in one place.

Contract::

    options = CollectorOptions()                 # each field: $OTEL_SESSION_<NAME>, else its default
    options = CollectorOptions(seal_after_s=2)   # explicit values win over the environment
    options = options.with_values(hold_logs_s=60, grpc_address=None)   # a copy; None disables a listener
    SETTINGS["seal_after_s"].env, .default, .help   # what the CLI and docs/collector.md show

Like the OpenTelemetry SDK's ``_default_*()`` helpers, a field left out is read from its
environment variable when the options are made; an unset or empty variable means the default.
A value that does not parse raises ``ValueError`` naming the variable (the CLI prints it).
``otel-session collect``, ``Collector`` and ``BundleSink`` all take their defaults from here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from otel_session.core.config import ENV_SPAN_RECORDS

__all__ = ["SETTINGS", "CollectorOptions", "Setting", "parse_address"]

_OFF = ("", "off", "none")


def parse_address(value: str) -> str | None:
    """``HOST:PORT``, or None for ``off`` / ``none`` / empty (the listener is disabled)."""
    return None if value.strip().lower() in _OFF else value.strip()


def _seconds(value: str) -> float:
    seconds = float(value)
    if not seconds >= 0:  # also refuses nan
        raise ValueError("must be a number of seconds >= 0")
    return seconds


def _count(value: str) -> int:
    count = int(value)
    if count < 0:
        raise ValueError("must be an integer >= 0")
    return count


def _bytes(value: str) -> int:
    """A size: bytes, or with a binary suffix (``64MiB``, ``512KiB``, ``1GiB``)."""
    text = value.strip()
    for suffix, factor in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if text.endswith(suffix):
            return _count(text[: -len(suffix)].strip()) * factor
    return _count(text)


def _protocol(value: str) -> str:
    if value not in ("http/protobuf", "grpc"):
        raise ValueError("must be http/protobuf or grpc")
    return value


def _flag(value: str) -> bool:
    return value.strip().lower() in {"true", "1", "yes", "on"}


def _not_flag(value: str) -> bool:
    return not _flag(value)


@dataclass(frozen=True)
class Setting:
    """One collector setting: its environment variable, default and what it does."""

    env: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    def from_env(self) -> Any:
        raw = os.environ.get(self.env)
        if raw is None or raw == "":
            return self.default
        try:
            return self.parse(raw)
        except ValueError as exc:
            raise ValueError(f"{self.env}={raw!r}: {exc}") from None


SETTINGS: dict[str, Setting] = {
    "grpc_address": Setting("OTEL_SESSION_GRPC_ADDRESS", "127.0.0.1:4317", parse_address,
                            "OTLP/gRPC listen address (HOST:PORT; port 0 picks one; 'off' disables)."),
    "http_address": Setting("OTEL_SESSION_HTTP_ADDRESS", "127.0.0.1:4318", parse_address,
                            "OTLP/HTTP listen address for POST /v1/traces and /v1/logs ('off' disables)."),
    "forward": Setting("OTEL_SESSION_FORWARD", None, str,
                       "Also send everything received to this OTLP endpoint (e.g. http://127.0.0.1:6006)."),
    "forward_protocol": Setting("OTEL_SESSION_FORWARD_PROTOCOL", "http/protobuf", _protocol,
                                "OTLP protocol of the forward endpoint (grpc: http://HOST:4317, or https:// for TLS)."),
    "forward_redacted": Setting("OTEL_SESSION_FORWARD_RAW", True, _not_flag,
                                "Forward payloads unredacted when true (default: redacted with the bundle policy)."),
    "forward_queue_bytes": Setting("OTEL_SESSION_FORWARD_QUEUE_BYTES", 64 * 1024 * 1024, _count,
                                   "Bytes of requests waiting for the forward endpoint, at most; past it the "
                                   "forward copy is dropped (counted forward_dropped; bundles unaffected)."),
    "http_header_timeout_s": Setting("OTEL_SESSION_HTTP_HEADER_TIMEOUT", 10.0, _seconds,
                                     "An OTLP/HTTP request's headers must be complete this long after the "
                                     "connection opened (or the request began), however slowly they trickle."),
    "http_connection_limit": Setting("OTEL_SESSION_HTTP_CONNECTION_LIMIT", 4096, _count,
                                     "Open OTLP/HTTP connections, at most; past it a new one replaces the "
                                     "connection that waited longest for its headers."),
    "shutdown_timeout_s": Setting("OTEL_SESSION_SHUTDOWN_TIMEOUT", 30.0, _seconds,
                                  "SIGTERM ends the collector within this long; runs not sealed by then are "
                                  "left recording, and the next collector on the root resumes them."),
    "seal_after_s": Setting("OTEL_SESSION_SEAL_AFTER", 10.0, _seconds,
                            "Seal a run this long after its root span arrived and nothing else did."),
    "seal_rootless_after_s": Setting("OTEL_SESSION_SEAL_ROOTLESS_AFTER", 3600.0, _seconds,
                                     "Seal a run whose root span never arrived (as interrupted) after this long quiet."),
    "hold_unrouted_s": Setting("OTEL_SESSION_HOLD_UNROUTED", 30.0, _seconds,
                               "How long spans of a trace that named no session wait for a span that does."),
    "hold_logs_s": Setting("OTEL_SESSION_HOLD_LOGS", 300.0, _seconds,
                           "How long GenAI log events wait for their span before they are counted unmatched."),
    "max_held_spans": Setting("OTEL_SESSION_MAX_HELD_SPANS", 10_000, _count,
                              "Spans waiting for their trace's session, at most (more are counted no_session)."),
    "max_held_bytes": Setting("OTEL_SESSION_MAX_HELD_BYTES", 32 << 20, _bytes,
                              "Bytes of spans waiting for their trace's session, at most (more: the trace is "
                              "recorded as a session of its own at once, counted held_spans_derived_early)."),
    "max_queued_bytes": Setting("OTEL_SESSION_MAX_QUEUED_BYTES", 64 << 20, _bytes,
                                "Bytes queued for the bundle writer over all runs, at most (more: requests are "
                                "refused retryably, 503 / UNAVAILABLE, counted refused_queue_bytes)."),
    "max_run_queue_bytes": Setting("OTEL_SESSION_MAX_RUN_QUEUE_BYTES", 16 << 20, _bytes,
                                   "Bytes queued for one run, at most; requests for a run whose queue is half full "
                                   "are refused retryably, so the bound itself (capture failed) is not reached."),
    "max_held_log_events": Setting("OTEL_SESSION_MAX_HELD_LOG_EVENTS", 10_000, _count,
                                   "Log events waiting for their spans, at most (more are counted unmatched)."),
    "store": Setting("OTEL_SESSION_STORE", None, str,
                     "Upload each run as it seals to this bundle store (s3://BUCKET[/PREFIX]; AWS_* variables "
                     "for endpoint and credentials), then remove the local copy unless --keep-local."),
    "keep_local": Setting("OTEL_SESSION_KEEP_LOCAL", False, _flag,
                          "Keep a sealed run's local copy after it was stored."),
    "claim_lease_s": Setting("OTEL_SESSION_CLAIM_LEASE", 30.0, _seconds,
                             "With a shared catalog: a run this collector records is claimed for this long, "
                             "renewed every third of it; another collector takes the run over once it ran out."),
    "max_unstored_bytes": Setting("OTEL_SESSION_MAX_UNSTORED_BYTES", 1 << 30, _bytes,
                                  "With --store: bytes of sealed runs waiting on the local disk for the store, at "
                                  "most; past it new runs are refused retryably (503 / UNAVAILABLE, counted "
                                  "refused_store_backlog) until uploads catch up."),
    "span_records": Setting(ENV_SPAN_RECORDS, False, _flag,
                            "Also journal one 'span' record per span (name, kind, times, status, parent, scope, "
                            "attributes, events, links, resource; redacted, bounded) for the viewer's span tree; "
                            "about 1.7x the CPU per span."),
    "status_interval_s": Setting("OTEL_SESSION_STATUS_INTERVAL", 10.0, _seconds,
                                 "How often the counters status line is logged (when it changed)."),
}


def _from_env(name: str) -> Callable[[], Any]:
    return SETTINGS[name].from_env


@dataclass(frozen=True)
class CollectorOptions:
    """Every collector setting (see ``SETTINGS`` for each one's variable and meaning)."""

    grpc_address: str | None = field(default_factory=_from_env("grpc_address"))
    http_address: str | None = field(default_factory=_from_env("http_address"))
    forward: str | None = field(default_factory=_from_env("forward"))
    forward_protocol: str = field(default_factory=_from_env("forward_protocol"))
    forward_redacted: bool = field(default_factory=_from_env("forward_redacted"))
    forward_queue_bytes: int = field(default_factory=_from_env("forward_queue_bytes"))
    http_header_timeout_s: float = field(default_factory=_from_env("http_header_timeout_s"))
    http_connection_limit: int = field(default_factory=_from_env("http_connection_limit"))
    shutdown_timeout_s: float = field(default_factory=_from_env("shutdown_timeout_s"))
    seal_after_s: float = field(default_factory=_from_env("seal_after_s"))
    seal_rootless_after_s: float = field(default_factory=_from_env("seal_rootless_after_s"))
    hold_unrouted_s: float = field(default_factory=_from_env("hold_unrouted_s"))
    hold_logs_s: float = field(default_factory=_from_env("hold_logs_s"))
    max_held_spans: int = field(default_factory=_from_env("max_held_spans"))
    max_held_bytes: int = field(default_factory=_from_env("max_held_bytes"))
    max_queued_bytes: int = field(default_factory=_from_env("max_queued_bytes"))
    max_run_queue_bytes: int = field(default_factory=_from_env("max_run_queue_bytes"))
    max_held_log_events: int = field(default_factory=_from_env("max_held_log_events"))
    status_interval_s: float = field(default_factory=_from_env("status_interval_s"))
    store: str | None = field(default_factory=_from_env("store"))
    keep_local: bool = field(default_factory=_from_env("keep_local"))
    claim_lease_s: float = field(default_factory=_from_env("claim_lease_s"))
    max_unstored_bytes: int = field(default_factory=_from_env("max_unstored_bytes"))
    span_records: bool = field(default_factory=_from_env("span_records"))

    def with_values(self, **values: Any) -> CollectorOptions:
        """A copy with ``values`` set (names of ``SETTINGS``)."""
        unknown = set(values) - set(SETTINGS)
        if unknown:
            raise TypeError(f"unknown collector option(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **values)
