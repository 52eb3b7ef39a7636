"""Every streamed event of the real anthropic client as an assistant_delta, with no code (issue 16 §2).

The otel_session instrumentor beside the anthropic SDK's own tracing (its ``anthropic.messages.create``
call span, current while the stream is made; content mode on), the client streaming from the mock
LLM's ``/v1/messages`` over real HTTP, sync and async, with the ``messages.stream()`` helper and
with ``messages.create(stream=True)``: in process the deltas are journaled live into the run, and
as ``otel_session.delta`` span events they reach the collector, which journals the same deltas for
the same messages. The SDK's span settles each message with the final content (a helper's stream:
the SDK takes its output from the helper's snapshot), and the fold of the deltas matches it.
Beside OpenInference's instrumentor (whose span holds the content, the SDK's inner span none), the
deltas go to OpenInference's span, or nowhere when no span that holds the content is current.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

import otel_session
from otel_session.demo.mock_llm import MockLLMServer, Reply, ToolCall
from otel_session.instrument.instrumentor import OtelSessionInstrumentor
from otel_session.replay.reduce import replay_state

from .conftest import CANARY_CARD, CANARY_EMAIL, all_bytes, sealed_bundles
from .test_openai_streams import assert_same_on_both_paths, conversation, deltas_of

anthropic = pytest.importorskip("anthropic")

MODEL = "mock-claude"
GREETING = f"hello, I am {CANARY_EMAIL} and my card is {CANARY_CARD}"  # the card streams in four deltas
TOOLS = [{"name": "lookup", "description": "look it up", "input_schema": {"type": "object", "properties": {}}}]
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def streaming(make_provider, collector, tmp_path):
    provider = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True), "claude-agent")
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(tracer_provider=provider, bundle_dir=tmp_path / "in-process")
    with MockLLMServer() as llm:
        yield llm, {"tracer_provider": provider, "traces": {"content_mode": "content"}}
    instrumentor.uninstrument()


def converse(client) -> tuple[str, dict]:
    """A streamed reply and a streamed thought and tool call, in a run: (reply text, tool input)."""
    with otel_session.session("claude"), otel_session.run(agent="claude"):
        with client.messages.stream(model=MODEL, max_tokens=256,
                                    messages=[{"role": "user", "content": GREETING}]) as stream:
            reply = "".join(stream.text_stream)
        with client.messages.stream(model=MODEL, max_tokens=256, tools=TOOLS, thinking=THINKING,
                                    messages=[{"role": "user", "content": "friday"}]) as stream:
            for _ in stream:
                pass
            (call,) = [block for block in stream.get_final_message().content if block.type == "tool_use"]
    return reply, call.input


async def converse_async(client) -> tuple[str, dict]:
    with otel_session.session("claude"), otel_session.run(agent="claude"):
        async with client.messages.stream(model=MODEL, max_tokens=256,
                                          messages=[{"role": "user", "content": GREETING}]) as stream:
            reply = "".join([text async for text in stream.text_stream])
        async with client.messages.stream(model=MODEL, max_tokens=256, tools=TOOLS, thinking=THINKING,
                                          messages=[{"role": "user", "content": "friday"}]) as stream:
            async for _ in stream:
                pass
            (call,) = [block for block in (await stream.get_final_message()).content if block.type == "tool_use"]
    return reply, call.input


def redacted_reply(bundle) -> str:
    (text,) = [block["text"] for e in bundle.events if e["type"] == "message_finished"
               for block in e["payload"]["content"] if block["text"].startswith("You said")]
    return text


def expected_tail(bundle) -> list[tuple[int, str, str]]:
    """The second reply's deltas: the thought word by word, the tool call framed as its final block."""
    (call_block,) = [block for e in bundle.events if e["type"] == "message_finished"
                     for block in e["payload"]["content"] if block["kind"] == "tool_call"]
    call = json.loads(call_block["text"])
    opening = json.dumps({"id": call["id"], "name": "lookup"}, separators=(",", ":"))[:-1] + ',"arguments":'
    arguments = json.dumps(call["arguments"], separators=(",", ":"))
    middle = len(arguments) // 2
    return [(0, "thinking", piece) for piece in ("Thinking ", "about: ", "friday")] + [
        (1, "tool_call", opening), (1, "tool_call", arguments[:middle]), (1, "tool_call", arguments[middle:]),
        (1, "tool_call", "}")]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_streamed_events_are_deltas_in_process_and_through_the_collector(streaming, bundle_root, tmp_path, flavour):
    llm, telemetry = streaming
    if flavour == "sync":
        reply, arguments = converse(anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry))
    else:
        client = anthropic.AsyncAnthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
        reply, arguments = asyncio.run(converse_async(client))
    assert (reply, arguments) == (f"You said: {GREETING}", {"query": "friday"})

    in_process, live = assert_same_on_both_paths(bundle_root, tmp_path / "in-process")
    first, second = sorted({message_id for message_id, *_ in live}, key=[d[0] for d in live].index)
    text = [delta[1:] for delta in live if delta[0] == first]
    assert [piece for *_, piece in text[:6]] == ["You ", "said: ", "hello, ", "I ", "am ", "[email] "]
    assert {(index, kind) for index, kind, _ in text} == {(0, "text")} and len(text) > 6
    assert "".join(piece for *_, piece in text) == redacted_reply(in_process)
    assert [delta[1:] for delta in live if delta[0] == second] == expected_tail(in_process)
    assert CANARY_EMAIL.encode() not in all_bytes(bundle_root) + all_bytes(tmp_path / "in-process")
    assert CANARY_CARD.encode() not in all_bytes(bundle_root) + all_bytes(tmp_path / "in-process")


def test_a_raw_stream_whose_span_has_no_final_content_is_its_deltas_and_an_unsettled_finish(streaming, bundle_root, tmp_path):
    """``messages.create(stream=True)`` read without the helper: the SDK puts no output content on
    its span, so on both paths the reply is its deltas (journaled live in process, read from the
    span's delta events by the collector) and an unsettled finish holding their text."""
    llm, telemetry = streaming
    client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
    with otel_session.session("raw"), otel_session.run(agent="raw"):
        events = [event.type for event in client.messages.create(
            model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "good morning"}])]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    (collected,) = sealed_bundles(bundle_root)
    for bundle in (in_process, collected):
        assert [delta for *_, delta in deltas_of(bundle)] == ["You ", "said: ", "good ", "morning"]
        ((reply_id, *_), *_) = deltas_of(bundle)
        assert [e["message_id"] for e in bundle.events if e["type"] == "message_started"].count(reply_id) == 1
        (finish,) = [e["payload"] for e in bundle.events if e["type"] == "message_finished" and e["message_id"] == reply_id]
        assert (finish["settled"], finish["stop_reason"]) == (False, "incomplete")
        assert finish["content"] == [{"index": 0, "kind": "text", "text": "You said: good morning"}]
    assert conversation(in_process) == conversation(collected)
    assert [role for role, _ in conversation(collected)] == ["user", "assistant"]


def test_a_stream_with_no_model_call_span_current_is_untouched(tmp_path):
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(bundle_dir=tmp_path)
    try:
        with MockLLMServer() as llm:
            client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=False)
            with otel_session.session("plain"), otel_session.run(agent="plain"):
                stream = client.messages.create(model=MODEL, max_tokens=64, stream=True,
                                                messages=[{"role": "user", "content": "hi"}])
                assert "_iterator" not in vars(stream)  # the SDK's own, made on first use
                texts = [event.delta.text for event in stream if event.type == "content_block_delta"]
    finally:
        instrumentor.uninstrument()
    assert texts == ["You ", "said: ", "hi"]
    (bundle,) = sealed_bundles(tmp_path)
    assert deltas_of(bundle) == []


def test_the_tap_and_the_call_span_hook_come_and_go_with_the_instrumentor(tmp_path):
    from anthropic import _base_client, _streaming

    def hooks():
        return (_streaming.Stream.__init__, _streaming.AsyncStream.__init__, _streaming.Stream.close,
                _streaming.AsyncStream.close, _base_client.start_api_call_span)

    original = hooks()
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(bundle_dir=tmp_path)
    try:
        assert all(hook is not before and hook.__wrapped__ is before for hook, before in zip(hooks(), original))
    finally:
        instrumentor.uninstrument()
    assert hooks() == original


def test_the_new_inputs_journaled_live_are_the_ones_the_sdks_span_gives(streaming, bundle_root, tmp_path):
    """A system prompt, a tool round trip: the inputs read from each request (system first, then
    after the last assistant message only the tool result) are those the collector reads off the
    span, in the same places, so the span's own copies are left out in process."""
    llm, telemetry = streaming
    client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
    asked = [{"role": "user", "content": [{"type": "text", "text": "weather in Oslo"}]}]
    with otel_session.session("tools"), otel_session.run(agent="tools"):
        with client.messages.stream(model=MODEL, max_tokens=64, system="Be brief.", tools=TOOLS, messages=asked) as stream:
            (call,) = stream.get_final_message().content
        answered = [*asked, {"role": "assistant", "content": [call]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}]
        with client.messages.stream(model=MODEL, max_tokens=64, system="Be brief.", tools=TOOLS,
                                    messages=answered) as stream:
            assert stream.get_final_text() == "lookup says: sunny"
    in_process, _ = assert_same_on_both_paths(bundle_root, tmp_path / "in-process", ["system", "user", "assistant"],
                                              then=("tool", "assistant"))
    (system, question, call_message, result, reply) = conversation(in_process)
    assert (system, question) == (("system", [{"index": 0, "kind": "text", "text": "Be brief."}]),
                                  ("user", [{"index": 0, "kind": "text", "text": "weather in Oslo"}]))
    # The tool result the API sends back in a user message is a tool message (both paths, as for Converse).
    assert [block["kind"] for block in call_message[1]] == ["tool_call"] and result[0] == "tool"
    assert json.loads(result[1][0]["text"]) == [{"type": "text", "text": "sunny"}]
    assert reply == ("assistant", [{"index": 0, "kind": "text", "text": "lookup says: sunny"}])


def test_a_tool_call_with_no_input_fragment_streams_its_start_input(streaming, bundle_root, tmp_path):
    """The API sends an empty input as one empty ``input_json_delta``: the block's start ``input`` is
    its arguments, so the deltas still fold to the final block."""
    llm, telemetry = streaming
    with MockLLMServer(responder=lambda request: Reply(None, (ToolCall("call_now", "now", "{}"),), "tool_calls")) as bare:
        client = anthropic.Anthropic(base_url=bare.root_url, api_key="unused", open_telemetry=telemetry)
        with otel_session.session("bare"), otel_session.run(agent="bare"):
            with client.messages.stream(model=MODEL, max_tokens=64, tools=TOOLS,
                                        messages=[{"role": "user", "content": "what time"}]) as stream:
                assert [block.input for block in stream.get_final_message().content] == [{}]
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    assert [delta for *_, delta in deltas_of(in_process)] == ['{"id":"toolu_now","name":"now","arguments":', "{}", "}"]
    assert not [d for d in replay_state(in_process.events)["diagnostics"] if d["code"] == "reconcile_mismatch"]


class _OddEvents(BaseHTTPRequestHandler):
    """A Messages stream with a ``text_delta`` whose text is a list between two good ones."""

    EVENTS = [{"type": "message_start", "message": {"id": "msg_odd", "type": "message", "role": "assistant", "model": MODEL,
                                                     "content": [], "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello "}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ["not", "text"]}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "world"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
              {"type": "message_stop"}]

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b"".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in self.EVENTS)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_event_the_tap_cannot_read_is_a_capture_failure_and_the_app_reads_on(streaming, tmp_path, caplog):
    from otel_session.instrument._log import forget_warnings

    forget_warnings()  # said once a process: said again here
    _, telemetry = streaming
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OddEvents)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{server.server_address[1]}", api_key="unused",
                                     open_telemetry=telemetry)
        with otel_session.session("odd"), otel_session.run(agent="odd"):
            events = [event.type for event in client.messages.create(
                model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "hi"}])]
    finally:
        server.shutdown()
        server.server_close()
    assert events.count("content_block_delta") == 3 and events[-1] == "message_stop"
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    assert [delta for *_, delta in deltas_of(in_process)] == ["Hello ", "world"]
    assert "a streamed chunk could not be recorded" in caplog.text


@pytest.fixture
def openinference(make_provider, collector, tmp_path):
    """OpenInference's anthropic instrumentor beside the SDK's own call spans (metadata only, their
    default): its ``messages.create`` span is current around the call and holds the content."""
    instrumentation = pytest.importorskip("openinference.instrumentation.anthropic")
    provider = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True), "oi-agent")
    session_instrumentor, anthropic_instrumentor = OtelSessionInstrumentor(), instrumentation.AnthropicInstrumentor()
    session_instrumentor.instrument(tracer_provider=provider, bundle_dir=tmp_path / "in-process")
    anthropic_instrumentor.instrument(tracer_provider=provider)
    with MockLLMServer() as llm:
        yield llm, {"tracer_provider": provider}
    anthropic_instrumentor.uninstrument()
    session_instrumentor.uninstrument()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_beside_openinference_the_deltas_go_to_its_span_not_the_sdks_inner_one(openinference, bundle_root, tmp_path,
                                                                                flavour):
    llm, telemetry = openinference
    request = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": GREETING}]}
    with otel_session.session("oi"), otel_session.run(agent="oi"):
        if flavour == "sync":
            client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
            reply = "".join(e.delta.text for e in client.messages.create(**request) if e.type == "content_block_delta")
        else:
            async def read() -> str:
                client = anthropic.AsyncAnthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
                return "".join([e.delta.text async for e in await client.messages.create(**request)
                                if e.type == "content_block_delta"])
            reply = asyncio.run(read())
    assert reply == f"You said: {GREETING}"
    (collected,) = sealed_bundles(bundle_root)
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    for bundle in (in_process, collected):
        assert [role for role, _ in conversation(bundle)] == ["user", "assistant"]  # once each: no orphan reply
        assert "".join(delta for *_, delta in deltas_of(bundle)) == redacted_reply(bundle)
        assert not [d for d in replay_state(bundle.events)["diagnostics"] if d["code"] == "reconcile_mismatch"]
    assert deltas_of(in_process) == deltas_of(collected)
    assert CANARY_CARD.encode() not in all_bytes(bundle_root) + all_bytes(tmp_path / "in-process")


def test_a_helper_stream_whose_content_no_current_span_holds_is_left_alone(openinference, bundle_root, tmp_path):
    """OpenInference's ``messages.stream`` span is not current when the helper sends the request;
    the SDK's span is, in metadata mode: deltas there would be a second reply that nothing settles."""
    llm, telemetry = openinference
    client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=telemetry)
    with otel_session.session("oi"), otel_session.run(agent="oi"):
        with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
            assert "".join(stream.text_stream) == "You said: hi"
    (in_process,) = sealed_bundles(tmp_path / "in-process")
    assert deltas_of(in_process) == []
    assert conversation(in_process) == [("user", [{"index": 0, "kind": "text", "text": "hi"}]),
                                        ("assistant", [{"index": 0, "kind": "text", "text": "You said: hi"}])]


def test_a_stream_the_app_drops_half_read_closes_its_response_at_once(streaming):
    """The SDK makes a stream's iterator on a copy of it, so that dropping the stream closes its
    response by reference counting; the tapped iterator must not make that copy hold itself."""
    import gc

    llm, tracing = streaming
    client = anthropic.Anthropic(base_url=llm.root_url, api_key="unused", open_telemetry=tracing)
    gc.disable()
    try:
        with otel_session.session("claude"), otel_session.run(agent="claude"):
            stream = client.messages.create(model=MODEL, max_tokens=64, stream=True,
                                            messages=[{"role": "user", "content": "one two three four five"}])
            assert "_iterator" in vars(stream)  # tapped
            response = stream.response
            next(stream)
            del stream
            assert response.is_closed
    finally:
        gc.enable()


def test_a_tap_that_fails_leaves_the_stream_made_and_says_so_once(caplog):
    """Whatever a tap raises (an SDK of a shape it does not know), the app's stream is made as without it."""
    from types import SimpleNamespace

    from otel_session.instrument._log import forget_warnings
    from otel_session.instrument.stream_deltas import unwrap_streams, wrap_streams

    class Stream:
        def __init__(self, body):
            self.body = body

    class AsyncStream:
        def __init__(self, body):
            self.body = body

    def broken_tap(stream):
        raise AttributeError("a shape this tap does not know")

    forget_warnings()
    originals: dict = {}
    wrap_streams(SimpleNamespace(Stream=Stream, AsyncStream=AsyncStream), broken_tap, broken_tap, originals)
    try:
        assert [Stream("a").body, AsyncStream("b").body, Stream("c").body] == ["a", "b", "c"]
    finally:
        unwrap_streams(originals)
    assert caplog.text.count("could not tap a stream") == 1
