"""Fixtures for the run-record tests: a writer over a temporary root, and bundle helpers."""

from __future__ import annotations

import uuid

import pytest

from otel_session.bundle.write import BundleWriter, WriterLimits

@pytest.fixture
def root(tmp_path):
    return tmp_path / "bundles"


@pytest.fixture
def make_writer(root):
    """Build writers over ``root``; every one is shut down after the test."""
    writers: list[BundleWriter] = []

    def make(**limits) -> BundleWriter:
        writer = BundleWriter(root, limits=WriterLimits(**limits) if limits else None)
        writers.append(writer)
        return writer

    yield make
    for writer in writers:
        writer.shutdown()


@pytest.fixture
def writer(make_writer):
    return make_writer()


@pytest.fixture
def run_id():
    return f"run-{uuid.uuid4()}"
