"""The demo booking agent: a real Flask service, instrumented with otel_session and openai-v2.

Run it::

    python -m otel_session.demo.agent --port 8780 --llm http://127.0.0.1:8781/v1 \\
        --otlp-endpoint http://127.0.0.1:4318/v1/traces

or zero-code, letting ``opentelemetry-instrument`` build the tracer provider and instrument the
``openai`` client (the agent then adds only what ``otel_session`` needs)::

    OTEL_SERVICE_NAME=booking-agent OTEL_TRACES_EXPORTER=otlp \\
    opentelemetry-instrument python -m otel_session.demo.agent --llm http://127.0.0.1:8781/v1

HTTP API:

* ``POST /calls`` (header ``X-Session-Id``) with ``{"utterances": ["hi", "friday", …]}`` — one run
  (one trace) per request, opened by the Flask extension; each utterance is one turn. The
  conversation state (state machine position and slots) lives on per session, so the next request
  of the same session continues the booking. The response carries ``X-Run-Id``.
* ``POST /evals/<eval_id>/calls`` — the same as an eval run (``kind=eval``), recorded under
  ``evals/<eval_id>/``.
* ``GET /healthz`` — readiness (not recorded).

Every turn records the user's message, slot writes from understanding (``source="nlu"``) and from
the tool (``source="tool"``), the guards on the transition, the verdict and the assistant's reply,
streamed from the LLM through the real ``openai`` client (its ``chat`` spans come from the official
``opentelemetry-instrumentation-openai-v2``, stamped with the session and run ids).
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
import orjson
from flask import Blueprint, Flask, abort, current_app, jsonify, request
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_session
from otel_session.demo.booking import (
    DEMO_KEEP_SLOTS,
    INSTRUCTIONS,
    REQUIRED_SLOTS,
    AvailabilityError,
    BookingState,
    check_availability,
    decide,
    understand,
)
from otel_session.instrument.flask import (
    RUN_ID_HEADER,
    SESSION_ID_HEADER,
    FlaskOtelSession,
)
from otel_session.core.semconv import RUN_TAGS
from otel_session.core.log import get_logger, redact_root_handlers
from otel_session.core.stop_signal import StopSignal

__all__ = ["AGENT_NAME", "BookingAgent", "create_app", "main", "setup_telemetry"]

logger = get_logger(__name__)

AGENT_NAME = "booking"
SERVICE_NAME = "booking-agent"
MODEL = "mock-gpt"

_AVAILABILITY_TOOL = {
    "type": "function",
    "function": {
        "name": "check_availability",
        "description": "Check whether a table is free for a date and party size.",
        "parameters": {
            "type": "object",
            "properties": {"date": {"type": "string"}, "party_size": {"type": "integer"}},
            "required": ["date", "party_size"],
        },
    },
}
@dataclass
class Conversation:
    """One session's dialogue state, kept between its runs."""

    state: BookingState = BookingState.GREET
    slots: dict[str, Any] = field(default_factory=dict)
    next_turn: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class BookingAgent:
    """The dialogue loop: one turn per utterance, replies streamed from the LLM."""

    def __init__(self, llm: openai.OpenAI, *, model: str = MODEL) -> None:
        self.llm = llm
        self.model = model
        self._conversations: dict[str, Conversation] = {}
        self._lock = threading.Lock()

    def conversation(self, session_id: str) -> Conversation:
        with self._lock:
            return self._conversations.setdefault(session_id, Conversation())

    def handle(self, session_id: str, utterances: Sequence[str]) -> dict[str, Any]:
        """Play ``utterances`` as consecutive turns of the session's conversation."""
        conversation = self.conversation(session_id)
        with conversation.lock:
            replies = [self._turn(conversation, utterance) for utterance in utterances]
            return {"state": conversation.state.value, "replies": replies, "turns": len(replies)}

    def _turn(self, conversation: Conversation, utterance: str) -> str:
        before = conversation.state
        slots = conversation.slots
        index = conversation.next_turn
        conversation.next_turn += 1
        with otel_session.turn(
            index, state=before.value, required_slots=REQUIRED_SLOTS[before], slots=slots, source="http"
        ) as turn:
            with otel_session.message("user") as said:
                said.text(utterance)
            for slot, value in understand(utterance, before).slots.items():
                self._write(slots, slot, value, source="nlu")
            decision = decide(before, slots)
            if decision.state is BookingState.CONFIRM and not slots.get("available"):
                reply = self._check_and_offer(conversation, utterance)
                decision = decide(before, slots)
            else:
                reply = self._say(decision.state, utterance)
            for name, passed in decision.guards.items():
                otel_session.guard(name, passed, state=before.value)
            otel_session.transition(
                before.value, decision.state.value, reason=decision.reason, candidates=list(decision.candidates)
            )
            conversation.state = decision.state
            turn.finish(state=decision.state.value, required_slots=REQUIRED_SLOTS[decision.state])
        return reply

    @staticmethod
    def _write(slots: dict[str, Any], slot: str, value: Any, *, source: str) -> None:
        """Record the attributed write, then make it: the dialogue never depends on recording."""
        otel_session.slot_write(slot, value, source=source, apply=False)
        slots[slot] = value

    def _say(self, state: BookingState, utterance: str) -> str:
        messages = [
            {"role": "system", "content": INSTRUCTIONS[state]},
            {"role": "user", "content": utterance},
        ]
        return self._stream(messages)[0]

    def _check_and_offer(self, conversation: Conversation, utterance: str) -> str:
        """Let the LLM call ``check_availability`` (grounded in the slots), then stream the offer."""
        slots = conversation.slots
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTIONS[BookingState.CONFIRM]},
            {"role": "user", "content": utterance},
        ]
        text, calls = self._stream(messages, tools=[_AVAILABILITY_TOOL])
        if not calls:
            return text
        messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        for call in calls:
            arguments = {"date": slots["date"], "party_size": slots["party_size"]}
            try:
                with otel_session.tool_execution(call["function"]["name"], call_id=call["id"], arguments=arguments) as tool:
                    tool.update("looking up the reservation book")
                    result = check_availability(**arguments)
                    tool.finish(result=result)
            except AvailabilityError as exc:
                content = f"error: {exc}"
            else:
                self._write(slots, "available", result["available"], source="tool")
                content = orjson.dumps(result).decode()
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return self._stream(messages)[0]

    def _stream(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> tuple[str, list[dict[str, Any]]]:
        """One streamed completion as one assistant message: text deltas and tool-call deltas."""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        with otel_session.message("assistant") as reply:
            stream = self.llm.chat.completions.create(
                model=self.model, messages=messages, stream=True, stream_options={"include_usage": True}, **extra
            )
            for chunk in stream:
                if chunk.usage is not None:  # the last chunk: the call's token usage
                    reply.model_call(chunk.model, input_tokens=chunk.usage.prompt_tokens,
                                     output_tokens=chunk.usage.completion_tokens)
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                    reply.delta(delta.content)
                for call_delta in delta.tool_calls or ():
                    call = calls.setdefault(
                        call_delta.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                    call["id"] = call_delta.id or call["id"]
                    if call_delta.function is not None:
                        call["function"]["name"] += call_delta.function.name or ""
                        piece = call_delta.function.arguments or ""
                        call["function"]["arguments"] += piece
                        if piece:
                            reply.delta(piece, kind="tool_call", index=1 + call_delta.index)
        return "".join(text), [calls[index] for index in sorted(calls)]


bp = Blueprint("booking", __name__)


def _utterances() -> list[str]:
    body = request.get_json(silent=True)
    utterances = body.get("utterances") if isinstance(body, dict) else None
    if not isinstance(utterances, list) or not all(isinstance(u, str) for u in utterances) or not utterances:
        abort(400, description='expected JSON {"utterances": ["…", …]}')
    return utterances


def _session_header() -> str:
    session_id = request.headers.get(SESSION_ID_HEADER)
    if not session_id:
        abort(400, description=f"the {SESSION_ID_HEADER} header is required")
    return session_id


@bp.get("/healthz")
def healthz() -> Any:
    """Readiness: the agent is up (not recorded)."""
    return jsonify(status="ok")


@bp.post("/calls")
def call() -> Any:
    """Play the caller's utterances as turns of one live run of their session."""
    session_id = _session_header()
    utterances = _utterances()
    result = current_app.extensions["booking_agent"].handle(session_id, utterances)
    run = otel_session.current_run()
    return jsonify(session_id=session_id, run_id=run.run_id if run else None, kind="live", **result)


@bp.post("/evals/<eval_id>/calls")
def eval_call(eval_id: str) -> Any:
    """The same as an eval run: recorded under ``evals/<eval_id>/``, never in the live index."""
    session_id = _session_header()
    utterances = _utterances()
    agent: BookingAgent = current_app.extensions["booking_agent"]
    with otel_session.session(session_id), otel_session.run(AGENT_NAME, kind="eval", eval_id=eval_id) as run:
        result = agent.handle(session_id, utterances)
    response = jsonify(session_id=session_id, run_id=run.run_id, kind="eval", eval_id=eval_id, **result)
    if run.run_id:
        response.headers[RUN_ID_HEADER] = run.run_id
    return response


def _live_session_id(incoming: Any) -> str | None:
    """Live runs for ``/calls`` only; eval routes open their own run, health checks none."""
    return incoming.headers.get(SESSION_ID_HEADER) if incoming.endpoint == "booking.call" else None


def create_app(llm: openai.OpenAI, test_config: dict[str, Any] | None = None) -> Flask:
    """The agent's Flask app around ``llm`` (an ``openai.OpenAI`` client)."""
    app = Flask(__name__)
    app.config.from_mapping(test_config or {})
    app.extensions["booking_agent"] = BookingAgent(llm, model=app.config.get("MODEL", MODEL))
    FlaskOtelSession(app, agent=AGENT_NAME, session_id=_live_session_id)
    app.register_blueprint(bp)
    return app


def setup_telemetry(otlp_endpoints: Sequence[str], journal_dir: str | None) -> otel_session.Recorder:
    """Tracer provider with OTLP/HTTP exporters, openai-v2 instrumentation and otel_session.

    Under ``opentelemetry-instrument`` the global provider (and the openai instrumentation) already
    exist and are used as they are; ``otlp_endpoints`` then adds exporters to that provider.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        labels = {"deployment.environment": "demo", RUN_TAGS: ["demo"]}  # every run's metadata and tags
        provider = TracerProvider(resource=Resource.create({**labels, **attributes}))
        trace.set_tracer_provider(provider)
        if not otlp_endpoints:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_* env
    for endpoint in otlp_endpoints:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    instrumentor = OpenAIInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:  # opentelemetry-instrument may have done it
        instrumentor.instrument(tracer_provider=provider)
    policy = otel_session.RedactionPolicy.from_env(otel_session.RedactionPolicy(keep_slots=frozenset(DEMO_KEEP_SLOTS)))
    return otel_session.configure(bundle_dir=journal_dir, redaction=policy, tracer_provider=provider)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m otel_session.demo.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8780)
    parser.add_argument("--llm", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8781/v1"),
                        help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL)")
    parser.add_argument("--otlp-endpoint", action="append", default=[], metavar="URL",
                        help="OTLP/HTTP traces endpoint (repeatable; default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
    parser.add_argument("--journal-dir", default=None,
                        help="Where the in-process recorder keeps its own bundles (default: $OTEL_SESSION_DIR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact_root_handlers()

    from werkzeug.serving import make_server

    recorder = setup_telemetry(args.otlp_endpoint, args.journal_dir)
    llm = openai.OpenAI(base_url=args.llm, api_key=os.environ.get("OPENAI_API_KEY", "demo"), timeout=30.0)
    server = make_server(args.host, args.port, create_app(llm), threaded=True)
    stop = StopSignal().install()  # for the rest of the process
    serving = threading.Thread(target=server.serve_forever, name="booking-agent-http", daemon=True)
    serving.start()
    print(f"booking agent at http://{args.host}:{server.server_port} (LLM {args.llm})", flush=True)
    stop.wait()
    server.shutdown()
    serving.join()
    recorder.shutdown()
    trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]  # flush the OTLP exporters


if __name__ == "__main__":
    main()
