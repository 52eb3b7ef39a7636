"""Replay and facts on a 100,000-event run (issue 5).

A realistic booking conversation (turns with user messages, slot writes and diffs, guards, a
verdict, a tool with progress updates and a streamed assistant reply of text and thinking deltas)
is recorded through the real BundleWriter, read back with the real reader, then:

(a) ``build_session_facts`` on the read bundle (target < 1 s);
(b) ``Replayer.state_at`` at seq 100, 50,000 and 99,999 once checkpoints exist (target: the seek at
    99,999 costs at most 2× the seek at 100), against a full fold from zero at the same seqs;
(c) the same seeks with the JavaScript twin (``viewer/static/reducer.js``) under node, if installed.

Run: ``python -m bench.replay`` → ``bench/results-replay.json`` and a short summary, then the
reads of a sealed 1M-event run through the viewer (``bench.replay_reads``: bytes and server CPU
before the replay page is usable, seek, facts again, memory; ``bench/results-replay_reads.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench import Figure, write_results
from otel_session.replay.facts import build_session_facts, run_events
from otel_session.bundle.read import read_bundle
from otel_session.replay.reduce import CHECKPOINT_INTERVAL, Replayer, replay_state
from otel_session.bundle.write import BundleWriter

EVENTS = 100_000
SEEKS = (100, 50_000, 99_999)
START_NS = 1_796_000_000_000_000_000
_WORDS = ["sure", "let", "me", "check", "which", "day", "works", "best", "for", "your", "party", "of", "four", "at", "the", "terrace"]


def _turn_script(turn: int) -> list[tuple[str, dict, dict]]:
    """One turn of about 170 events, the shape the instrumentation API records."""
    ids = {"turn_index": turn}
    user, assistant, call = {**ids, "message_id": f"u{turn}"}, {**ids, "message_id": f"a{turn}"}, f"c{turn}"
    state, next_state = f"s{turn % 7}", f"s{(turn + 1) % 7}"
    steps: list[tuple[str, dict, dict]] = [
        ("turn_started", {"state": state, "required_slots": ["date", "party_size", "time"], "source": "user"}, ids),
        ("message_started", {"role": "user"}, user),
        ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"turn {turn} <redacted>"}]}, user),
        ("slot_write", {"slot": "party_size", "value": f"hmac:{turn:06x}", "previous": None, "source": "nlu"}, ids),
        ("slot_write", {"slot": f"note_{turn % 5}", "value": f"hmac:{turn:04x}", "previous": None, "source": "tool"}, ids),
        ("slot_diff", {"slot": "time", "value": "mask:str:5", "previous": None}, ids),
    ]
    steps += [("guard_evaluated", {"name": f"guard_{g}", "passed": g % 2 == 0, "state": state}, ids) for g in range(3)]
    steps.append(("transition_verdict", {"from": state, "to": next_state, "reason": "slots", "candidates": [next_state]}, ids))
    steps.append(("tool_execution_started", {"name": "check_availability", "arguments": {"date": "hmac:aa"}},
                  {**ids, "tool_call_id": call}))
    steps += [("tool_execution_updated", {}, {**ids, "tool_call_id": call}) for _ in range(5)]
    steps.append(("tool_execution_finished", {"status": "ok", "result": {"free": turn % 4}}, {**ids, "tool_call_id": call}))
    steps.append(("message_started", {"role": "assistant"}, assistant))
    thinking = [f"{_WORDS[i % len(_WORDS)]} " for i in range(30)]
    text = [f"{_WORDS[(i + turn) % len(_WORDS)]} " for i in range(120)]
    steps += [("assistant_delta", {"index": 0, "kind": "thinking", "delta": chunk}, assistant) for chunk in thinking]
    steps += [("assistant_delta", {"index": 1, "kind": "text", "delta": chunk}, assistant) for chunk in text]
    steps.append(("message_finished", {"settled": True, "content": [
        {"index": 0, "kind": "thinking", "text": "".join(thinking)}, {"index": 1, "kind": "text", "text": "".join(text)}]},
        assistant))
    steps.append(("turn_finished", {"state": next_state, "required_slots": ["date", "party_size", "time"],
                                    "missing_required_slots": ["date"] if turn % 3 else []}, ids))
    return steps


def record_run(root: Path, events: int = EVENTS) -> Path:
    """Record a run of exactly ``events`` events through the BundleWriter; return its bundle path."""
    writer = BundleWriter(root)
    try:
        run = writer.open_run(session_id="bench-replay", run_id=f"run-{uuid.uuid4()}", agent="booking")
        count, turn = 1, 0
        run.append("run_started", {"kind": "live", "agent": "booking"}, at_ns=START_NS)
        while count < events - 1:
            for event_type, payload, ids in _turn_script(turn)[: events - 1 - count]:
                count += 1
                run.append(event_type, payload, at_ns=START_NS + count * 1_000_000, **ids)
                if count % 4096 == 0:
                    writer.force_flush()  # stay far below the queue bound: this measures replay, not the writer
            turn += 1
        run.close(run_status="ok")
        run.wait_sealed(600)
    finally:
        writer.shutdown()
    return run.path


def _median_ms(actions: dict[int, Callable[[], object]], repeat: int) -> dict[int, float]:
    """Median wall time of each action in milliseconds; the actions take turns, so a busy machine
    slows them alike and the ratios stay meaningful."""
    times: dict[int, list[float]] = {key: [] for key in actions}
    for _ in range(repeat):
        for key, action in actions.items():
            started = time.perf_counter()
            action()
            times[key].append((time.perf_counter() - started) * 1000)
    return {key: statistics.median(values) for key, values in times.items()}


_JS_SEEKS = """
import { readFileSync } from "node:fs";
import { parseJournal, Replayer, replayState, runEvents } from "./viewer/static/reducer.js";
const events = runEvents(parseJournal(readFileSync(process.argv[1], "utf8")).events);
const replayer = new Replayer(events);
let started = performance.now();
replayer.stateAt(null);
const result = { checkpoints_build_ms: performance.now() - started, seek_ms: {}, full_fold_ms: {} };
const seeks = JSON.parse(process.argv[2]);
const times = Object.fromEntries(seeks.map((seq) => [seq, []]));
for (let round = 0; round < 300; round += 1) {
  for (const seq of seeks) {
    started = performance.now();
    replayer.stateAt(seq);
    times[seq].push(performance.now() - started);
  }
}
for (const seq of seeks) {
  times[seq].sort((a, b) => a - b);
  result.seek_ms[seq] = times[seq][150];
  started = performance.now();
  replayState(events, seq);
  result.full_fold_ms[seq] = performance.now() - started;
}
console.log(JSON.stringify(result));
"""


def javascript_seeks(events_path: Path) -> dict | None:
    """Seek medians of the JavaScript reducer under node (``None`` without node)."""
    node = shutil.which("node")
    if node is None:
        print("node is not installed: the JavaScript seek figures were NOT measured")
        return None
    completed = subprocess.run(
        [node, "--input-type=module", "-e", _JS_SEEKS, str(events_path), json.dumps(SEEKS)],
        cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=600, check=True,
    )
    return json.loads(completed.stdout)


def main() -> dict:
    with tempfile.TemporaryDirectory(prefix="otel-session-bench-") as tmp:
        started = time.perf_counter()
        path = record_run(Path(tmp))
        record_s = time.perf_counter() - started
        started = time.perf_counter()
        bundle = read_bundle(path)
        read_s = time.perf_counter() - started
        js = javascript_seeks(path / "events.ndjson")

    facts_s = _median_ms({0: lambda: build_session_facts(bundle)}, 5)[0] / 1000
    cpu_started = time.process_time()
    for _ in range(5):
        build_session_facts(bundle)
    facts_cpu_s = (time.process_time() - cpu_started) / 5
    facts = build_session_facts(bundle)
    events = run_events(bundle)

    started = time.perf_counter()
    replayer = Replayer(events)
    replayer.state_at(None)  # builds every checkpoint once
    checkpoints_s = time.perf_counter() - started

    seek = _median_ms({seq: lambda seq=seq: replayer.state_at(seq) for seq in SEEKS}, 300)
    fold = _median_ms({seq: lambda seq=seq: replay_state(events, seq) for seq in SEEKS}, 3)
    assert replayer.state_at(SEEKS[-1]) == replay_state(events, SEEKS[-1])
    # The worst case: a seek that folds a full interval (255 events) early and late in the run.
    early, late = CHECKPOINT_INTERVAL - 1, SEEKS[-1] - SEEKS[-1] % CHECKPOINT_INTERVAL - 1
    worst = _median_ms({early: lambda: replayer.state_at(early), late: lambda: replayer.state_at(late)}, 300)
    folded = {seq: seq % CHECKPOINT_INTERVAL for seq in SEEKS}  # seq n is event n: events past the checkpoint

    figures = [
        Figure("replay.facts_build_s", facts_s, "s", target="< 1 s", ok=facts_s < 1.0,
               note=f"wall clock, median of 5; {len(facts['turns'])} turns from {len(events):,} events"),
        Figure("replay.facts_build_cpu_s", facts_cpu_s, "s", target="< 1 s", ok=facts_cpu_s < 1.0,
               note="CPU time of this process: what the wall clock shows on an idle machine"),
        Figure("replay.checkpoints_build_s", checkpoints_s, "s", note="first seek to the end builds all checkpoints"),
    ]
    for seq in SEEKS:
        figures.append(Figure(f"replay.full_fold_at_{seq}_ms", fold[seq], "ms", note="no checkpoints: fold from seq 0"))
    figures.append(Figure(f"replay.seek_at_{SEEKS[0]}_ms", seek[SEEKS[0]], "ms"))
    for seq in SEEKS[1:]:
        ratio_ok = seek[seq] <= 2 * seek[SEEKS[0]]
        figures.append(Figure(f"replay.seek_at_{seq}_ms", seek[seq], "ms", baseline=seek[SEEKS[0]],
                              target=f"<= 2x seek at {SEEKS[0]}", ok=ratio_ok))
    figures.append(Figure(f"replay.seek_vs_full_fold_at_{SEEKS[-1]}", seek[SEEKS[-1]], "ms", baseline=fold[SEEKS[-1]],
                          note="checkpointed seek against a full fold at the same seq"))
    figures.append(Figure(f"replay.worst_seek_at_{early}_ms", worst[early], "ms", note="folds 255 events"))
    figures.append(Figure(f"replay.worst_seek_at_{late}_ms", worst[late], "ms", baseline=worst[early],
                          target="<= 2x the same fold early in the run", ok=worst[late] <= 2 * worst[early],
                          note="folds 255 events"))
    if js is not None:
        js_seek = {int(seq): value for seq, value in js["seek_ms"].items()}
        figures.append(Figure(f"replay.js_seek_at_{SEEKS[0]}_ms", js_seek[SEEKS[0]], "ms"))
        figures.append(Figure(f"replay.js_seek_at_{SEEKS[-1]}_ms", js_seek[SEEKS[-1]], "ms", baseline=js_seek[SEEKS[0]],
                              target=f"<= 2x seek at {SEEKS[0]}", ok=js_seek[SEEKS[-1]] <= 2 * js_seek[SEEKS[0]]))
    details = {
        "events": len(events),
        "turns": len(facts["turns"]),
        "messages_at_end": len(replayer.state_at(None)["messages"]),
        "record_s": record_s,
        "load_average_1m": os.getloadavg()[0],
        "read_bundle_s": read_s,
        "integrity": bundle.status.value,
        "seek_ms_median_of_300": seek,
        "events_folded_by_seek": folded,
        "full_fold_ms_median_of_3": fold,
        "worst_seek_ms_median_of_300": worst,
        "javascript": js,
    }
    return write_results("replay", figures, details)


if __name__ == "__main__":
    from bench import replay_reads

    main()
    replay_reads.main()
