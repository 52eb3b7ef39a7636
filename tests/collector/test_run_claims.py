"""Run claims in a shared catalog (``catalog.claims``, ``collector.claiming``), on SQLite and PostgreSQL.

The table's rules with an injected clock; two in-process collectors sharing a catalog file: a run
sealed by one is rejected (not retried) by the other, and a collector with the root's own catalog
has no claims at all. (Two processes, kill -9 and the exporter's retry: tests/scaleout.)
"""

from __future__ import annotations

import http.client
import itertools
from pathlib import Path

import orjson
import pytest

from otel_session.catalog.claims import ClaimState, ClaimTable
from otel_session.collector.claiming import RunClaims
from otel_session.collector.counters import Counters, Overloaded
from otel_session.collector.server import Collector
from otel_session.core.journal import run_id_from_trace_id
from otel_session.testing import wait_for
from tests.catalog.conftest import postgres  # noqa: F401 - the session's PostgreSQL server
from tests.catalog.test_sync import _trace_request

_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    server = request.getfixturevalue("postgres")
    if isinstance(server, str):
        pytest.skip(f"no PostgreSQL server here: {server}")
    return server.create_database(f"claims_{next(_databases)}")


def test_a_run_is_held_by_one_owner_until_its_lease_runs_out_then_taken_over(shared_url: str):
    a = ClaimTable(shared_url, owner="host-a:/bundles", collector="a:1")
    b = ClaimTable(shared_url, owner="host-b:/bundles", collector="b:1")
    try:
        assert a.claim(["run-1"], now=100, lease_s=10)["run-1"].owner == "host-a:/bundles"
        held = b.claim(["run-1"], now=105, lease_s=10)["run-1"]
        assert (held.owner, held.state, held.taken_from) == ("host-a:/bundles", ClaimState.OPEN, None)
        assert a.renew(now=108, lease_s=10) == 1  # lease until 118
        assert b.claim(["run-1"], now=115, lease_s=10)["run-1"].owner == "host-a:/bundles"
        taken = b.claim(["run-1"], now=119, lease_s=10)["run-1"]  # A renewed no more: gone
        assert (taken.owner, taken.taken_from) == ("host-b:/bundles", "host-a:/bundles")
        assert a.renew(now=120, lease_s=10) == 0
        assert b.release(["run-1"], now=121) == 1
        sealed = a.claim(["run-1"], now=500, lease_s=10)["run-1"]  # long after: still B's, sealed
        assert (sealed.owner, sealed.state) == ("host-b:/bundles", ClaimState.SEALED)
        again = ClaimTable(shared_url, owner="host-a:/bundles", collector="a:2")  # A restarted on its root
        assert again.claim(["run-2"], now=100, lease_s=10)["run-2"].owner == "host-a:/bundles"
        assert again.claim(["run-1", "run-2"], now=101, lease_s=10)["run-2"].collector == "a:2"
        again.close()
    finally:
        a.close()
        b.close()


def test_only_a_runs_first_batch_asks_the_catalog_and_a_held_run_is_refused_retryably(shared_url: str):
    asked: list[list[str]] = []

    class Counting(ClaimTable):
        def claim(self, run_ids, **kwargs):
            asked.append(sorted(run_ids))
            return super().claim(run_ids, **kwargs)

    other = ClaimTable(shared_url, owner="host-o:/secret/root", collector="o:1")
    other.claim([run_id_from_trace_id(2)], now=1_000, lease_s=60)
    claims = RunClaims(lambda: Counting(shared_url, owner="me", collector="m:1"), owner="me", lease_s=60,
                       counters=(counters := Counters()), clock=lambda: 1_000.0)
    try:
        for _ in range(3):
            assert claims.check([1]) == frozenset()
        assert asked == [[run_id_from_trace_id(1)]]
        with pytest.raises(Overloaded) as refused:
            claims.check([1, 2])
        assert refused.value.reason.value == "claimed" and "secret" not in str(refused.value)
        assert counters.snapshot()["refused_claimed"] == 1
        other.release([run_id_from_trace_id(2)], now=1_001)
        assert claims.check([2]) == frozenset({2})  # sealed by its owner: rejected, never written here
    finally:
        claims.close()
        other.close()


def _post(port: int, body: bytes) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, orjson.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_a_run_sealed_by_one_collector_is_rejected_by_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_SESSION_CATALOG", f"sqlite:///{tmp_path / 'shared.sqlite3'}")
    monkeypatch.delenv("OTEL_SESSION_ORIGIN", raising=False)
    a, b = (Collector(tmp_path / name, grpc_address=None, http_address="127.0.0.1:0", seal_after_s=0.05)
            for name in ("a", "b"))
    a.start()
    b.start()
    try:
        request = _trace_request("sealed-elsewhere")
        assert _post(a.http_port, request)[0] == 200
        wait_for(lambda: a.counters.snapshot()["runs_sealed"] == 1 and not a.claims.owned, timeout=60)
        status, answer = _post(b.http_port, request)
        assert status == 200 and int(answer["partialSuccess"]["rejectedSpans"]) == 2
        assert "already sealed" in answer["partialSuccess"]["errorMessage"]
        assert not (tmp_path / "b" / "sessions").exists()
    finally:
        a.stop()
        b.stop()


def test_a_collector_with_the_catalog_in_its_root_has_no_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OTEL_SESSION_CATALOG", raising=False)
    monkeypatch.delenv("OTEL_SESSION_ORIGIN", raising=False)
    collector = Collector(tmp_path, grpc_address=None, http_address=None)
    assert collector.claims is None and collector.sink.claims is None


def test_a_run_held_by_another_collector_is_refused_retryably_over_both_transports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import grpc

    from otel_session.collector.otlp import Signal, parse_json

    monkeypatch.setenv("OTEL_SESSION_CATALOG", f"sqlite:///{tmp_path / 'shared.sqlite3'}")
    monkeypatch.delenv("OTEL_SESSION_ORIGIN", raising=False)
    a, b = (Collector(tmp_path / name, grpc_address="127.0.0.1:0", http_address="127.0.0.1:0") for name in ("a", "b"))
    a.start()
    b.start()
    try:
        request = _trace_request("held-elsewhere")
        assert _post(a.http_port, request)[0] == 200
        with grpc.insecure_channel(f"127.0.0.1:{b.grpc_port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as refused:
                export(parse_json(request, Signal.TRACES).SerializeToString(), timeout=30)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        connection = http.client.HTTPConnection("127.0.0.1", b.http_port, timeout=30)
        connection.request("POST", "/v1/traces", body=request, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        assert (answer.status, answer.getheader("Retry-After")) == (503, "1")
        assert "one writer per run" in orjson.loads(answer.read())["message"]
        connection.close()
        assert b.counters.snapshot()["refused_claimed"] == 2
        assert not (tmp_path / "b" / "sessions").exists()
    finally:
        a.stop()
        b.stop()


def test_with_postgresql_down_recording_goes_on_and_claims_resume_when_it_returns(postgres, caplog):  # noqa: F811
    if isinstance(postgres, str):
        pytest.skip(f"no PostgreSQL server here: {postgres}")
    url = postgres.create_database(f"claims_{next(_databases)}")
    now = [1_000.0]
    claims = RunClaims(lambda: ClaimTable(url, owner="me", collector="m:1"), owner="me", lease_s=60,
                       counters=Counters(), clock=lambda: now[0])
    other = ClaimTable(url, owner="other", collector="o:1")
    try:
        assert claims.check([1]) == frozenset()
        postgres.halt()
        try:
            assert claims.check([2]) == frozenset()  # not refused: recording goes on
            claims.renew_if_due()
            assert "recording goes on" in caplog.text
        finally:
            postgres.restart()
        now[0] += 30  # past the retry period (and a renewal is due)
        claims.renew_if_due()
        assert claims.check([3]) == frozenset()
        held = other.claim([run_id_from_trace_id(n) for n in (1, 3)], now=now[0], lease_s=60)
        assert {claim.owner for claim in held.values()} == {"me"}  # both held by this collector, renewed
    finally:
        claims.close()
        other.close()


def test_a_collector_that_paused_past_its_lease_learns_at_its_renewal_which_runs_it_lost(shared_url: str):
    now = [1_000.0]
    counters = Counters()
    paused = RunClaims(lambda: ClaimTable(shared_url, owner="paused", collector="p:1"), owner="paused", lease_s=10,
                       counters=counters, clock=lambda: now[0])
    other = ClaimTable(shared_url, owner="other", collector="o:1")
    try:
        assert paused.check([1, 2]) == frozenset()
        now[0] += 11  # no renewal for longer than the lease: the other collector takes run 1 over
        assert other.claim([run_id_from_trace_id(1)], now=now[0], lease_s=10)[run_id_from_trace_id(1)].owner == "other"
        paused.renew_if_due()
        assert paused.owned == frozenset({2}) and counters.snapshot()["claims_lost"] == 1
        with pytest.raises(Overloaded):  # its next batch of run 1 is refused: the new owner records it
            paused.check([1])
    finally:
        paused.close()
        other.close()
