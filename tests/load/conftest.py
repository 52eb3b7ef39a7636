"""Fixtures for the load tests, which run the benchmark's workloads (``bench/load.py``) at moderate sizes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from otel_session.collector.server import Collector

from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import running_collectors

# `bench` lives at the repository root, beside `tests`; pytest's importlib mode does not add it.
_REPOSITORY = str(Path(__file__).resolve().parents[2])
if _REPOSITORY not in sys.path:
    sys.path.insert(0, _REPOSITORY)


@pytest.fixture
def make_collector() -> Iterator[Callable[..., Collector]]:
    """Start collectors on loopback (gRPC only) and stop them after the test."""
    with running_collectors(
        grpc_address="127.0.0.1:0", http_address=None, seal_after_s=0.2,
        redactor=Redactor(RedactionPolicy(), key=b"load-tests"),
    ) as make:
        yield make
