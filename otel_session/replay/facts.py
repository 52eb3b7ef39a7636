"""Session facts (SPEC §7.2) of one run.

Contract::

    resolved = resolve_run(root, session_id, run_id=None)   # otel_session.replay.resolve (SPEC §7.3)
    facts = build_session_facts(read_bundle(resolved.path),
                                fallback_to_latest_run=resolved.fallback_to_latest_run)
    facts = load_session_facts(root, session_id, run_id=None)  # the two steps together
    facts = build_session_wide_facts(root, session_id)         # every run of the session, in run order
    facts = session_wide_facts(session_id, bundles)            # the same from bundles already read

Facts are a per-turn projection of one run's journal: what each turn wrote (attributed slot writes
and unattributed diffs), what is still missing (only as ``turn_finished`` recorded it, never
inferred), which guards and verdict fired, the messages and tools, and ``repeated_asks`` — the
answer to "why did the agent ask for the date twice?". Facts of a run never include another run's
records, even when such a record found its way into the journal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from otel_session.core.journal import parse_timestamp
from otel_session.replay.asks import asked_again
from otel_session.replay.cost import PriceTable, price_table, summarize
from otel_session.replay.latency import is_slow, latency_summary, slow_turn_threshold_ms, turn_latency
from otel_session.bundle.read import BundleRead, read_bundle
from otel_session.replay.reduce import replay_state
from otel_session.replay.resolve import resolve_run, session_not_found, session_runs
from otel_session.core.semconv import CAP_PER_TURN

__all__ = [
    "DERIVED_TURNS_NOTE",
    "FACTS_VERSION",
    "NO_BOUNDARIES_NOTE",
    "build_session_facts",
    "build_session_wide_facts",
    "load_session_facts",
    "run_events",
    "session_wide_facts",
    "usage_totals",
]

FACTS_VERSION = 3
"""Bumped whenever what facts hold changes, so facts kept for a sealed run (``index``) are built again."""
NO_BOUNDARIES_NOTE = "the journal has no turn boundaries or turn indexes: all events are shown as one turn"
DERIVED_TURNS_NOTE = (
    "the app recorded no turns: each user message opens one, up to the next (states and slots need "
    "otel_session.turn() in the app, or a framework that records its turns or its state)"
)
_RUN_LEVEL_TYPES = frozenset({"run_started", "run_finished", "upstream_drop"})
_SPAN = "span"

_SLOT_TYPES = ("slot_write", "slot_diff")
_USAGE_KEYS = ("input_tokens", "output_tokens")
_CALL_USAGE_KEYS = (*_USAGE_KEYS, "cached_input_tokens")


# -- facts ---------------------------------------------------------------------------------------


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def _str_list_or_none(value: Any) -> list[str] | None:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else None


def _bundle_ids(bundle: BundleRead) -> tuple[str | None, str | None]:
    if bundle.run_id is None and bundle.events:
        return bundle.events[0]["session_id"], bundle.events[0]["run_id"]
    return bundle.session_id, bundle.run_id


def run_events(bundle: BundleRead) -> list[dict[str, Any]]:
    """The bundle's own records (its manifest's session and run) in ``seq`` order, each ``seq`` once.

    Records of another session or run that found their way into the journal are left out: feed
    these, not ``bundle.events``, to the reducer and to facts.
    """
    session_id, run_id = _bundle_ids(bundle)
    own = [event for event in bundle.events if event["run_id"] == run_id and event["session_id"] == session_id]
    previous = 0
    for event in own:  # a sound journal is already in strictly increasing seq order
        if event["seq"] <= previous:
            break
        previous = event["seq"]
    else:
        return own
    own.sort(key=itemgetter("seq"))
    return [event for position, event in enumerate(own) if position == 0 or event["seq"] != own[position - 1]["seq"]]


def _group_turns(events: list[dict[str, Any]]) -> tuple[dict[int, list[dict[str, Any]]], list[str]]:
    """Group events by ``turn_index``, else by ``turn_started``/``turn_finished`` boundaries."""
    turns: dict[int, list[dict[str, Any]]] = {}
    current: int | None = None
    highest = -1
    for event in events:
        turn_index = event.get("turn_index")
        event_type = event["type"]
        if event_type == _SPAN:
            continue  # a span's own record: no part of a turn's facts
        if type(turn_index) is not int:
            turn_index = None
        if event_type == "turn_started":
            if turn_index is None:
                turn_index = highest + 1
            current = turn_index
        elif turn_index is None:
            turn_index = current
            if turn_index is None:
                continue  # run-level record (run_started, run_finished, …)
        if event_type == "turn_finished" and turn_index == current:
            current = None
        highest = max(highest, turn_index)
        group = turns.get(turn_index)
        if group is None:
            turns[turn_index] = [event]
        else:
            group.append(event)
    if turns or not events:
        return dict(sorted(turns.items())), []
    derived = _turns_by_user_messages(events)
    if derived:
        return derived, [DERIVED_TURNS_NOTE]
    return {0: list(events)}, [NO_BOUNDARIES_NOTE]


def _turns_by_user_messages(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Turns of a journal with no turn records: each user message opens one, which holds the model
    calls, tool executions and replies until the next user message (what came before the first
    user message, a system prompt say, belongs to the first turn). Empty when no user spoke."""
    user_messages = {event.get("message_id") for event in events
                     if event["type"] == "message_started" and _payload(event).get("role") == "user"}
    if not user_messages:
        return {}
    turns: dict[int, list[dict[str, Any]]] = {}
    current = 0
    opened = False
    for event in events:
        if event["type"] in _RUN_LEVEL_TYPES:
            continue
        if event["type"] == "message_started" and event.get("message_id") in user_messages:
            if opened:
                current += 1
            opened = True
        turns.setdefault(current, []).append(event)
    return turns


def _duration_ms(started_at: Any, finished_at: Any) -> float | None:
    started_ns, finished_ns = parse_timestamp(started_at), parse_timestamp(finished_at)
    if started_ns is None or finished_ns is None:
        return None
    return round((finished_ns - started_ns) / 1_000_000, 3)


_CONVERSATION_TYPES = frozenset({
    "message_started", "assistant_delta", "message_finished",
    "tool_execution_started", "tool_execution_updated", "tool_execution_finished",
})


def _conversation_events(events: list[dict[str, Any]], settled: set[str]) -> list[dict[str, Any]]:
    """The events that shape a turn's messages and tools, without the folding work facts never see.

    A settled ``message_finished`` replaces everything folded for its message, and deltas after a
    finish are ignored, so of a ``settled`` message's deltas only the first (which may create the
    message and make it an assistant's) changes the result; the rest are skipped.
    """
    kept, seen = [], set()
    for event in events:
        if event["type"] == "assistant_delta":
            message_id = event.get("message_id")
            if isinstance(message_id, str) and message_id in settled:
                if message_id in seen:
                    continue
                seen.add(message_id)
        kept.append(event)
    return kept


def _model_call(event: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any] | None:
    """The model call a ``message_finished`` records (``model``, ``usage``: interfaces §2), if any."""
    model = payload.get("model")
    usage = payload.get("usage")
    counts = {}
    if isinstance(usage, dict):
        counts = {key: usage[key] for key in _CALL_USAGE_KEYS if _int_or_none(usage.get(key)) is not None}
    if not isinstance(model, str) and not counts:
        return None
    return {"message_id": event.get("message_id"), "model": model if isinstance(model, str) else None,
            "usage": counts, "cost_usd": None}


def usage_totals(turns: Iterable[dict[str, Any]]) -> dict[str, int | None]:
    """Token counts summed over the turns' model calls; a count no call reported is None."""
    totals: dict[str, int | None] = dict.fromkeys(_USAGE_KEYS)
    for turn in turns:
        for call in turn["model_calls"]:
            for key in _USAGE_KEYS:
                if key in call["usage"]:
                    totals[key] = (totals[key] or 0) + call["usage"][key]
    return totals


def _last_text(messages: list[dict[str, Any]], role: str) -> str | None:
    """The text of the turn's first user message (``user``) or last assistant message."""
    texts = [message["text"] for message in messages if message["role"] == role and message["text"]]
    if not texts:
        return None
    return texts[0] if role == "user" else texts[-1]


def _conversation_times(conversation: list[dict[str, Any]], events: list[dict[str, Any]],
                        finished_at: Any) -> dict[str, float | None]:
    """``time_to_first_token_ms`` (the turn's first user message → its first streamed delta) and
    ``duration_ms`` (its first record → its ``turn_finished``, else its last record)."""
    asked_at = first_token_at = None
    for event in conversation:
        if asked_at is None and event["type"] == "message_started" and _payload(event).get("role") == "user":
            asked_at = event.get("at")
        elif asked_at is not None and event["type"] == "assistant_delta":
            first_token_at = event.get("at")
            break
    return {"time_to_first_token_ms": _duration_ms(asked_at, first_token_at) if first_token_at else None,
            "duration_ms": _duration_ms(events[0].get("at"), finished_at or events[-1].get("at"))}


def _turn_facts(turn_index: int, events: list[dict[str, Any]], slots: dict[str, Any],
                previous: dict[str, Any] | None, slow_turn_ms: float, *, derived: bool = False) -> dict[str, Any]:
    started = finished = verdict_event = None
    slot_writes, unattributed, guards, conversation = [], [], [], []
    settled: set[str] = set()
    guard_count = 0
    model_calls: list[dict[str, Any]] = []
    for event in events:  # one pass: this runs over every event of the run
        event_type = event["type"]
        if event_type in _CONVERSATION_TYPES:
            conversation.append(event)
            if event_type == "message_finished":
                payload = _payload(event)
                if payload.get("settled") is True and isinstance(event.get("message_id"), str):
                    settled.add(event["message_id"])
                call = _model_call(event, payload)
                if call is not None:
                    model_calls.append(call)
            continue
        payload = _payload(event)
        if event_type in _SLOT_TYPES:
            if isinstance(payload.get("slot"), str):
                entry = {"slot": payload["slot"], "value": payload.get("value"), "previous": payload.get("previous"),
                         "seq": event["seq"]}
                if event_type == "slot_write":
                    slot_writes.append({**entry, "source": payload.get("source")})
                else:
                    unattributed.append(entry)
        elif event_type == "guard_evaluated":
            guard_count += 1
            if guard_count <= CAP_PER_TURN:
                guards.append({"name": payload.get("name"), "passed": payload.get("passed"),
                               "state": payload.get("state"), "seq": event["seq"]})
        elif event_type == "turn_started":
            started = started or event
        elif event_type == "turn_finished":
            finished = event
        elif event_type == "transition_verdict":
            verdict_event = event
    started_payload = _payload(started) if started else {}
    finished_payload = _payload(finished) if finished else {}

    verdict = None
    if verdict_event is not None:
        payload = _payload(verdict_event)
        candidates = payload.get("candidates") if isinstance(payload.get("candidates"), list) else []
        recorded_truncation = _int_or_none(payload.get("candidates_truncated")) or 0
        verdict = {"from": payload.get("from"), "to": payload.get("to"), "reason": payload.get("reason"),
                   "candidates": candidates[:CAP_PER_TURN],
                   "candidates_truncated": recorded_truncation + max(0, len(candidates) - CAP_PER_TURN),
                   "seq": verdict_event["seq"]}

    replay = replay_state(_conversation_events(conversation, settled))
    messages = [
        {"message_id": message["message_id"], "role": message["role"], "settled": message["settled"],
         "text": "".join(block["text"] for block in message["blocks"] if block["kind"] == "text")}
        for message in replay["messages"]
    ]
    tools = [
        {"tool_call_id": tool["tool_call_id"], "name": tool["name"], "status": tool["status"],
         "duration_ms": _duration_ms(tool["started_at"], tool["finished_at"])}
        for tool in replay["tools"]
    ]

    state_before = started_payload.get("state") if isinstance(started_payload.get("state"), str) else None
    if state_before is None and previous is not None:
        state_before = previous["state"]
    state = finished_payload.get("state") if isinstance(finished_payload.get("state"), str) else None
    if state is None and verdict is not None and isinstance(verdict["to"], str):
        state = verdict["to"]
    required = _str_list_or_none(finished_payload.get("required_slots"))
    if required is None:
        required = _str_list_or_none(started_payload.get("required_slots")) or []
    missing = _str_list_or_none(finished_payload.get("missing_required_slots")) if finished else None

    latency = turn_latency(finished_payload)
    repeated: list[str] = []
    asked_again = any(message["role"] == "assistant" for message in messages)
    if missing and previous is not None and previous["missing_required_slots"] and asked_again:
        repeated = [slot for slot in missing if slot in previous["missing_required_slots"] and slot in required]

    return {
        "turn_index": turn_index,
        "state_before": state_before,
        "state": state,
        "finished": finished is not None,
        "interrupted": finished_payload.get("interrupted") is True,
        "latency": latency,
        "slow": is_slow(latency, slow_turn_ms),
        "first_seq": events[0]["seq"],
        "last_seq": events[-1]["seq"],
        "started_at": events[0].get("at"),
        "finished_at": finished.get("at") if finished else None,
        "required_slots_in_state": required,
        "slots": slots,
        "missing_required_slots": missing,
        "slot_writes": slot_writes,
        "unattributed_diffs": unattributed,
        "guards": guards,
        "guards_truncated": max(0, guard_count - CAP_PER_TURN),
        "verdict": verdict,
        "messages": messages,
        "tools": tools,
        "model_calls": model_calls,
        "repeated_asks": repeated,
        "source": "derived" if derived else "recorded",
        "ask": _last_text(messages, "user"),
        "reply": _last_text(messages, "assistant"),
        **_conversation_times(conversation, events, finished.get("at") if finished else None),
        "errors": [{"tool": tool["name"], "tool_call_id": tool["tool_call_id"]} for tool in tools if tool["status"] == "error"],
    }


def _run_turns(bundle: BundleRead, events: list[dict[str, Any]], previous: dict[str, Any] | None,
               slow_turn_ms: float) -> tuple[list[dict[str, Any]], list[str]]:
    """The turn facts of one run's own ``events``; ``previous`` is the turn before its first (the
    last turn of the session's previous run, for session-wide facts), else None."""
    grouped, notes = _group_turns(events)
    slot_events = [event for event in events if event["type"] in _SLOT_TYPES]
    slots: dict[str, Any] = {}
    applied = 0
    turns: list[dict[str, Any]] = []
    for turn_index, turn_events in grouped.items():
        # Slots after the turn: every slot record of the run up to the turn's last seq, in seq order.
        while applied < len(slot_events) and slot_events[applied]["seq"] <= turn_events[-1]["seq"]:
            payload = _payload(slot_events[applied])
            if isinstance(payload.get("slot"), str):
                slots[payload["slot"]] = payload.get("value")
            applied += 1
        turns.append(_turn_facts(turn_index, turn_events, dict(slots), turns[-1] if turns else previous, slow_turn_ms,
                                 derived=DERIVED_TURNS_NOTE in notes))
    foreign = len(bundle.events) - len(events)
    if foreign:
        notes.append(f"{foreign} record(s) of another session or run, or repeating a seq, were left out")
    return turns, notes


def _integrity(bundle: BundleRead) -> dict[str, Any]:
    return {"status": bundle.status.value, "diagnostics": [d.as_json() for d in bundle.diagnostics]}


def build_session_facts(
    bundle: BundleRead, *, fallback_to_latest_run: bool = False, slow_turn_ms: float | None = None
) -> dict[str, Any]:
    """Return the per-turn facts of one run bundle (SPEC §7.2), with its integrity verdict.

    ``slow_turn_ms`` (default: ``latency.slow_turn_threshold_ms()``) flags turns whose voice
    latency (user stopped speaking → agent started) is over it."""
    session_id, run_id = _bundle_ids(bundle)
    events = run_events(bundle)
    threshold = slow_turn_threshold_ms(slow_turn_ms)
    turns, notes = _run_turns(bundle, events, None, threshold)
    return {
        "session_id": session_id,
        "run_id": run_id,
        "fallback_to_latest_run": fallback_to_latest_run,
        "kind": (bundle.manifest or {}).get("kind"),
        "created_at": (bundle.manifest or {}).get("created_at"),
        "integrity": _integrity(bundle),
        "event_count": len(events),
        "usage_totals": usage_totals(turns),
        "latency": latency_summary(turns, threshold),
        "notes": notes,
        "turns": turns,
        "asked_again": _flag_asked_again(turns),
        "cost": _price(turns),
    }


def _price(turns: list[dict[str, Any]], prices: PriceTable | None = None) -> dict[str, Any]:
    """Set each model call's and turn's cost (``cost.summarize``) and return the cost of them all."""
    prices = prices or price_table()
    for turn in turns:
        for call in turn["model_calls"]:
            call["cost_usd"] = prices.cost(call["model"], call["usage"])
        turn["cost"] = summarize(turn["model_calls"], prices)
    return summarize((call for turn in turns for call in turn["model_calls"]), prices)


def _flag_asked_again(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each turn's ``asked_again`` (``asks.asked_again``) and return the turns that ask again."""
    flagged = []
    for turn, again in zip(turns, asked_again(turns)):
        turn["asked_again"] = again
        if again is not None:
            flagged.append({**({"run_id": turn["run_id"]} if "run_id" in turn else {}),
                            "turn_index": turn["turn_index"], **again})
    return flagged


def session_wide_facts(
    session_id: str, bundles: Iterable[BundleRead], *, slow_turn_ms: float | None = None
) -> dict[str, Any]:
    """Facts of a whole session from its runs' bundles (SPEC §7.2): the runs in run order
    (``created_at``, then ``run_id``, ascending), their turns in that order, each naming its run,
    and ``repeated_asks`` detected across run boundaries (a run's first turn follows the previous
    run's last). Each run's facts still hold only its own records; a turn's ``slots`` are its run's.
    ``latency`` (per run and over the session) summarizes voice latency, with the slow turns."""
    threshold = slow_turn_threshold_ms(slow_turn_ms)
    ordered = sorted(bundles, key=lambda bundle: (str((bundle.manifest or {}).get("created_at", "")), _bundle_ids(bundle)[1] or ""))
    runs: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for bundle in ordered:
        manifest = bundle.manifest or {}
        run_id = _bundle_ids(bundle)[1]
        events = run_events(bundle)
        run_turns, notes = _run_turns(bundle, events, previous, threshold)
        runs.append({"run_id": run_id, "created_at": manifest.get("created_at"), "kind": manifest.get("kind"),
                     "agent": manifest.get("agent"), "integrity": _integrity(bundle), "event_count": len(events),
                     "usage_totals": usage_totals(run_turns), "latency": latency_summary(run_turns, threshold),
                     "cost": summarize((call for turn in run_turns for call in turn["model_calls"]), price_table()),
                     "notes": notes})
        turns += [{**turn, "run_id": run_id} for turn in run_turns]
        if run_turns:
            previous = run_turns[-1]
    repeated = []
    for position, turn in enumerate(turns):
        if turn["repeated_asks"]:
            asked = turns[position - 1]
            repeated.append({"run_id": turn["run_id"], "turn_index": turn["turn_index"], "slots": turn["repeated_asks"],
                             "asked_before_in": {"run_id": asked["run_id"], "turn_index": asked["turn_index"]}})
    return {"session_id": session_id, "scope": "session", "runs": runs, "usage_totals": usage_totals(turns),
            "latency": latency_summary(turns, threshold), "turns": turns, "repeated_asks": repeated,
            "asked_again": _flag_asked_again(turns), "cost": _price(turns)}


def build_session_wide_facts(
    root: str | os.PathLike[str], session_id: str, *, include_evals: bool = False, slow_turn_ms: float | None = None
) -> dict[str, Any]:
    """Read every run of ``session_id`` under ``root`` and build its session-wide facts.

    Live runs only, or with ``include_evals`` the session's eval runs only: one eval's episodes are
    never read as the turns that followed a live conversation (nor another eval's). Raises
    ``resolve.SessionNotFound`` when the session has no such runs (or ``InvalidId``), ``ValueError``
    when its eval runs belong to several evals."""
    runs = session_runs(root, session_id, include_evals=include_evals)
    if include_evals:
        runs = [run for run in runs if run.kind == "eval"]
        evals = sorted({run.eval_id or "?" for run in runs})
        if len(evals) > 1:
            raise ValueError(f"session {runs[0].session_id!r} has eval runs of {len(evals)} evals ({', '.join(evals)}): "
                             "ask for one run with --run")
    if not runs:
        raise session_not_found(root, session_id, include_evals=include_evals)
    stored = runs[0].session_id  # the keyed hash when the id given holds PII: never echoed
    return session_wide_facts(stored, (read_bundle(run.path) for run in runs), slow_turn_ms=slow_turn_ms)


def load_session_facts(
    root: str | os.PathLike[str], session_id: str, run_id: str | None = None, *, include_evals: bool = False,
    slow_turn_ms: float | None = None,
) -> dict[str, Any]:
    """Resolve the run (SPEC §7.3), read its bundle and build its facts."""
    resolved = resolve_run(root, session_id, run_id, include_evals=include_evals)
    return build_session_facts(read_bundle(resolved.path), fallback_to_latest_run=resolved.fallback_to_latest_run,
                               slow_turn_ms=slow_turn_ms)
