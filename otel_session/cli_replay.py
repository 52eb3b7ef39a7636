"""``otel-session facts`` and ``otel-session replay`` (registered on the main CLI group)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

from otel_session import config
from otel_session.facts import build_session_facts, run_events
from otel_session.read import read_bundle
from otel_session.reduce import Replayer, canonical_json
from otel_session.resolve import InvalidId, RunResolutionError, resolve_run

__all__ = ["facts", "replay"]

def _resolve(bundle_root: Path | None, session_id: str, run_id: str | None):
    """Resolve the run or exit: 2 for a malformed id (usage), 1 for an unknown session or run."""
    try:
        return resolve_run(config.bundle_dir(bundle_root), session_id, run_id)
    except InvalidId as error:
        raise click.UsageError(str(error)) from None
    except RunResolutionError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)


def _slots_list(names: list[str] | None) -> str:
    if names is None:
        return "?"
    return ", ".join(names) if names else "-"


def _facts_table(facts: dict[str, Any]) -> list[str]:
    header = f"session {facts['session_id']}  run {facts['run_id']}"
    if facts["fallback_to_latest_run"]:
        header += "  (latest run: no --run given)"
    integrity = facts["integrity"]
    lines = [header, f"integrity: {integrity['status']}"]
    lines += [f"  {d['severity']} {d['code']}: {d['message']}" for d in integrity["diagnostics"]]
    lines += [f"note: {note}" for note in facts["notes"]]
    rows = [("turn", "state", "slots written", "missing", "verdict", "repeated asks")]
    for turn in facts["turns"]:
        written = [write["slot"] for write in turn["slot_writes"]] + [f"{diff['slot']}*" for diff in turn["unattributed_diffs"]]
        verdict = turn["verdict"]
        rows.append((
            str(turn["turn_index"]),
            f"{turn['state_before'] or '?'} → {turn['state'] or '?'}",
            ", ".join(written) or "-",
            _slots_list(turn["missing_required_slots"]),
            f"{verdict['to']} ({verdict['reason']})" if verdict else "-",
            ", ".join(turn["repeated_asks"]) or "-",
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.append("* unattributed (found by diff); ? not recorded")
    return lines


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--run", "run_id", default=None, help="Run id (default: the session's latest run).")
@config.bundle_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
def facts(session_id: str, run_id: str | None, bundle_root: Path | None, as_json: bool) -> None:
    """Show per-turn session facts of a run: states, slot writes, missing slots, verdicts, repeated asks.

    Exit 1 when the session or run is unknown (or the run belongs to another session).
    """
    resolved = _resolve(bundle_root, session_id, run_id)
    result = build_session_facts(read_bundle(resolved.path), fallback_to_latest_run=resolved.fallback_to_latest_run)
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo("\n".join(_facts_table(result)))


def _replay_text(state: dict[str, Any], last_seq: int) -> list[str]:
    lines = [
        (f"run {state['run_id']} at seq {state['seq']} of {last_seq}  turn {state['turn_index']}  "
         f"state {state['state']}  run {state['run_status'] or 'not started'}")
    ]
    for message in state["messages"]:
        marker = "" if message["settled"] else "  [partial]" if not message["finished"] else "  [unsealed]"
        lines.append(f"{message['role'] or '?'} {message['message_id']}{marker}")
        lines += [f"  {block['kind']}: {block['text']}" for block in message["blocks"]]
    for tool in state["tools"]:
        lines.append(f"tool {tool['name'] or '?'} {tool['tool_call_id']}: {tool['status']} ({tool['updates']} updates)")
    if state["slots"]:
        lines.append("slots: " + ", ".join(f"{name}={orjson.dumps(value).decode()}" for name, value in state["slots"].items()))
    lines += [f"{d['severity']} {d['code']} at seq {d['seq']}: {d['message']}" for d in state["diagnostics"]]
    return lines


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("run_id", metavar="RUN")
@click.option("--at", "seq", type=click.IntRange(min=0), default=None, metavar="SEQ",
              help="Replay up to this seq (default: the end of the journal).")
@config.bundle_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the canonical JSON replay state.")
def replay(session_id: str, run_id: str, seq: int | None, bundle_root: Path | None, as_json: bool) -> None:
    """Rebuild a run's replay state at --at SEQ: messages so far, tools, slots, state, diagnostics.

    Exit 1 when the session or run is unknown (or the run belongs to another session).
    """
    resolved = _resolve(bundle_root, session_id, run_id)
    replayer = Replayer(run_events(read_bundle(resolved.path)))
    state = replayer.state_at(seq)
    if as_json:
        click.echo(canonical_json(state).decode())
    else:
        click.echo("\n".join(_replay_text(state, replayer.last_seq)))
