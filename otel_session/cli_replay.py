"""``otel-session facts`` and ``otel-session replay`` (registered on the main CLI group)."""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
import orjson

from otel_session.core import config
from otel_session.replay.facts import build_session_facts, build_session_wide_facts, run_events
from otel_session.replay.latency import DEFAULT_SLOW_TURN_MS, ENV_SLOW_TURN_MS
from otel_session.bundle.read import read_bundle
from otel_session.replay.reduce import Replayer, canonical_json
from otel_session.replay.resolve import (
    InvalidId, ResolvedRun, RunNotFound, RunResolutionError, SessionNotFound, resolve_run,
)
from otel_session.cli_store import fetched_runs, open_cli_store, reading_root, store_errors, store_option

__all__ = ["export_html", "facts", "replay"]

_T = TypeVar("_T")


def _root(bundle_root: Path | None) -> Path:
    """The bundle root, or exit 1 saying it does not exist (rather than "no runs")."""
    missing = config.missing_bundle_dir(bundle_root)
    if missing is not None:
        click.echo(f"Error: {missing}", err=True)
        sys.exit(1)
    return config.bundle_dir(bundle_root)


def _exit_on_resolution_error(error: RunResolutionError) -> NoReturn:
    """Exit 2 for a malformed id (usage), 1 for an unknown session or run."""
    if isinstance(error, InvalidId):
        raise click.UsageError(str(error)) from None
    click.echo(f"Error: {error}", err=True)
    sys.exit(1)


def _resolve(bundle_root: Path | None, session_id: str, run_id: str | None, include_evals: bool) -> ResolvedRun:
    try:
        return resolve_run(_root(bundle_root), session_id, run_id, include_evals=include_evals)
    except RunResolutionError as error:
        _exit_on_resolution_error(error)


def _is_absent(error: Exception) -> bool:
    """The session or run is not in this root (so it may be in the store)."""
    return isinstance(error, (SessionNotFound, RunNotFound))


def _here_or_stored(bundle_root: Path | None, store_url: str | None, catalog_url: str | None, session_id: str,
                    find: Callable[[Path, str], _T]) -> _T:
    """``find(root, session_id)`` in the bundle root, else (with a store) among the session's stored runs."""
    store = open_cli_store(store_url)
    try:
        if store is None:
            return find(_root(bundle_root), session_id)
        fetched = fetched_runs(reading_root(bundle_root, store), store, catalog_url)
        with store_errors():
            return fetched.here_or_fetched(session_id, find, absent=_is_absent)
    except RunResolutionError as error:
        _exit_on_resolution_error(error)


def _slots_list(names: list[str] | None) -> str:
    if names is None:
        return "?"
    return ", ".join(names) if names else "-"


def _clip(text: str | None, width: int = 40) -> str:
    if not text:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _conversation_rows(turns: list[dict[str, Any]], run_numbers: dict[str, int] | None = None) -> list[str]:
    """The turn table of turns derived from user messages (no states to show; slots when a
    framework's state gave any)."""
    # A framework's state read as slots (pydantic-ai's output) gives these turns slots too.
    slots = any(turn["slot_writes"] or turn["missing_required_slots"] is not None for turn in turns)
    rows = [(("run",) if run_numbers else ()) + ("turn", "ask", "reply", "tools") + (
        ("slots written", "missing") if slots else ()) + ("model calls (tokens in/out)", "first token", "total")]
    for turn in turns:
        tools = [f"{tool['name']}{'!' if tool['status'] == 'error' else ''}" for tool in turn["tools"]]
        written = ", ".join(dict.fromkeys(write["slot"] for write in turn["slot_writes"])) or "-"
        rows.append(((str(run_numbers[turn["run_id"]]),) if run_numbers else ()) + (
            str(turn["turn_index"]), _clip(turn["ask"]), _clip(turn["reply"]), ", ".join(tools) or "-") + (
            (written, _slots_list(turn["missing_required_slots"])) if slots else ()) + (
            ", ".join(map(_model_call, turn["model_calls"])) or "-",
            _ms(turn["time_to_first_token_ms"]), _ms(turn["duration_ms"])))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.append("! the tool failed; first token: the user's message to the first streamed delta")
    return lines


def _turn_rows(turns: list[dict[str, Any]], run_numbers: dict[str, int] | None = None) -> list[str]:
    """The turn table; with ``run_numbers`` a first column names each turn's run."""
    if turns and all(turn["source"] == "derived" for turn in turns):
        return _conversation_rows(turns, run_numbers)
    voice = any(turn["latency"] for turn in turns)
    rows = [(("run",) if run_numbers else ()) + ("turn", "state", "slots written", "missing", "verdict", "repeated asks",
                                                  "model calls (tokens in/out)") + (("voice latency",) if voice else ())]
    for turn in turns:
        written = [write["slot"] for write in turn["slot_writes"]] + [f"{diff['slot']}*" for diff in turn["unattributed_diffs"]]
        verdict = turn["verdict"]
        rows.append(((str(run_numbers[turn["run_id"]]),) if run_numbers else ()) + (
            str(turn["turn_index"]),
            f"{turn['state_before'] or '?'} → {turn['state'] or '?'}",
            ", ".join(written) or "-",
            _slots_list(turn["missing_required_slots"]),
            f"{verdict['to']} ({verdict['reason']})" if verdict else "-",
            ", ".join(turn["repeated_asks"]) or "-",
            ", ".join(map(_model_call, turn["model_calls"])) or "-",
        ) + ((_latency_cell(turn),) if voice else ()))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.append("* unattributed (found by diff); ? not recorded")
    return lines


def _latency_cell(turn: dict[str, Any]) -> str:
    """``412 ms (llm 190, tts 60)``: user stopped speaking → agent started, and its parts; ``SLOW``
    over the threshold; ``interrupted``."""
    latency = turn["latency"] or {}
    cell = f"{latency['user_to_agent_ms']:.0f} ms" if "user_to_agent_ms" in latency else "-"
    parts = [f"{name.removesuffix('_ms').split('_')[0]} {value:.0f}" for name, value in latency.items()
             if name != "user_to_agent_ms"]
    if parts:
        cell += f" ({', '.join(parts)})"
    if turn["slow"]:
        cell += " SLOW"
    return cell + (" interrupted" if turn["interrupted"] else "")


def _latency_lines(summary: dict[str, Any], run_numbers: dict[str, int] | None = None) -> list[str]:
    """``voice latency: p50 …, p95 …`` and one line per slow turn, when any turn has a latency."""
    stats = summary["user_to_agent_ms"]
    if stats is None:
        return []
    lines = [f"voice latency (user stopped → agent started): p50 {stats['p50']:.0f} ms, p95 {stats['p95']:.0f} ms "
             f"over {stats['count']} turn(s); slow over {summary['slow_threshold_ms']:.0f} ms: {len(summary['slow_turns'])}"]
    for slow in summary["slow_turns"]:
        where = f"run {run_numbers[slow['run_id']]} turn" if run_numbers else "turn"
        lines.append(f"slow {where} {slow['turn_index']}: {slow['user_to_agent_ms']:.0f} ms")
    return lines


def _model_call(call: dict[str, Any]) -> str:
    usage = call["usage"]
    cost = "" if call["cost_usd"] is None else f" ${call['cost_usd']:.6f}"
    return f"{call['model'] or '?'} {usage.get('input_tokens', '?')}/{usage.get('output_tokens', '?')}{cost}"


def _usage_line(totals: dict[str, int | None], cost: dict[str, Any] | None = None) -> list[str]:
    """``usage: …`` when any model call reported tokens, and ``cost: …`` (naming the models with no
    price, never counting them as 0), else nothing."""
    if all(count is None for count in totals.values()):
        return []
    counts = {key: "?" if count is None else str(count) for key, count in totals.items()}
    lines = [f"usage: {counts['input_tokens']} input tokens, {counts['output_tokens']} output tokens"]
    if cost is not None:
        usd = "no price" if cost["usd"] is None else f"${cost['usd']:.6f}"
        unpriced = f"; no price for {', '.join(cost['unpriced_models'])}" if cost["unpriced_models"] else ""
        lines.append(f"cost: {usd} (list prices of {cost['prices_as_of'] or '?'}){unpriced}")
    return lines


def _diagnostic_lines(integrity: dict[str, Any], indent: str) -> list[str]:
    return [f"{indent}{d['severity']} {d['code']}: {d['message']}" for d in integrity["diagnostics"]]


def _facts_table(facts: dict[str, Any]) -> list[str]:
    header = f"session {facts['session_id']}  run {facts['run_id']}"
    if facts["fallback_to_latest_run"]:
        header += "  (latest run: no --run given)"
    integrity = facts["integrity"]
    lines = [header, f"integrity: {integrity['status']}", *_diagnostic_lines(integrity, "  ")]
    lines += _usage_line(facts["usage_totals"], facts["cost"])
    lines += [f"note: {note}" for note in facts["notes"]]
    return lines + _turn_rows(facts["turns"]) + _latency_lines(facts["latency"]) + _asked_again_lines(facts)


def _asked_again_lines(facts: dict[str, Any], run_numbers: dict[str, int] | None = None) -> list[str]:
    """A line per turn whose assistant asked a question again (``asks``): which, and the answer that
    did not settle it."""
    def where(run_id: str | None, turn_index: int) -> str:
        return f"run {run_numbers[run_id]} turn {turn_index}" if run_numbers and run_id in run_numbers else f"turn {turn_index}"

    return [f"asked again in {where(again.get('run_id'), again['turn_index'])}: {_clip(again['question'], 60)!r} "
            f"(asked in {where(again['earlier_run_id'], again['earlier_turn_index'])}: "
            f"{_clip(again['earlier_question'], 60)!r}; the user answered {_clip(again['answer'], 60)!r})"
            for again in facts["asked_again"]]


def _session_table(facts: dict[str, Any]) -> list[str]:
    runs = facts["runs"]
    lines = [f"session {facts['session_id']}  {len(runs)} run(s), oldest first"]
    for number, run in enumerate(runs, start=1):
        lines.append(f"  run {number}  {run['run_id']}  {run['created_at']}  {run['kind']}  "
                     f"{run['agent'] or '-'}  integrity: {run['integrity']['status']}")
        lines += _diagnostic_lines(run["integrity"], "    ")
        lines += [f"    {line}" for line in _usage_line(run["usage_totals"], run["cost"])]
        lines += [f"    note: {note}" for note in run["notes"]]
    lines += _usage_line(facts["usage_totals"], facts["cost"])
    numbers = {run["run_id"]: number for number, run in enumerate(runs, start=1)}
    lines += _turn_rows(facts["turns"], numbers) + _latency_lines(facts["latency"], numbers)
    for ask in facts["repeated_asks"]:
        before = ask["asked_before_in"]
        lines.append(f"asked again in run {numbers[ask['run_id']]} turn {ask['turn_index']}: {', '.join(ask['slots'])} "
                     f"(already missing after run {numbers[before['run_id']]} turn {before['turn_index']})")
    return lines + _asked_again_lines(facts, numbers)


_catalog_option = click.option(
    "--catalog", "catalog_url", default=None, metavar="URL",
    help="The run catalog that says where stored runs are, with --store (default: $OTEL_SESSION_CATALOG, else "
         "SQLite in the bundle root).")

_evals_option = click.option("--evals", "include_evals", is_flag=True,
                             help="Include eval runs (kept under evals/<eval_id>/, never in the live index).")


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--run", "run_id", default=None, help="Run id (default: the session's latest run).")
@click.option("--all-runs", is_flag=True, help="Facts of every run of the session, in run order, "
              "with repeated asks across runs.")
@_evals_option
@config.bundle_dir_option
@store_option
@_catalog_option
@click.option("--slow-turn-ms", type=click.FloatRange(min=0), default=None, metavar="MS",
              help=f"Flag turns whose voice latency is over MS (default: ${ENV_SLOW_TURN_MS}, else {DEFAULT_SLOW_TURN_MS:.0f}).")
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
def facts(session_id: str, run_id: str | None, all_runs: bool, include_evals: bool, bundle_root: Path | None,
          store_url: str | None, catalog_url: str | None, slow_turn_ms: float | None, as_json: bool) -> None:
    """Show per-turn session facts of a run: states, slot writes, missing slots, verdicts, repeated asks,
    voice latency (slow turns flagged).

    With --all-runs, the facts of the whole session: its runs' turns in run order, each naming its
    run, and the slots asked for again across runs. Exit 1 when the session or run is unknown (or
    the run belongs to another session), or the bundle root does not exist. With --store, a
    session this root lacks is read from the store, where the catalog says its runs are.
    """
    if all_runs and run_id is not None:
        raise click.UsageError("--all-runs and --run exclude each other")
    try:
        if all_runs:
            result = _here_or_stored(bundle_root, store_url, catalog_url, session_id, lambda root, stored_id: (
                build_session_wide_facts(root, stored_id, include_evals=include_evals, slow_turn_ms=slow_turn_ms)))
            lines = _session_table
        else:
            resolved = _here_or_stored(bundle_root, store_url, catalog_url, session_id, lambda root, stored_id: (
                resolve_run(root, stored_id, run_id, include_evals=include_evals)))
            result = build_session_facts(read_bundle(resolved.path), fallback_to_latest_run=resolved.fallback_to_latest_run,
                                         slow_turn_ms=slow_turn_ms)
            lines = _facts_table
    except ValueError as error:  # a malformed $OTEL_SESSION_SLOW_TURN_MS
        raise click.UsageError(str(error)) from None
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo("\n".join(lines(result)))


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
@_evals_option
@config.bundle_dir_option
@store_option
@_catalog_option
@click.option("--json", "as_json", is_flag=True, help="Print the canonical JSON replay state.")
def replay(session_id: str, run_id: str, seq: int | None, include_evals: bool, bundle_root: Path | None,
           store_url: str | None, catalog_url: str | None, as_json: bool) -> None:
    """Rebuild a run's replay state at --at SEQ: messages so far, tools, slots, state, diagnostics.

    Exit 1 when the session or run is unknown (or the run belongs to another session), or the
    bundle root does not exist. With --store, a run this root lacks is read from the store.
    """
    resolved = _here_or_stored(bundle_root, store_url, catalog_url, session_id, lambda root, stored_id: (
        resolve_run(root, stored_id, run_id, include_evals=include_evals)))
    replayer = Replayer(run_events(read_bundle(resolved.path)))
    state = replayer.state_at(seq)
    if as_json:
        click.echo(canonical_json(state).decode())
    else:
        click.echo("\n".join(_replay_text(state, replayer.last_seq)))


@click.command("export-html")
@click.argument("session_id", metavar="SESSION")
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The HTML file to write.")
@_evals_option
@config.bundle_dir_option
def export_html(session_id: str, run_id: str | None, output: Path, include_evals: bool, bundle_root: Path | None) -> None:
    """Write one run (default: the session's latest) as a self-contained HTML file: the replay page,
    its facts and its bundle inlined. It opens from disk in a browser, with no server and no network.
    """
    from otel_session.viewer.export import export_html as render

    resolved = _resolve(bundle_root, session_id, run_id, include_evals)
    html = render(_root(bundle_root), resolved.session_id, resolved.run_id)
    output.write_text(html, encoding="utf-8")
    click.echo(f"{output}: run {resolved.run_id} of session {resolved.session_id}"
               + (" (the latest run)" if resolved.fallback_to_latest_run else ""))
