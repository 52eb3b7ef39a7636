"""A small instrumented agent, run as a real process by the fault tests.

Each run is one session with one turn: a user message, a slot write, a tool call (a real function
whose return value the app checks), a streamed assistant message and a transition. The app prints
one JSON line per run (``{"run_id", "tool_result", "turn_ms", "error"}``) and a final summary line
``{"done": true, ...}`` — if the app or its turn/tool/run broke, it says so there.

    python agent_app.py --dir D [--runs N] [--deltas K] [--delta-bytes B] [--otlp URL]
                        [--exit shutdown|atexit|hang] [--handle-sigterm]

``--exit atexit`` returns from ``main`` without ``shutdown()``; ``--exit hang`` prints ``ready``
inside an open run's turn and waits there forever (the test sends a signal).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_session


def check_availability(date: str) -> dict:
    return {"date": date, "free": True}


def one_run(index: int, args: argparse.Namespace, hang: bool = False) -> dict:
    slots: dict = {}
    started = time.perf_counter()
    outcome: dict = {"run_id": None, "tool_result": None, "error": None}
    try:
        with otel_session.session(f"{args.session_prefix}-{index}"):
            with otel_session.run(agent="booking") as run:
                outcome["run_id"] = run.run_id
                with otel_session.turn(0, state="ask_date", required_slots=["date"], slots=slots) as turn:
                    with otel_session.message("user") as message:
                        message.text(f"a table on Friday, request {index}")
                    otel_session.slot_write("date", "2026-12-04", source="nlu")
                    with otel_session.tool_execution("check_availability", call_id=f"c{index}",
                                                     arguments={"date": "2026-12-04"}) as tool:
                        result = check_availability("2026-12-04")
                        tool.finish(result=result)
                    outcome["tool_result"] = result
                    with otel_session.message("assistant") as message:
                        chunk = "x" * (args.delta_bytes - 1) + " "
                        for _ in range(args.deltas):
                            message.delta(chunk)
                    if hang:
                        print("ready", flush=True)
                        while True:
                            time.sleep(0.05)
                    otel_session.transition("ask_date", "confirm", reason="date known", candidates=["confirm"])
                    turn.finish(state="confirm")
    except Exception as exc:  # the point of the fault tests: this must never happen
        outcome["error"] = "".join(traceback.format_exception(exc))
    outcome["turn_ms"] = (time.perf_counter() - started) * 1000
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--delta-bytes", type=int, default=40)
    parser.add_argument("--session-prefix", default="call")
    parser.add_argument("--otlp", help="OTLP/HTTP traces endpoint for a BatchSpanProcessor")
    parser.add_argument("--exit", choices=["shutdown", "atexit", "hang"], default="shutdown")
    parser.add_argument("--handle-sigterm", action="store_true")
    args = parser.parse_args()

    provider = TracerProvider(resource=Resource.create({"service.name": "fault-agent"}))
    if args.otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp)))
    options = {"shutdown_on_sigterm": True} if args.handle_sigterm else {}
    recorder = otel_session.configure(args.dir, tracer_provider=provider, **options)
    errors = 0
    for index in range(args.runs):
        outcome = one_run(index, args, hang=args.exit == "hang" and index == args.runs - 1)
        errors += outcome["error"] is not None
        print(json.dumps(outcome), flush=True)
    if args.exit == "shutdown":
        recorder.shutdown()
        provider.shutdown()
    print(json.dumps({"done": True, "errors": errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
