"""The per-run API reads only what it shows: sealed runs through their index (a slice of the
journal per page, checkpoints per state, facts computed once), caches bounded by bytes, and
hostile parameters refused with one clear line."""

from __future__ import annotations

import hashlib
import tracemalloc
import uuid

import orjson
import pytest

from otel_session.bundle.read import read_bundle
from otel_session.bundle.write import BundleWriter
from otel_session.replay import facts as run_facts
from otel_session.replay.facts import run_events
from otel_session.replay.index import index_path
from otel_session.replay.reduce import canonical_json, replay_state
from otel_session.viewer import create_app, run_reader
from otel_session.viewer.run_reader import RunReader
from otel_session.viewer.cache import ByteLRU

from .conftest import BASE_NS, Script, record_booking

LATEST = "/api/sessions/call-42/runs/{run}"


def _long_run(root, turns: int = 30, *, seal: bool = True):
    """A sealed run of a few thousand records (several checkpoints), through the real writer."""
    writer = BundleWriter(root)
    run = writer.open_run(session_id="long", run_id=f"run-{uuid.uuid4()}", agent="booking", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    for turn in range(turns):
        ids = {"turn_index": turn, "message_id": f"a{turn}"}
        script("turn_started", {"state": f"s{turn % 3}", "required_slots": []}, turn_index=turn)
        script("message_started", {"role": "assistant"}, **ids)
        for word in range(80):
            script("assistant_delta", {"index": 0, "kind": "text", "delta": f"w{word} "}, **ids)
        script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "done"}]}, **ids)
        script("turn_finished", {"state": f"s{(turn + 1) % 3}", "missing_required_slots": []}, turn_index=turn)
    if seal:
        run.close(run_status="ok")
        assert run.wait_sealed(60)
        writer.shutdown()
    else:
        assert writer.force_flush()
    return run, writer


@pytest.fixture
def long_run(tmp_path):
    run, _ = _long_run(tmp_path)
    app = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True})
    return tmp_path, run, app


def _url(run, tail: str) -> str:
    return f"/api/sessions/long/runs/{run.run_id}{tail}"


def test_the_byte_bounded_cache_evicts_least_recently_used_entries_only():
    cache = ByteLRU(100)
    for key in "abcd":
        cache.put(key, key.upper(), 25)
    assert cache.get("a") == "A"  # a is now the most recently used
    cache.put("e", "E", 30)  # over by 30: b and c go, a and d stay
    assert [cache.get(key) for key in "abcde"] == ["A", None, None, "D", "E"]
    assert cache.nbytes == 80 and len(cache) == 3
    cache.put("huge", "H", 101)  # larger than the bound: not kept, nothing else lost
    assert cache.get("huge") is None and len(cache) == 3


def test_a_sealed_runs_pages_are_slices_of_its_journal(long_run, monkeypatch):
    root, run, app = long_run
    client = app.test_client()
    assert client.get(_url(run, "/events?limit=5")).status_code == 200  # the first reader builds the index
    whole_reads = []
    monkeypatch.setattr(run_reader, "read_bundle", lambda path: whole_reads.append(path) or read_bundle(path))
    events = run_events(read_bundle(run.path))
    answer = client.get(_url(run, "/events?after_seq=1500&limit=100")).get_json()
    assert answer["events"] == orjson.loads(orjson.dumps([e for e in events if e["seq"] > 1500][:100]))
    assert answer["next_after_seq"] == 1600 and answer["last_seq"] == events[-1]["seq"]
    assert answer["capture_status"] == "complete" and answer["integrity"] == "complete"
    for seq in (1, 700, 2000, events[-1]["seq"]):
        body = client.get(_url(run, f"/state?seq={seq}")).data
        assert body == canonical_json(replay_state(events, seq))
    assert whole_reads == [], "no request read the whole journal again"


def test_facts_of_a_sealed_run_are_computed_once_and_read_back_by_a_fresh_viewer(long_run, monkeypatch):
    root, run, app = long_run
    first = app.test_client().get(f"/api/sessions/long/facts?run_id={run.run_id}").get_json()
    builds = []
    real = run_facts.build_session_facts
    monkeypatch.setattr(run_facts, "build_session_facts", lambda *a, **k: builds.append(1) or real(*a, **k))
    fresh = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    again = fresh.get("/api/sessions/long/facts").get_json()
    assert builds == []
    assert again["fallback_to_latest_run"] is True and first["fallback_to_latest_run"] is False
    assert {**again, "fallback_to_latest_run": False} == first
    assert first["integrity"]["capture"]["status"] == "complete"


def test_the_page_view_and_turns_of_a_sealed_run(long_run):
    root, run, app = long_run
    client = app.test_client()
    turns = client.get(_url(run, "/turns")).get_json()
    assert turns["indexed"] is True and len(turns["turns"]["rows"]) == 30 and turns["event_count"] == turns["last_seq"]
    view = client.get(_url(run, "/state?seq=2000&recent=3&through=2300")).get_json()
    assert view["base_seq"] <= 2000 and len(view["state"]["messages"]) <= 4
    assert view["omitted"]["messages"] + len(view["state"]["messages"]) == len(replay_state(run_events(read_bundle(run.path)), view["base_seq"])["messages"])


def test_a_recording_run_has_no_view_and_reads_as_before(tmp_path):
    run, writer = _long_run(tmp_path, turns=2, seal=False)
    try:
        client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True}).test_client()
        answer = client.get(_url(run, "/state?recent=5"))
        assert answer.status_code == 409 and answer.get_json()["error"] == "not_indexed"
        assert client.get(_url(run, "/turns")).get_json()["indexed"] is False
        assert client.get(_url(run, "/events")).get_json()["capture_status"] == "recording"
        assert not (tmp_path / ".index").exists()
    finally:
        writer.shutdown()


def test_an_index_that_lies_is_found_out_mid_request_and_rebuilt(long_run):
    root, run, app = long_run
    client = app.test_client()
    expected = client.get(_url(run, "/events?after_seq=1200&limit=50")).get_json()
    seek_path = index_path(root, run.path) / "seek.json"
    seek = orjson.loads(seek_path.read_bytes())
    seek.pop("digest")
    seek["offsets"] = [seek["offsets"][0]] * len(seek["offsets"])  # every slice would start at the top
    seek["digest"] = hashlib.blake2b(orjson.dumps(seek, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()
    seek_path.write_bytes(orjson.dumps(seek))
    fresh = create_app({"BUNDLE_DIR": str(root), "TESTING": True}).test_client()
    assert fresh.get(_url(run, "/events?after_seq=1200&limit=50")).get_json() == expected
    assert orjson.loads(seek_path.read_bytes())["offsets"] != seek["offsets"]  # written again, right


@pytest.mark.parametrize(
    "query",
    [
        "/events?after_seq=-1", "/events?after_seq=1e3", "/events?after_seq=%20", "/events?after_seq=9999999999999",
        "/events?limit=0", "/events?limit=10001", "/events?limit=abc", "/events?limit=%EF%BC%91",
        "/state?seq=-5", "/state?seq=0x10", "/state?seq=99999999999999", "/state?recent=0", "/state?recent=1001",
        "/state?recent=x", "/state?through=5", "/state?recent=5&through=-1", "/state?seq=5&recent=5&through=10006",
    ],
)
def test_hostile_parameters_get_a_400_with_one_clear_line(client, sample, query):
    response = client.get(LATEST.format(run=sample.latest_run) + query)
    assert response.status_code == 400
    body = response.get_json()
    assert body["error"] == "bad_parameter" and "\n" not in body["message"] and len(body["message"]) < 120


def test_the_run_cache_stays_within_its_bytes_and_answers_alike_after_eviction(sample):
    runs = [path for path in sorted((sample.root / "sessions").glob("*/run-*"))]
    assert len(runs) >= 5
    unbounded = RunReader(sample.root)
    expected = [unbounded.events(path, 3, 5).events for path in runs]
    bounded = RunReader(sample.root, cache_bytes=12_000)  # room for two runs of the five
    for _ in range(2):
        assert [bounded.events(path, 3, 5).events for path in runs] == expected
        assert 0 < bounded.cached_bytes <= 12_000
    assert unbounded.cached_bytes > 2 * 12_000


def test_a_sessions_run_list_reads_a_row_it_lacks_without_parsing_the_whole_journal(tmp_path):
    """A run the catalog has no row for (here: no catalog) is read for the session's list as the
    keeper reads it, only the records a row counts: at 1M records the whole parse held 1.5 GB."""
    run, _ = _long_run(tmp_path, turns=200)
    journal = (tmp_path / run.path / "events.ndjson").stat().st_size
    client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True, "CATALOG": "off"}).test_client()
    tracemalloc.start()
    try:
        answer = client.get("/api/sessions/long/runs")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert answer.status_code == 200 and answer.get_json()["runs"][0]["turns"] == 200
    assert peak < 3 * journal  # the whole parse: 6x the journal's bytes
