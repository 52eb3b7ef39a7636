"""The canary telemetry the leak test sends: the same fields through the SDK (for the official
exporters and the in-process API) and as raw OTLP requests (for what the SDK cannot express:
bytes values, kvlists and mixed arrays in attributes, any log body).

Contract::

    attributes = sdk_attributes(canaries, "where")       # every SDK value type, keys included
    send_sdk_telemetry(tracer_provider, logger_provider, canaries, "where")
    traces, logs = raw_requests(canaries, "where")      # ExportTraceServiceRequest, ExportLogsServiceRequest
    exercise_api(canaries, "where")                     # the otel_session API, every field
"""

from __future__ import annotations

import json
import os
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.exporter.otlp.proto.common._internal import _encode_key_value, _encode_value
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, Status as SdkStatus, StatusCode

import otel_session

from leak_canaries import KINDS, NUMBER_KINDS, Canaries  # type: ignore[import-not-found]


def text(canaries: Canaries, where: str) -> str:
    """A sentence holding one fresh value of every kind."""
    return "; ".join(f"{kind} {value}" for kind, value in canaries.all_kinds(where).items())


def identifier(canaries: Canaries, where: str) -> str:
    """An id holding one fresh value of every kind (a caller's number as a session id…)."""
    return "caller " + " / ".join(canaries.all_kinds(where).values())


def structure(canaries: Canaries, where: str) -> dict[str, Any]:
    """A JSON structure with a value of every kind as a key and as a value, numbers included."""
    result: dict[str, Any] = {}
    for kind in KINDS:
        result[canaries.mint(kind, f"{where} key")] = {"value": canaries.mint(kind, f"{where} value")}
    result["numbers"] = [canaries.number(kind, f"{where} number") for kind in NUMBER_KINDS]
    result["list"] = [canaries.mint(kind, f"{where} list item") for kind in KINDS]
    return result


def sdk_attributes(canaries: Canaries, where: str) -> dict[str, Any]:
    """Attributes with a canary in every value type the SDK takes, and in keys."""
    attributes: dict[str, Any] = {}
    for kind in KINDS:
        attributes[f"canary.str.{kind}"] = f"text {canaries.mint(kind, f'{where} string')} end"
        attributes[f"canary.key.{canaries.mint(kind, f'{where} attribute key')}"] = "keyed"
    for kind in NUMBER_KINDS:
        attributes[f"canary.int.{kind}"] = canaries.number(kind, f"{where} int")
        attributes[f"canary.double.{kind}"] = float(canaries.number(kind, f"{where} double"))
    attributes["canary.strings"] = [canaries.mint(kind, f"{where} string array") for kind in KINDS]
    attributes["canary.bools"] = [True, False]
    attributes["canary.ints"] = [canaries.number(kind, f"{where} int array") for kind in NUMBER_KINDS]
    attributes["canary.doubles"] = [float(canaries.number(kind, f"{where} double array")) for kind in NUMBER_KINDS]
    attributes["canary.json"] = json.dumps(structure(canaries, f"{where} JSON"), ensure_ascii=False)
    attributes["canary.json_escaped"] = json.dumps(structure(canaries, f"{where} JSON (escaped)"))
    return attributes


def _raw_attributes(canaries: Canaries, where: str) -> dict[str, Any]:
    """``sdk_attributes`` plus what only OTLP itself can carry: bytes, kvlists, mixed arrays."""
    attributes = sdk_attributes(canaries, where)
    for kind in KINDS:
        attributes[f"canary.bytes.{kind}"] = canaries.mint(kind, f"{where} bytes").encode()
    attributes["canary.kvlist"] = {
        canaries.mint(kind, f"{where} kvlist key"): canaries.mint(kind, f"{where} kvlist value") for kind in KINDS
    }
    attributes["canary.kvlist_nested"] = {"inner": {"list": [{canaries.mint("email", f"{where} nested kvlist key"): 1}],
                                                    "number": canaries.number("card", f"{where} kvlist int")}}
    attributes["canary.mixed"] = [canaries.mint("phone", f"{where} mixed array"), True,
                                  canaries.mint("iban", f"{where} mixed array bytes").encode(),
                                  canaries.number("card", f"{where} mixed array int")]
    return attributes


def _tool_attributes(canaries: Canaries, where: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": f"lookup {canaries.mint('email', f'{where} tool name')}",
        "gen_ai.tool.call.id": identifier(canaries, f"{where} tool call id"),
        "gen_ai.tool.call.arguments": json.dumps(structure(canaries, f"{where} tool arguments")),
        "gen_ai.tool.call.result": json.dumps(structure(canaries, f"{where} tool result")),
    }


def _chat_attributes(canaries: Canaries, where: str) -> dict[str, Any]:
    messages = [{"role": "user", "parts": [{"type": "text", "content": text(canaries, f"{where} input message")}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": text(canaries, f"{where} output message")}]}]
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "mock-gpt",
        "gen_ai.response.id": identifier(canaries, f"{where} response (message) id"),
        "otel_session.message.id": identifier(canaries, f"{where} message id"),
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps(answer),
    }


def _slot_event_attributes(canaries: Canaries, where: str) -> dict[str, Any]:
    return {"otel_session.slot.name": "contact",
            "otel_session.slot.value": json.dumps(structure(canaries, f"{where} slot value")),
            "otel_session.slot.previous": text(canaries, f"{where} slot previous")}


def resource_attributes(canaries: Canaries, where: str, *, raw: bool = False) -> dict[str, Any]:
    attributes = (_raw_attributes if raw else sdk_attributes)(canaries, f"{where} resource")
    return {**attributes,
            "service.name": identifier(canaries, f"{where} service.name"),
            "user.id": identifier(canaries, f"{where} user.id")}


# -- through the SDK ---------------------------------------------------------------------------


def send_sdk_telemetry(tracer_provider: TracerProvider, logger_provider: LoggerProvider | None,
                       canaries: Canaries, where: str) -> None:
    """One trace (a run of a session named by canaries) with a canary in every field the SDK
    writes, and (with ``logger_provider``) a GenAI message log event and a plain log record."""
    tracer = tracer_provider.get_tracer(f"scope {canaries.mint('email', f'{where} scope name')}",
                                        f"1.0 {canaries.mint('phone', f'{where} scope version')}",
                                        attributes=sdk_attributes(canaries, f"{where} scope"))
    session_id = identifier(canaries, f"{where} session id")
    root_attributes = {**sdk_attributes(canaries, f"{where} span"), "session.id": session_id,
                       "gen_ai.operation.name": "invoke_agent",
                       "gen_ai.agent.name": identifier(canaries, f"{where} run label (agent)")}
    with tracer.start_as_current_span(f"invoke_agent {canaries.mint('email', f'{where} span name')}",
                                      attributes=root_attributes) as root:
        with tracer.start_as_current_span("chat mock-gpt", attributes=_chat_attributes(canaries, where)) as chat:
            chat.add_event(f"event {canaries.mint('phone', f'{where} event name')}",
                           sdk_attributes(canaries, f"{where} event"))
            chat.add_event("otel_session.slot_write", _slot_event_attributes(canaries, where))
            if logger_provider is not None:
                logger = logger_provider.get_logger(f"logs {canaries.mint('email', f'{where} log scope name')}")
                logger.emit(event_name="gen_ai.user.message", body={"content": text(canaries, f"{where} log event body"),
                                                                     "role": "user"},
                            attributes=sdk_attributes(canaries, f"{where} log event"))
                logger.emit(event_name=f"event {canaries.mint('email', f'{where} log event name')}",
                            severity_text=f"INFO {canaries.mint('phone', f'{where} severity text')}",
                            body=text(canaries, f"{where} log body"),
                            attributes=sdk_attributes(canaries, f"{where} log"))
        link = Link(chat.get_span_context(), sdk_attributes(canaries, f"{where} link"))
        with tracer.start_as_current_span(f"execute_tool {canaries.mint('card', f'{where} tool span name')}",
                                          attributes=_tool_attributes(canaries, where), links=[link]) as tool:
            tool.set_status(SdkStatus(StatusCode.ERROR, text(canaries, f"{where} status message")))
        root.set_attribute("canary.late", text(canaries, f"{where} late attribute"))
    assert trace.get_current_span() is not root


# -- raw OTLP ----------------------------------------------------------------------------------


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    """OTLP ``KeyValue``s, encoded by the official exporters' own encoder (any value: bytes,
    kvlists and mixed arrays too, which the SDK's attribute checks would refuse)."""
    return [_encode_key_value(key, value) for key, value in attributes.items()]


def raw_requests(canaries: Canaries, where: str) -> tuple[ExportTraceServiceRequest, ExportLogsServiceRequest]:
    """The same trace as ``send_sdk_telemetry`` (and its logs), built as OTLP messages, with
    bytes, kvlists and mixed arrays in every attribute set and a kvlist log body."""
    trace_id, root_id, chat_id, tool_id = os.urandom(16), os.urandom(8), os.urandom(8), os.urandom(8)
    now = 1_796_000_000_000_000_000

    def span(span_id: bytes, parent: bytes, name: str, attributes: dict[str, Any], offset: int) -> Span:
        return Span(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name, kind=Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=now + offset, end_time_unix_nano=now + 10_000_000 + offset,
                    attributes=key_values(attributes))

    root = span(root_id, b"", f"invoke_agent {canaries.mint('email', f'{where} span name')}",
                {**_raw_attributes(canaries, f"{where} span"), "session.id": identifier(canaries, f"{where} session id"),
                 "gen_ai.operation.name": "invoke_agent",
                 "gen_ai.agent.name": identifier(canaries, f"{where} run label (agent)")}, 0)
    root.end_time_unix_nano = now + 50_000_000
    chat = span(chat_id, root_id, "chat mock-gpt", _chat_attributes(canaries, where), 1_000)
    chat.events.add(time_unix_nano=now + 2_000, name=f"event {canaries.mint('phone', f'{where} event name')}",
                    attributes=key_values(_raw_attributes(canaries, f"{where} event")))
    chat.events.add(time_unix_nano=now + 3_000, name="otel_session.slot_write",
                    attributes=key_values(_slot_event_attributes(canaries, where)))
    tool = span(tool_id, root_id, f"execute_tool {canaries.mint('card', f'{where} tool span name')}",
                _tool_attributes(canaries, where), 20_000_000)
    tool.links.add(trace_id=trace_id, span_id=chat_id, trace_state=f"k={canaries.mint('ticket', f'{where} trace state')}",
                   attributes=key_values(_raw_attributes(canaries, f"{where} link")))
    tool.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=text(canaries, f"{where} status message")))
    # Tool arguments as bytes and a result as a kvlist: values the SDK cannot make, read by the mapping.
    typed_tool = span(os.urandom(8), root_id, "execute_tool typed", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "typed",
        "gen_ai.tool.call.arguments": json.dumps(structure(canaries, f"{where} tool arguments as bytes")).encode(),
        "gen_ai.tool.call.result": structure(canaries, f"{where} tool result as kvlist")}, 30_000_000)
    traces = ExportTraceServiceRequest()
    resource_spans = traces.resource_spans.add()
    resource_spans.resource.attributes.extend(key_values(resource_attributes(canaries, where, raw=True)))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = f"scope {canaries.mint('email', f'{where} scope name')}"
    scope_spans.scope.version = f"1.0 {canaries.mint('phone', f'{where} scope version')}"
    scope_spans.scope.attributes.extend(key_values(_raw_attributes(canaries, f"{where} scope")))
    scope_spans.spans.extend([root, chat, tool, typed_tool])

    logs = ExportLogsServiceRequest()
    resource_logs = logs.resource_logs.add()
    resource_logs.resource.attributes.extend(key_values(resource_attributes(canaries, f"{where} logs", raw=True)))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name = f"logs {canaries.mint('email', f'{where} log scope name')}"
    scope_logs.scope.attributes.extend(key_values(_raw_attributes(canaries, f"{where} log scope")))
    scope_logs.log_records.add(
        time_unix_nano=now + 4_000, trace_id=trace_id, span_id=chat_id, event_name="gen_ai.user.message",
        body=_encode_value({"content": text(canaries, f"{where} log event body"), "role": "user",
                        canaries.mint("email", f"{where} log event body key"): canaries.mint("card", f"{where} log event body value")}),
        attributes=key_values(_raw_attributes(canaries, f"{where} log event")))
    scope_logs.log_records.add(
        time_unix_nano=now + 5_000, event_name=f"event {canaries.mint('email', f'{where} log event name')}",
        severity_text=f"INFO {canaries.mint('phone', f'{where} severity text')}",
        body=_encode_value([text(canaries, f"{where} log body"), canaries.mint("iban", f"{where} log body bytes").encode(),
                        canaries.number("card", f"{where} log body int")]),
        attributes=key_values(_raw_attributes(canaries, f"{where} log")))
    return traces, logs


# -- the otel_session API ----------------------------------------------------------------------


def exercise_api(canaries: Canaries, where: str, logger_provider: LoggerProvider | None = None) -> None:
    """One run through every otel_session API call, a canary in every argument that is data."""
    slots = {"contact": text(canaries, f"{where} turn slots")}
    with otel_session.session(identifier(canaries, f"{where} session id")):
        with otel_session.run(agent=identifier(canaries, f"{where} run label (agent)"),
                              attributes=sdk_attributes(canaries, f"{where} run attributes")):
            with otel_session.turn(0, state=f"collect {canaries.mint('email', f'{where} state')}",
                                   required_slots=["contact"], slots=slots,
                                   source=f"voice {canaries.mint('phone', f'{where} turn source')}") as turn:
                with otel_session.message("user", message_id=identifier(canaries, f"{where} message id")) as message:
                    message.text(text(canaries, f"{where} user text"))
                with otel_session.message("assistant") as message:
                    streamed = text(canaries, f"{where} deltas")
                    for start in range(0, len(streamed), 7):
                        message.delta(streamed[start:start + 7])
                    message.delta(text(canaries, f"{where} thinking delta"), kind="thinking", index=1)
                    message.delta(json.dumps(structure(canaries, f"{where} tool-call delta")), kind="tool_call", index=2)
                    if logger_provider is not None:
                        logger_provider.get_logger("genai").emit(
                            event_name="gen_ai.user.message", body={"content": text(canaries, f"{where} log event body")},
                            attributes=sdk_attributes(canaries, f"{where} log event"))
                otel_session.slot_write("contact", text(canaries, f"{where} slot value"),
                                        source=f"nlu {canaries.mint('email', f'{where} slot source')}")
                otel_session.slot_write("card", structure(canaries, f"{where} slot structure"))
                otel_session.slot_write("party_size", canaries.mint("email", f"{where} allow-listed slot", control=True))
                otel_session.slot_write(f"slot {canaries.mint('email', f'{where} slot name')}", "x")
                slots["phone"] = canaries.mint("phone", f"{where} unattributed slot change")
                otel_session.guard(f"guard {canaries.mint('email', f'{where} guard name')}", passed=True,
                                   state=f"collect {canaries.mint('phone', f'{where} guard state')}")
                with otel_session.tool_execution(f"lookup {canaries.mint('email', f'{where} tool name')}",
                                                 call_id=identifier(canaries, f"{where} tool call id"),
                                                 arguments=structure(canaries, f"{where} tool arguments")) as tool:
                    tool.update(text(canaries, f"{where} tool update"))
                    tool.finish(result=structure(canaries, f"{where} tool result"))
                try:
                    with otel_session.tool_execution("charge", arguments=[canaries.mint("card", f"{where} tool argument")]):
                        raise RuntimeError(text(canaries, f"{where} tool error"))
                except RuntimeError:
                    pass
                otel_session.transition(f"collect {canaries.mint('email', f'{where} transition from')}", "confirm",
                                        reason=text(canaries, f"{where} transition reason"),
                                        candidates=[structure(canaries, f"{where} transition candidates")])
                turn.finish(state="confirm")
