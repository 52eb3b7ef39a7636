"""The tests' own servers (PostgreSQL, SeaweedFS) start when a port picked free for them is taken by
another process before they bind it: they start again on new ports."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests import pg_server, s3_server

pytestmark = pytest.mark.slow


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another process holds (listening), as one that took a port picked free."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _taken_at(position: int, taken: int, picks: Callable[[], int]) -> Callable[[], int]:
    """``picks`` whose answer number ``position`` (from 0) is ``taken``: free when picked, taken since."""
    answers = itertools.chain((picks() for _ in range(position)), [taken], iter(picks, None))
    return lambda: next(answers)


def _started(start: Callable[[], Any], unavailable: type[Exception], what: str) -> Any:
    """The server ``start`` gives; the test skipped when none can run here (a port still taken fails it)."""
    try:
        return start()
    except unavailable as exc:
        if "already in use" in str(exc).lower():
            raise
        pytest.skip(f"no {what} server here: {exc}")


def test_postgres_starts_on_a_new_port_when_the_one_picked_was_taken(taken_port, monkeypatch):
    monkeypatch.setattr(pg_server, "_free_port", _taken_at(0, taken_port, pg_server._free_port))
    server = _started(pg_server.PostgresServer.start, pg_server.PostgresUnavailable, "PostgreSQL")
    try:
        assert server.port != taken_port
        import psycopg

        with psycopg.connect(server.url().replace("+psycopg", "")) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.stop()


@pytest.mark.parametrize("taken", ["s3", "master"])
def test_seaweedfs_starts_on_new_ports_when_one_picked_was_taken(taken, taken_port, monkeypatch):
    order = ("s3", "master")  # as S3Server picks them: the gateway's port, then the master's
    monkeypatch.setattr(s3_server, "_free_port", _taken_at(order.index(taken), taken_port, s3_server._free_port))
    server = _started(s3_server.S3Server.start, s3_server.S3Unavailable, "S3")
    try:
        server.make_bucket("after-a-taken-port")
        assert server.port != taken_port
    finally:
        server.stop()
