"""Fixtures for the framework instrumentors: the mock LLM on loopback, a clean recorder per test,
and the facts a user reads of a recorded run."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.replay.facts import build_session_facts
from otel_session.instrument._log import forget_warnings
from otel_session.bundle.read import BundleRead
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles, running_collectors, wait_for


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def example(name: str) -> ModuleType:
    """``docs/examples/<name>.py`` imported (the tests drive the graphs and agents it defines)."""
    module_name = f"docs_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # typing.get_type_hints (LangGraph's state schema) looks it up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _reset_recording() -> Iterator[None]:
    """No recorder or once-only warning leaks from one test into the next."""
    forget_warnings()
    yield
    recorder = otel_session.current_recorder()
    if recorder is not None:
        recorder.shutdown()


def turns_of(bundle: BundleRead) -> list[dict[str, Any]]:
    """The per-turn facts of ``bundle`` (what ``otel-session facts`` shows)."""
    return build_session_facts(bundle)["turns"]


def sealed_bundles(root: Path, count: int, timeout: float = 60.0) -> list[BundleRead]:
    """Wait until ``count`` bundles under ``root`` have a terminal capture; return them, oldest first."""

    def ready() -> list[BundleRead] | None:
        found = [b for b in bundles(root) if b.capture and b.capture.get("status") != "recording"]
        return found if len(found) >= count else None

    found = wait_for(ready, timeout)
    return sorted(found, key=lambda read: ((read.manifest or {}).get("created_at", ""), read.run_id or ""))


@pytest.fixture
def through_collector(tmp_path: Path) -> Iterator[Callable[[], tuple[Path, TracerProvider]]]:
    """``start()`` → (bundle root of a collector on loopback, a tracer provider exporting to it over
    OTLP/gRPC with the official exporter, configured for otel_session)."""
    providers: list[TracerProvider] = []
    with running_collectors(
        grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
        redactor=Redactor(RedactionPolicy(), key=b"frameworks-tests"),
    ) as make:

        def start() -> tuple[Path, TracerProvider]:
            root = tmp_path / "collected"
            collector = make(root)
            provider = TracerProvider(resource=Resource.create({"service.name": "framework-app"}))
            exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            providers.append(provider)
            otel_session.configure(tmp_path / "in-process", tracer_provider=provider)
            return root, provider

        yield start
        for provider in providers:
            provider.shutdown()
