"""``otel-session demo --once``: real processes end to end, then the bundles are checked."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from otel_session.demo.driver import PII_CANARIES
from otel_session.replay.facts import build_session_facts
from otel_session.bundle.read import BundleStatus, find_bundles, iter_runs, read_bundle

from .conftest import otel_session_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "bundles"
    logs = root.parent / "logs"
    ports = ["--log-dir", str(logs),"--viewer-port", "0", "--collector-grpc-port", "0", "--collector-http-port", "0",
             "--agent-port", "0", "--llm-port", "0"]
    done = subprocess.run(otel_session_cli("demo", "--once", "--dir", str(root), *ports),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return root, done


def _runs(root: Path, session_prefix: str):
    runs = [run for run in iter_runs(root, include_evals=True) if run.session_id.startswith(session_prefix + "-")]
    return sorted(runs, key=lambda run: run.created_at)


def test_exits_zero_with_a_summary(demo_run):
    root, done = demo_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "http://127.0.0.1:" in done.stdout
    assert f"bundles    {root}" in done.stdout
    assert "5 sessions, 7 runs: 7 complete" in done.stdout


def test_every_bundle_is_complete(demo_run):
    root, _ = demo_run
    bundles = [read_bundle(path) for path in find_bundles([root])]
    assert len(bundles) == 7
    assert {bundle.status for bundle in bundles} == {BundleStatus.COMPLETE}


def test_the_smooth_booking_is_two_runs_of_one_session(demo_run):
    root, _ = demo_run
    runs = _runs(root, "smooth-booking")
    assert len(runs) == 2 and len({run.session_id for run in runs}) == 1
    types = [event["type"] for run in runs for event in read_bundle(run.path).events]
    assert "assistant_delta" in types and "transition_verdict" in types and "guard_evaluated" in types


def test_every_span_the_agent_sent_is_in_the_span_tree(demo_run):
    """The demo's collector keeps span records: every run's spans, nested by parent, with the
    attributes no other record carries (a model call's response id)."""
    root, _ = demo_run
    for path in find_bundles([root]):
        records = [event for event in read_bundle(path).events if event["type"] == "span"]
        assert records, path
        ids = {record["span_id"] for record in records}
        parents = [record["payload"]["parent_span_id"] for record in records]
        assert None in parents and {parent for parent in parents if parent is not None} <= ids, path
        calls = [record["payload"] for record in records if record["payload"]["name"].startswith("chat ")]
        assert all(isinstance(call["attributes"].get("gen_ai.response.id"), str) for call in calls), path


def test_the_repeated_ask_is_in_the_facts(demo_run):
    root, _ = demo_run
    [run] = _runs(root, "unparseable-date")
    facts = build_session_facts(read_bundle(run.path))
    asked_again = [turn["turn_index"] for turn in facts["turns"] if "date" in turn["repeated_asks"]]
    assert len(asked_again) >= 1
    assert [turn["state"] for turn in facts["turns"]][-1] == "done"


def test_every_reply_names_its_model_and_tokens(demo_run):
    """The agent's replies are model calls: facts list them with the model and the token usage."""
    root, _ = demo_run
    for path in find_bundles([root]):
        facts = build_session_facts(read_bundle(path))
        calls = [call for turn in facts["turns"] for call in turn["model_calls"]]
        assert calls and {call["model"] for call in calls} == {"mock-gpt"}, path
        assert all(call["usage"]["input_tokens"] > 0 and call["usage"]["output_tokens"] > 0 for call in calls)
        assert facts["usage_totals"]["output_tokens"] == sum(call["usage"]["output_tokens"] for call in calls)


def test_the_failing_tool_is_an_error(demo_run):
    root, _ = demo_run
    finished = [
        event["payload"]
        for run in _runs(root, "failing-tool")
        for event in read_bundle(run.path).events
        if event["type"] == "tool_execution_finished"
    ]
    assert [payload["status"] for payload in finished] == ["error", "ok"]
    assert "timed out" in finished[0]["error"]


def test_the_eval_run_is_under_evals_only(demo_run):
    root, _ = demo_run
    [run] = _runs(root, "eval-smooth-booking")
    assert run.kind == "eval" and run.eval_id == "booking-regression"
    assert (root / "evals" / "booking-regression") in run.path.parents
    assert not any(r.session_id.startswith("eval-") for r in iter_runs(root))  # not in the live index


def test_booking_slots_are_readable_and_the_contact_is_hashed(demo_run):
    root, _ = demo_run
    [run] = _runs(root, "personal-data")
    bundle = read_bundle(run.path)
    assert bundle.manifest["service"] == "booking-agent"
    writes = {e["payload"]["slot"]: e["payload"]["value"] for e in bundle.events if e["type"] == "slot_write"}
    assert writes["date"] == "2026-12-24" and writes["party_size"] == 3
    assert writes["contact"].startswith("hmac-sha256:")


def test_no_personal_data_anywhere_the_demo_wrote(demo_run):
    """Bundles, the agent's own in-process journal and every process log."""
    root, _ = demo_run
    assert _runs(root, "personal-data"), "the personal-data conversation was recorded"
    assert list((root.parent / "logs" / "agent-journal").rglob("events.ndjson"))
    canaries = [c.encode() for c in PII_CANARIES] + [b"415 555", b"4155550199", b"jane.canary"]
    for path in root.parent.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [c for c in canaries if c in data], path


def _streamed_texts(root: Path) -> list[str]:
    texts: dict[tuple[str, str, int], list[str]] = {}
    for path in find_bundles([root]):
        for event in read_bundle(path).events:
            if event["type"] == "assistant_delta":
                key = (path.name, event["message_id"], event["payload"]["index"])
                texts.setdefault(key, []).append(event["payload"]["delta"])
    return ["".join(parts) for parts in texts.values()]


def test_no_personal_data_in_the_concatenated_stream(demo_run):
    """The mock LLM echoes the caller word by word: a phone number spans several deltas."""
    root, _ = demo_run
    area_and_exchange = "415 555"  # the first digits of the canary phone number
    assert not [text for text in _streamed_texts(root) if area_and_exchange in text]


def test_a_busy_port_is_refused_with_a_clear_message(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        done = subprocess.run(
            otel_session_cli("demo", "--once", "--dir", str(tmp_path), "--viewer-port", str(busy)),
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 1
    assert f"port {busy} on 127.0.0.1 (viewer) is already in use" in done.stderr
    assert "--viewer-port" in done.stderr
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def test_the_command_it_prints_runs_as_printed(demo_run):
    """In the shell that ran the demo (its PATH, its directory), with no virtualenv activated."""
    root, done = demo_run
    (hint,) = [line for line in done.stdout.splitlines() if "why did it ask twice?" in line]
    command = hint.split("?", 1)[1].strip()
    ran = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, (command, ran.stderr)
    assert "date" in ran.stdout
