"""Fixtures for the collector tests: a real collector on loopback, tracer providers, bundle helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from otel_session.collector.server import Collector

from otel_session.bundle.read import BundleRead
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles, running_collectors, wait_for

CANARY_EMAIL = "canary.jane.doe@example.com"
CANARY_CARD = "4111 1111 1111 1111"


def sealed_bundles(root: Path, count: int = 1, timeout: float = 60.0) -> list[BundleRead]:
    """Wait until ``count`` bundles under ``root`` have a terminal capture; return them all."""

    def ready() -> list[BundleRead] | None:
        found = bundles(root)
        done = [bundle for bundle in found if bundle.capture and bundle.capture.get("status") != "recording"]
        return found if len(done) >= count else None

    return wait_for(ready, timeout)  # type: ignore[return-value]


def all_bytes(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(RedactionPolicy(), key=b"collector-tests")


@pytest.fixture
def bundle_root(tmp_path: Path) -> Path:
    return tmp_path / "bundles"


@pytest.fixture
def make_collector(redactor: Redactor) -> Iterator[Callable[..., Collector]]:
    with running_collectors(
        grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2, redactor=redactor
    ) as make:
        yield make


@pytest.fixture
def collector(make_collector: Callable[..., Collector], bundle_root: Path) -> Collector:
    return make_collector(bundle_root)


@pytest.fixture
def make_provider() -> Iterator[Callable[..., TracerProvider]]:
    providers: list[TracerProvider] = []

    def make(exporter: object, service: str = "svc") -> TracerProvider:
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[arg-type]
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        provider.shutdown()
