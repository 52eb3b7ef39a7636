"""Fixtures for bundle stores: one private SeaweedFS S3 server for the session (tests/s3_server.py),
a fresh bucket a test, the standard AWS variables pointing at it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from otel_session.bundle.store import S3Store
from tests.s3_server import S3Server, S3Unavailable

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server | str]:
    try:
        server = S3Server.start()
    except S3Unavailable as exc:
        yield str(exc)
        return
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server: S3Server | str, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server, with ``AWS_*`` set for boto3 (skipped, with the reason, when it cannot run here)."""
    if isinstance(s3_server, str):
        pytest.skip(f"no S3 server here: {s3_server}")
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture(scope="session")
def bucket(s3_server: S3Server | str) -> str:
    """One bucket for the session (SeaweedFS gives each bucket volumes of its own); tests keep
    apart by prefix."""
    if isinstance(s3_server, str):
        pytest.skip(f"no S3 server here: {s3_server}")
    s3_server.make_bucket("bundles")
    return "bundles"


@pytest.fixture
def store(s3: S3Server, bucket: str) -> S3Store:
    """A store on a prefix of its own; short timeouts (a paused server fails fast)."""
    return S3Store(bucket, f"team-{next(_prefixes)}/prod", timeout_s=2)


def s3_client():
    """A boto3 client of the server (from the ``AWS_*`` variables the ``s3`` fixture sets): the
    tests look at the bucket through another S3 client than the store's own."""
    import boto3

    return boto3.session.Session().client("s3")
