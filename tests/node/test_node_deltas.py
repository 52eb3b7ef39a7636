"""Node.js apps export to a real ``otel-session collect`` over OTLP/HTTP (protobuf and JSON): the
Vercel AI SDK (``ai`` 7 + ``@ai-sdk/otel``) and openai-node, streaming from the mock LLM on
loopback. With ``js/otel-session`` their bundles hold every streamed delta, in order, redacted by
the collector; without it (a plain AI SDK app) the same conversation has no delta at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_session.bundle.read import BundleRead
from otel_session.replay.facts import build_session_facts

pytestmark = pytest.mark.slow

EMAIL = "canary.jane.doe@example.com"
CARD = "4111 1111 1111 1111"
PROMPTS = ["hello there, what time is it", f"my email is {EMAIL} and my card {CARD} thanks"]


def app(run_node, collect, llm, client: str, protocol: str, session: str, prompts: list[str], *,
        tool: bool = False, stop_after: int | None = None) -> dict[str, Any]:
    options = {"client": client, "protocol": protocol, "traces": collect.traces_url, "llm": llm.base_url,
               "session": session, "prompts": prompts, "tool": tool, "stopAfter": stop_after}
    return run_node("chat_app.mjs", json.dumps(options))


def assistant_messages(bundle: BundleRead) -> list[tuple[list[str], str]]:
    """Each assistant message of the run: (its text deltas in journal order, its final text)."""
    roles = {e["message_id"]: e["payload"]["role"] for e in bundle.events if e["type"] == "message_started"}
    found: dict[str, tuple[list[str], str]] = {}
    for event in bundle.events:
        message_id = event.get("message_id")
        if roles.get(message_id) != "assistant":
            continue
        deltas, text = found.setdefault(message_id, ([], ""))
        if event["type"] == "assistant_delta" and event["payload"]["kind"] == "text":
            assert event["payload"]["index"] == 0
            deltas.append(event["payload"]["delta"])
        elif event["type"] == "message_finished":
            text = "".join(block["text"] for block in event["payload"]["content"] if block["kind"] == "text")
            found[message_id] = (deltas, text)
    return list(found.values())


def verified(bundle: BundleRead) -> None:
    done = subprocess.run([str(Path(sys.executable).with_name("otel-session")), "verify", str(bundle.path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def all_bytes(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


@pytest.mark.parametrize("protocol", ["proto", "json"])
@pytest.mark.parametrize("client", ["ai-sdk", "openai"])
def test_every_streamed_delta_is_recorded_in_order_and_redacted(run_node, collect, llm, client, protocol):
    printed = app(run_node, collect, llm, client, protocol, "node-chat-1", PROMPTS)
    (bundle,) = collect.sealed()
    assert (bundle.session_id, bundle.run_id) == ("node-chat-1", printed["runId"])
    verified(bundle)
    assert printed["stats"]["errors"] == 0

    first, second = assistant_messages(bundle)
    # Each delta the app streamed, in order, is one record; the reply is the deltas joined.
    assert first == (printed["turns"][0], "You said: hello there, what time is it")
    deltas, text = second
    assert len(deltas) == len(printed["turns"][1])
    assert "".join(deltas) == text == "You said: my email is [email] and my card [card] thanks"
    assert EMAIL.encode() not in all_bytes(collect.root)
    assert CARD.encode() not in all_bytes(collect.root) and b"4111" not in all_bytes(collect.root)

    facts = build_session_facts(bundle)
    assert [(turn["ask"], turn["reply"]) for turn in facts["turns"]] == [
        ("hello there, what time is it", "You said: hello there, what time is it"),
        ("my email is [email] and my card [card] thanks", "You said: my email is [email] and my card [card] thanks"),
    ]
    assert all(turn["time_to_first_token_ms"] is not None for turn in facts["turns"])


def test_a_plain_ai_sdk_app_records_its_turns_without_deltas(run_node, collect, llm):
    """Today's behaviour without the package: messages and turns, no delta, no time to first token."""
    printed = app(run_node, collect, llm, "ai-sdk-plain", "proto", "node-plain", PROMPTS)
    (bundle,) = collect.sealed()
    assert bundle.session_id == "node-plain"
    verified(bundle)
    assert printed["stats"]["streams"] == 0
    assert [deltas for deltas, _ in assistant_messages(bundle)] == [[], []]
    facts = build_session_facts(bundle)
    assert [turn["reply"] for turn in facts["turns"]] == [
        "You said: hello there, what time is it", "You said: my email is [email] and my card [card] thanks"]
    assert all(turn["time_to_first_token_ms"] is None for turn in facts["turns"])


@pytest.mark.parametrize("client", ["ai-sdk", "openai"])
def test_a_reply_longer_than_its_span_holds_keeps_the_first_deltas_and_says_how_many_were_dropped(
        run_node, collect, llm, client):
    words = [f"w{n}" for n in range(150)]
    printed = app(run_node, collect, llm, client, "proto", "node-long", [" ".join(words)])
    (bundle,) = collect.sealed()
    verified(bundle)
    pieces = printed["turns"][0]
    assert len(pieces) == 152  # "You ", "said: ", then a piece a word
    # 128 events a span (the SDK's default), 16 of them left to the instrumentation.
    ((deltas, text),) = assistant_messages(bundle)
    assert deltas == pieces[:112]
    assert text == "You said: " + " ".join(words)
    drops = [e["payload"] for e in bundle.events if e["type"] == "upstream_drop"]
    assert drops == [{"dropped_events": 40, "dropped_attributes": 0, "span_name": "chat mock-gpt",
                      "event": "otel_session.delta"}]
    assert printed["stats"]["dropped"] == 40


@pytest.mark.parametrize("client", ["ai-sdk", "openai"])
def test_a_long_reply_the_app_leaves_early_still_says_how_many_deltas_were_dropped(run_node, collect, llm, client):
    """The app stops the reply past the span's room: the span holds no final output message, so the
    bundle keeps the reply as its deltas and an unsettled finish, and the drops counted until then
    (said on the span as they happen: an aborted call's span ends before its stream closes)."""
    words = [f"w{n}" for n in range(150)]
    printed = app(run_node, collect, llm, client, "proto", "node-left", [" ".join(words)], stop_after=130)
    (bundle,) = collect.sealed()
    verified(bundle)
    assert len(printed["turns"][0]) == 130
    ((deltas, text),) = assistant_messages(bundle)
    assert deltas == printed["turns"][0][:112]
    (finish,) = [e["payload"] for e in bundle.events if e["type"] == "message_finished" and e["message_id"].endswith("-out-0")]
    if client == "openai":  # tracedChatStream ends its span with the reply as far as the app read it
        assert finish["settled"] and text == "".join(printed["turns"][0])
    else:  # the AI SDK's aborted span holds no output message: the reply is its deltas, unsettled
        assert not finish["settled"] and finish["stop_reason"] == "incomplete" and text == "".join(deltas)
    (drop,) = [e["payload"] for e in bundle.events if e["type"] == "upstream_drop"]
    # Every piece the tap saw past the room is counted; it reads at most a part or two ahead of
    # the app, and a piece it reads once the span has ended is counted in the stats alone.
    assert drop["event"] == "otel_session.delta"
    assert 130 - 112 - 1 <= drop["dropped_events"] <= printed["stats"]["dropped"] <= 130 - 112 + 2


def test_a_streamed_tool_call_is_one_block_whose_deltas_read_as_the_final_call(run_node, collect, llm):
    printed = app(run_node, collect, llm, "ai-sdk", "json", "node-tool", ["friday please"], tool=True)
    (bundle,) = collect.sealed()
    verified(bundle)
    call_deltas = [e["payload"] for e in bundle.events if e["type"] == "assistant_delta" and e["payload"]["kind"] == "tool_call"]
    finals = [block["text"] for e in bundle.events if e["type"] == "message_finished"
              for block in e["payload"]["content"] if block["kind"] == "tool_call"]
    assert len(finals) == 1 and {d["index"] for d in call_deltas} == {0}
    assert "".join(d["delta"] for d in call_deltas) == finals[0]
    assert json.loads(finals[0])["arguments"] == {"query": "friday please"}
    assert [e["payload"]["name"] for e in bundle.events if e["type"] == "tool_execution_started"] == ["lookup"]
    ((deltas, text),) = [m for m in assistant_messages(bundle) if m[1]]
    assert deltas == printed["turns"][0] and text == "lookup says: open on friday please"


def test_hostile_stream_parts_reach_the_app_as_they_would_untapped(run_node):
    """Odd values, unknown part types and a throwing getter: the AI SDK reads the same parts (and
    fails the same way) with the tap as without it; the tap records only text and counts its failure."""
    printed = run_node("hostile_app.mjs")
    for name, case in printed["cases"].items():
        assert case["tapped"] == case["plain"], name
    assert [event["otel_session.delta.text"] for event in printed["cases"]["odd"]["events"]] == [
        "Hel", "lo", "hmm", '{"id":"c1","name":"lookup","arguments":', '{"q":"x"}', "}"]
    assert printed["cases"]["throwing"]["tapped"][-1] == ["thrown", "a hostile getter"]
    assert printed["stats"]["errors"] == 1
