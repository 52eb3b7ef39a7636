"""Every streamed chunk of the real openai client as an assistant_delta, with no code (issue 16 §2).

The otel_session instrumentor (as opentelemetry-instrument loads it) beside the official
openai-v2 instrumentor, the openai client streaming Chat Completions (sync and async) from the
mock LLM: in process the deltas are journaled live into the run, and as ``otel_session.delta``
span events they reach the collector, which journals the same deltas for the same messages. The
final content settles each message and the fold of its deltas matches it.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

import otel_session
from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.instrument.instrumentor import OtelSessionInstrumentor
from otel_session.bundle.read import BundleStatus
from otel_session.replay.reduce import replay_state

from .conftest import CANARY_EMAIL, all_bytes, sealed_bundles

openai = pytest.importorskip("openai")
openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")

GREETING = f"hello, I am {CANARY_EMAIL}"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture
def streaming(monkeypatch, make_provider, collector, tmp_path):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    provider = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True), "stream-agent")
    session_instrumentor, openai_instrumentor = OtelSessionInstrumentor(), openai_v2.OpenAIInstrumentor()
    session_instrumentor.instrument(tracer_provider=provider, bundle_dir=tmp_path / "in-process")
    openai_instrumentor.instrument(tracer_provider=provider)
    with MockLLMServer() as llm:
        yield llm
    openai_instrumentor.uninstrument()
    session_instrumentor.uninstrument()


def converse(client) -> tuple[str, str]:
    """A streamed reply and a streamed tool call, in a run: (reply text, tool call arguments)."""
    with otel_session.session("streams"), otel_session.run(agent="streamer"):
        reply = "".join(chunk.choices[0].delta.content or ""
                        for chunk in client.chat.completions.create(
                            model=MODEL, stream=True, messages=[{"role": "user", "content": GREETING}]))
        with client.chat.completions.create(model=MODEL, stream=True, tools=TOOLS,
                                            messages=[{"role": "user", "content": "friday"}]) as stream:
            arguments = "".join(call.function.arguments or "" for chunk in stream
                                for call in chunk.choices[0].delta.tool_calls or ())
    return reply, arguments


async def converse_async(client) -> tuple[str, str]:
    with otel_session.session("streams"), otel_session.run(agent="streamer"):
        reply = ""
        async for chunk in await client.chat.completions.create(
                model=MODEL, stream=True, messages=[{"role": "user", "content": GREETING}]):
            reply += chunk.choices[0].delta.content or ""
        arguments = ""
        stream = await client.chat.completions.create(model=MODEL, stream=True, tools=TOOLS,
                                                      messages=[{"role": "user", "content": "friday"}])
        async for chunk in stream:
            arguments += "".join(call.function.arguments or "" for call in chunk.choices[0].delta.tool_calls or ())
    return reply, arguments


def deltas_of(bundle) -> list[tuple[str, int, str, str]]:
    return [(e["message_id"], e["payload"]["index"], e["payload"]["kind"], e["payload"]["delta"])
            for e in bundle.events if e["type"] == "assistant_delta"]


def conversation(bundle) -> list[tuple[str, list]]:
    """(role, final content) of each message, in the order the journal starts them."""
    roles = {e["message_id"]: e["payload"]["role"] for e in bundle.events if e["type"] == "message_started"}
    finals = {e["message_id"]: e["payload"]["content"] for e in bundle.events if e["type"] == "message_finished"}
    return [(role, finals[message_id]) for message_id, role in roles.items()]


def assert_streamed(bundle) -> list[tuple[str, int, str, str]]:
    """Each streamed message starts once, its deltas come before its final content, their fold is
    that content; returns the deltas."""
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    deltas = deltas_of(bundle)
    streamed = sorted({message_id for message_id, *_ in deltas})
    assert len(streamed) == 2
    for message_id in streamed:
        records = [e for e in bundle.events if e.get("message_id") == message_id]
        assert [e["type"] for e in records].count("message_started") == 1
        assert records[0]["type"] == "message_started" and records[-1]["type"] == "message_finished"
        assert {e["type"] for e in records[1:-1]} == {"assistant_delta"}
    state = replay_state(bundle.events)
    assert not [d for d in state["diagnostics"] if d["code"] == "reconcile_mismatch"], state["diagnostics"]
    return deltas


def assert_same_on_both_paths(bundle_root, in_process_root, first_roles=("user", "assistant"), then=("user", "assistant")):
    """The collector's and the in-process bundle of a run of two streamed calls (the first
    journaling ``first_roles``, the second ``then``: a user or tool message and a reply): each reply streamed
    (``assert_streamed``), the same deltas and conversation on both; (in-process bundle, deltas)."""
    (collected,) = sealed_bundles(bundle_root)
    (in_process,) = sealed_bundles(in_process_root)
    live, shipped = assert_streamed(in_process), assert_streamed(collected)
    assert live == shipped  # the same deltas, for the same messages, on both paths
    assert conversation(in_process) == conversation(collected)  # in the same order: the question first
    assert [role for role, _ in conversation(in_process)] == [*first_roles, *then]
    return in_process, live


def expected_deltas(bundle) -> list[tuple[int, str, str]]:
    """What the mock streams, redacted: one delta per chunk (the tool call framed as its final block)."""
    finals = [e["payload"]["content"] for e in bundle.events if e["type"] == "message_finished"]
    (call_block,) = next(content for content in finals if content and content[0]["kind"] == "tool_call")
    call = json.loads(call_block["text"])
    opening = json.dumps({"id": call["id"], "name": "lookup"}, separators=(",", ":"))[:-1] + ',"arguments":'
    arguments = json.dumps(call["arguments"], separators=(",", ":"))
    middle = len(arguments) // 2
    return [(0, "text", piece) for piece in ("You ", "said: ", "hello, ", "I ", "am ", "[email]")] + [
        (0, "tool_call", opening), (0, "tool_call", arguments[:middle]), (0, "tool_call", arguments[middle:]),
        (0, "tool_call", "}")]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_streamed_chunks_are_deltas_in_process_and_through_the_collector(streaming, bundle_root, tmp_path, flavour):
    if flavour == "sync":
        reply, arguments = converse(openai.OpenAI(base_url=streaming.base_url, api_key="unused"))
    else:
        reply, arguments = asyncio.run(converse_async(openai.AsyncOpenAI(base_url=streaming.base_url, api_key="unused")))
    assert (reply, arguments) == (f"You said: {GREETING}", '{"query":"friday"}')

    in_process, live = assert_same_on_both_paths(bundle_root, tmp_path / "in-process")
    assert [delta[1:] for delta in live] == expected_deltas(in_process)
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root) + all_bytes(tmp_path / "in-process")


def test_the_tap_comes_and_goes_with_the_instrumentor(tmp_path):
    from openai import _streaming

    original = _streaming.Stream.__init__, _streaming.AsyncStream.__init__
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(bundle_dir=tmp_path)
    try:
        tapped = _streaming.Stream.__init__, _streaming.AsyncStream.__init__
        assert all(t is not o and t.__wrapped__ is o for t, o in zip(tapped, original))
    finally:
        instrumentor.uninstrument()
    assert (_streaming.Stream.__init__, _streaming.AsyncStream.__init__) == original


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_stream_the_app_closes_early_keeps_every_delta_it_read_on_both_paths(streaming, bundle_root, tmp_path, flavour):
    """The app stops after three chunks and closes the stream: openai-v2 ends the call's span in
    ``close``, so the tap is closed first and what redaction held back is released: the deltas'
    fold is the reply as far as the app read it, in process and through the collector."""
    messages = [{"role": "user", "content": GREETING}]
    read: list[str] = []
    with otel_session.session("left"), otel_session.run(agent="left"):
        if flavour == "sync":
            stream = openai.OpenAI(base_url=streaming.base_url, api_key="unused").chat.completions.create(
                model=MODEL, stream=True, messages=messages)
            while len(read) < 3:
                read += filter(None, [next(stream).choices[0].delta.content])
            stream.close()
        else:
            async def first_three() -> None:
                client = openai.AsyncOpenAI(base_url=streaming.base_url, api_key="unused")
                stream = await client.chat.completions.create(model=MODEL, stream=True, messages=messages)
                while len(read) < 3:
                    read.extend(filter(None, [(await stream.__anext__()).choices[0].delta.content]))
                closed = stream.close()  # openai-v2's wrapper: a plain call, as the app sees it
                if asyncio.iscoroutine(closed):
                    await closed
            asyncio.run(first_three())
    assert read == ["You ", "said: ", "hello, "]
    for root in (tmp_path / "in-process", bundle_root):
        (bundle,) = sealed_bundles(root)
        assert [delta for *_, delta in deltas_of(bundle)] == read
        state = replay_state(bundle.events)
        assert not [d for d in state["diagnostics"] if d["code"] == "reconcile_mismatch"], state["diagnostics"]


def test_deltas_beyond_the_span_event_limit_are_journaled_in_process_and_dropped_said_on_the_span(
        monkeypatch, collector, bundle_root, tmp_path):
    """The journal stays lossless; the span keeps what fits beside room for its instrumentor's
    events and says how many it did not take, which the collector journals as an upstream_drop."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_session.demo.mock_llm import Reply

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    words = [f"w{number}" for number in range(40)]
    provider = TracerProvider(resource=Resource.create({"service.name": "long"}), span_limits=SpanLimits(max_events=20))
    provider.add_span_processor(SimpleSpanProcessor(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)))
    session_instrumentor, openai_instrumentor = OtelSessionInstrumentor(), openai_v2.OpenAIInstrumentor()
    session_instrumentor.instrument(tracer_provider=provider, bundle_dir=tmp_path / "in-process")
    openai_instrumentor.instrument(tracer_provider=provider)
    try:
        with MockLLMServer(responder=lambda request: Reply(" ".join(words))) as llm:
            client = openai.OpenAI(base_url=llm.base_url, api_key="unused")
            with otel_session.session("long"), otel_session.run(agent="long"):
                for _ in client.chat.completions.create(model=MODEL, stream=True, messages=[{"role": "user", "content": "go"}]):
                    pass
    finally:
        openai_instrumentor.uninstrument()
        session_instrumentor.uninstrument()
        provider.shutdown()
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    (collected,) = sealed_bundles(bundle_root)
    assert "".join(delta for *_, delta in deltas_of(in_process)) == " ".join(words)
    assert len(deltas_of(in_process)) == 40 and not any(e["type"] == "upstream_drop" for e in in_process.events)
    assert len(deltas_of(collected)) == 4  # 20 events, 16 kept for the instrumentor
    (drop,) = [e["payload"] for e in collected.events if e["type"] == "upstream_drop"]
    assert (drop["dropped_events"], drop["event"]) == (36, "otel_session.delta")
    codes = [d["code"] for d in replay_state(collected.events)["diagnostics"]]
    assert "reconcile_mismatch" in codes  # the fold of what the span held is not the whole reply
    (final,) = [e for e in collected.events if e["type"] == "message_finished" and e["payload"]["content"][0]["text"].startswith("w0")]
    assert final["payload"]["content"][0]["text"] == " ".join(words)
