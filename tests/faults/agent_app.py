"""A small instrumented agent, run as a real process by the fault tests.

Each run is one session with one turn: a user message, a slot write, a tool call (a real function
whose return value the app checks), a streamed assistant message and a transition. The app prints
one JSON line per run (``{"run_id", "tool_result", "turn_ms", "error"}``) and a final summary line
``{"done": true, ...}`` — if the app or its turn/tool/run broke, it says so there.

    python agent_app.py --dir D [--runs N] [--deltas K] [--delta-bytes B] [--otlp URL]
                        [--exit shutdown|atexit|hang] [--handle-sigterm]

``--exit atexit`` returns from ``main`` without ``shutdown()`` (``atexit-open``: with the last run
still open); ``--exit hang`` prints ``ready`` inside the last run's turn and waits there forever
(the test sends a signal).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
import traceback

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_session


def check_availability(date: str) -> dict:
    return {"date": date, "free": True}


def one_run(index: int, args: argparse.Namespace, hang: bool = False, leave_open: bool = False) -> dict:
    """One run; ``leave_open`` enters its session and run and never exits them (open at exit)."""
    started = time.perf_counter()
    outcome: dict = {"run_id": None, "tool_result": None, "error": None}
    scopes = contextlib.ExitStack()
    try:
        with contextlib.nullcontext() if leave_open else scopes:
            scopes.enter_context(otel_session.session(f"{args.session_prefix}-{index}"))
            outcome["run_id"] = scopes.enter_context(otel_session.run(agent="booking")).run_id
            one_turn(index, args, outcome, hang)
    except Exception as exc:  # the point of the fault tests: this must never happen
        outcome["error"] = "".join(traceback.format_exception(exc))
    outcome["turn_ms"] = (time.perf_counter() - started) * 1000
    return outcome


def one_turn(index: int, args: argparse.Namespace, outcome: dict, hang: bool) -> None:
    slots: dict = {}
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--delta-bytes", type=int, default=40)
    parser.add_argument("--session-prefix", default="call")
    parser.add_argument("--otlp", help="OTLP/HTTP traces endpoint for a BatchSpanProcessor")
    parser.add_argument("--exit", choices=["shutdown", "atexit", "atexit-open", "hang"], default="shutdown")
    parser.add_argument("--handle-sigterm", action="store_true", help="configure(shutdown_on_sigterm=True)")
    parser.add_argument("--own-sigterm-handler", action="store_true", help="the app turns SIGTERM into exit 143")
    args = parser.parse_args()
    if args.own_sigterm_handler:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    provider = TracerProvider(resource=Resource.create({"service.name": "fault-agent"}))
    if args.otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp)))
    options = {"shutdown_on_sigterm": True} if args.handle_sigterm else {}
    recorder = otel_session.configure(args.dir, tracer_provider=provider, **options)
    errors = 0
    for index in range(args.runs):
        last = index == args.runs - 1
        hang, leave_open = args.exit == "hang" and last, args.exit == "atexit-open" and last
        outcome = one_run(index, args, hang=hang, leave_open=leave_open)
        errors += outcome["error"] is not None
        print(json.dumps(outcome), flush=True)
    if args.exit == "shutdown":
        recorder.shutdown()
        provider.shutdown()
    print(json.dumps({"done": True, "errors": errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
