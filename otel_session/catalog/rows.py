"""A run's catalog row, read from its bundle in one pass over its records.

Contract::

    row = row_of(root, run_path)          # reads run.json, capture.json, the journal, feedback; never raises
    row = sealed_row(root, run_path)      # the same, for a run its writer has just sealed: faster
    row = light_row(root, run_path, manifest, capture)   # what the writer's hook writes at seal: nothing read
    row.figures_pending                   # light and opened rows: their figures are a reader's to count
    row = opened_row(root, run_path, manifest)   # the row of a run just opened: ids and times only
    stamp = bundle_stamp(run_path)        # sizes and times of the bundle's files (a changed bundle)

The figures are counted from the journal records directly, not from ``otel_session.replay``
(the catalog sits below replay, so that the bundle writer's hook can fill it): ``turns``
(``turn_started``), ``messages`` (``message_started``), ``model_calls`` (assistant messages whose
``message_finished`` names a ``model`` or ``usage``), ``tool_calls``, ``tool_errors``,
``guards_blocked`` (``guard_evaluated`` with ``passed: false``), ``repeated_asks`` (turns that asked
again for required slots the previous turn left missing: the turn facts' ``repeated_asks``, SPEC
§7.2), tokens, the models named, and voice latency p50/p95 (``turn_finished.payload.latency.
user_to_agent_ms``, nearest rank, as ``replay.latency``). tests/catalog checks each against the
facts of the same bundles. A run is ``error`` when it finished with ``error`` or a tool failed;
``interrupted`` when it or a turn was interrupted; ``running`` while it has no ``run_finished``.
"""

from __future__ import annotations

import math
import os
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from otel_session.bundle.read import (
    BundleRead, BundleStatus, DiagnosticCode, iter_line_chunks, read_bundle, read_manifest,
)
from otel_session.core import layout
from otel_session.core.journal import TRUNCATED_FIELD, CaptureStatus, parse_timestamp

from .model import RunRow, Scope

__all__ = [
    "MAX_SEARCH_TEXT", "bundle_stamp", "feedback_score", "is_score_value", "light_row", "opened_row", "row_of", "score_summary",
    "sealed_row",
]

MAX_SEARCH_TEXT = 4000
"""Characters of message text kept per run for the text filter."""

_MAX_PROBLEMS = 20
_MAX_MODELS = 8
_STAMPED = (layout.RUN_FILE, layout.EVENTS_FILE, layout.CAPTURE_FILE, layout.FEEDBACK_FILE)
_TALLIED = frozenset(name.encode() for name in (
    "run_started", "run_finished", "turn_started", "turn_finished", "message_started", "message_finished",
    "tool_execution_started", "tool_execution_finished", "guard_evaluated", "upstream_drop"))
"""The record types a row counts; the rest (deltas, slot writes, updates: most of a journal) are not parsed."""
_TYPE_KEY = b'"type":"'
_TRUNCATED_MARK = b'"%s":"depth"' % TRUNCATED_FIELD.encode()
_SEALED = frozenset({CaptureStatus.COMPLETE.value, CaptureStatus.FAILED.value})
_SEQ_PREFIX = b'{"seq":%d,'
"""How each line of a journal its writer sealed starts: the record's seq first (``journal.encode_record``)."""


def _ms(at: Any) -> float | None:
    ns = parse_timestamp(at)
    return None if ns is None else ns / 1e6


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _str_list(value: Any) -> list[str] | None:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else None


_MESSAGE_ID_KEY = b'"message_id":"'


def _message_id(line: bytes) -> str | None:
    """The ``message_id`` of an encoded record, read without parsing it (None if it has none)."""
    start = line.find(_MESSAGE_ID_KEY)
    if start < 0:
        return None
    start += len(_MESSAGE_ID_KEY)
    return line[start : line.find(b'"', start)].decode("utf-8", "replace")


def _nearest_rank(ordered: list[float], quantile: float) -> float:
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


class _Tally:
    """One pass over a run's records."""

    def __init__(self) -> None:
        self.agent: str | None = None
        self.tags: tuple[str, ...] = ()
        self.metadata: tuple[tuple[str, str], ...] = ()
        self.run_status: str | None = None
        self.scores: list[tuple[str, Any]] = []
        """``(name, value)`` of the scores the app set on its run's and turns' spans, in record order."""
        self.interrupted_turn = False
        self.turns = 0
        self.messages = 0
        self.model_calls = 0
        self.models: dict[str, None] = {}
        self.tokens: dict[str, int | None] = {"input_tokens": None, "output_tokens": None}
        self.tool_calls = 0
        self.tool_errors = 0
        self.guards_blocked = 0
        self.repeated_asks = 0
        self.latencies: list[float] = []
        self.usage_by_model: dict[str, list[Any]] = {}
        """model -> [calls, input_tokens, output_tokens, cached_input_tokens] (None: never reported)."""
        self._recorded_turn_ms: list[float] = []
        self._asked_turn_ms: list[float] = []
        self._turn_started_ms: float | None = None
        self._asked_ms: float | None = None
        """With no turn records: when the current user message started, and the last reply after it."""
        self._replied_ms: float | None = None
        self.tool_names: dict[str, str] = {}
        self.roles: dict[str, str] = {}
        self.problems: list[dict[str, Any]] = []
        self.text: list[str] = []
        self.text_chars = 0
        self.turn_asked = False
        """An assistant message was started in the current turn."""
        self.turn_required: list[str] = []
        """The current turn's ``required_slots`` as it started (its finish may name them instead)."""
        self.previous_missing: list[str] | None = None
        self.upstream_drop = False
        """The previous finished turn's ``missing_required_slots``."""

    def problem(self, kind: str, message: str, seq: int | None = None) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append({"kind": kind, "message": message, **({"seq": seq} if seq is not None else {})})

    def add_text(self, text: Any) -> None:
        if isinstance(text, str) and self.text_chars < MAX_SEARCH_TEXT:
            piece = text[: MAX_SEARCH_TEXT - self.text_chars]
            self.text.append(piece)
            self.text_chars += len(piece) + 1

    def feed(self, event: dict[str, Any]) -> None:
        kind, payload, seq = event["type"], _payload(event), event["seq"]
        if kind == "message_started":
            self.messages += 1
            if isinstance(event.get("message_id"), str):
                role = self.roles[event["message_id"]] = str(payload.get("role", ""))
                self.turn_asked = self.turn_asked or role == "assistant"
                if role == "user":
                    self.close_asked_turn()
                    self._asked_ms = _ms(event.get("at"))
        elif kind == "message_finished":
            self._message_finished(event, payload)
        elif kind == "tool_execution_started":
            self.tool_calls += 1
            self.tool_names[str(event.get("tool_call_id"))] = str(payload.get("name", "tool"))
        elif kind == "tool_execution_finished" and payload.get("status") == "error":
            self.tool_errors += 1
            name = self.tool_names.get(str(event.get("tool_call_id")), "tool")
            error = payload.get("error")
            detail = f": {error}" if isinstance(error, str) else ""
            self.problem("tool_error", f"tool {name} failed{detail}", seq)
        elif kind == "guard_evaluated" and payload.get("passed") is False:
            self.guards_blocked += 1
        elif kind == "turn_started":
            self.turns += 1
            self._turn_started_ms = _ms(event.get("at"))
            self.turn_asked = False
            self.turn_required = _str_list(payload.get("required_slots")) or []
        elif kind == "turn_finished":
            self._turn_finished(event, payload, seq)
        elif kind == "run_started":
            self.agent = payload.get("agent") if isinstance(payload.get("agent"), str) else self.agent
            self.tags = tuple(sorted(set(_str_list(payload.get("tags")) or ())))
            metadata = payload.get("metadata")
            if isinstance(metadata, dict):
                self.metadata = tuple(sorted((str(key), str(value)) for key, value in metadata.items()
                                             if isinstance(value, (str, int, float))))
        elif kind == "run_finished":
            self.add_scores(payload)
            self.run_status = payload.get("status") if isinstance(payload.get("status"), str) else "unknown"
            if self.run_status != "ok":
                reason = f" ({payload['reason']})" if isinstance(payload.get("reason"), str) else ""
                self.problem(f"run_{self.run_status}", f"the run finished {self.run_status}{reason}", seq)

    def close_asked_turn(self) -> None:
        """End a turn made of a user message and its replies (a run that records no turns)."""
        if self._asked_ms is not None and self._replied_ms is not None and self._replied_ms >= self._asked_ms:
            self._asked_turn_ms.append(self._replied_ms - self._asked_ms)
        self._asked_ms = self._replied_ms = None

    def turn_times(self) -> list[float]:
        """Every turn's time, sorted: the recorded turns', else the user messages'."""
        self.close_asked_turn()
        return sorted(self._recorded_turn_ms if self.turns else self._asked_turn_ms)

    def add_scores(self, payload: dict[str, Any]) -> None:
        scores = payload.get("scores")
        if isinstance(scores, dict):
            self.scores += [(str(name), value) for name, value in scores.items() if is_score_value(value)]

    def _turn_finished(self, event: dict[str, Any], payload: dict[str, Any], seq: int) -> None:
        self.add_scores(payload)
        finished_ms = _ms(event.get("at"))
        if self._turn_started_ms is not None and finished_ms is not None and finished_ms >= self._turn_started_ms:
            self._recorded_turn_ms.append(finished_ms - self._turn_started_ms)
        self._turn_started_ms = None
        if payload.get("interrupted") is True:
            self.interrupted_turn = True
            self.problem("turn_interrupted", f"turn {event.get('turn_index', '?')} was interrupted", seq)
        latency = payload.get("latency")
        value = latency.get("user_to_agent_ms") if isinstance(latency, dict) else None
        if type(value) in (int, float) and value >= 0 and math.isfinite(value):
            self.latencies.append(float(value))
        missing = _str_list(payload.get("missing_required_slots"))
        required = _str_list(payload.get("required_slots")) or self.turn_required
        if missing and self.previous_missing and self.turn_asked:
            if any(slot in self.previous_missing and slot in required for slot in missing):
                self.repeated_asks += 1
        self.previous_missing = missing

    def _message_finished(self, event: dict[str, Any], payload: dict[str, Any]) -> None:
        for block in payload.get("content") or ():
            if isinstance(block, dict) and block.get("kind", "text") == "text":
                self.add_text(block.get("text"))
        role = self.roles.get(str(event.get("message_id")), "assistant")
        if role == "assistant" and self._asked_ms is not None:
            self._replied_ms = _ms(event.get("at"))
        usage = payload.get("usage")
        model = payload.get("model")
        if role != "assistant" or not (isinstance(model, str) or isinstance(usage, dict)):
            return
        self.model_calls += 1
        if isinstance(model, str) and len(self.models) < _MAX_MODELS:
            self.models[model] = None
        if isinstance(model, str) and (model in self.usage_by_model or len(self.usage_by_model) < _MAX_MODELS):
            counts = self.usage_by_model.setdefault(model, [model, 0, None, None, None])
            counts[1] += 1
            for position, key in enumerate(("input_tokens", "output_tokens", "cached_input_tokens"), start=2):
                value = _count(usage.get(key)) if isinstance(usage, dict) else None
                if value is not None:
                    counts[position] = (counts[position] or 0) + value
        for key in self.tokens:
            value = _count(usage.get(key)) if isinstance(usage, dict) else None
            if value is not None:
                self.tokens[key] = (self.tokens[key] or 0) + value

    def status(self) -> str:
        if self.run_status == "error" or self.tool_errors:
            return "error"
        if self.run_status == "interrupted" or self.interrupted_turn:
            return "interrupted"
        return "running" if self.run_status is None else "ok"


def bundle_stamp(run_path: str | os.PathLike[str]) -> str:
    """Sizes and modification times of the bundle's files, as one string (``-`` for a missing file)."""
    parts = []
    for name in _STAMPED:
        try:
            stat = os.stat(os.path.join(run_path, name), follow_symlinks=False)
        except OSError:
            parts.append("-")
        else:
            parts.append(f"{stat.st_size}.{stat.st_mtime_ns}")
    return ":".join(parts)


def _score_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def feedback_score(run_path: str | os.PathLike[str]) -> tuple[int, float | None, list[tuple[str, Any]]]:
    """``(count, mean rating, scores)`` of the run's ``feedback.ndjson`` (symlinks never followed):
    its ratings, and its scores' ``(name, value)`` in file order."""
    try:
        fd = os.open(os.path.join(run_path, layout.FEEDBACK_FILE), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
    except OSError:
        return 0, None, []
    ratings = []
    scores: list[tuple[str, Any]] = []
    for line in data.splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        if type(record.get("rating")) is int:
            ratings.append(record["rating"])
        elif record.get("kind") == "score" and isinstance(record.get("name"), str) and is_score_value(record.get("value")):
            scores.append((record["name"], record["value"]))
    return (len(ratings), round(sum(ratings) / len(ratings), 2) if ratings else None, scores)


def score_summary(scores: list[tuple[str, Any]]) -> tuple[tuple[str, str, int, float | None], ...]:
    """Per name ``(name, last value as text, count, mean)`` (``RunRow.scores``): the mean of numbers
    and booleans (true is 1); None when a category is among them."""
    found: dict[str, list[Any]] = {}  # name -> [last, count, numbers]
    for name, value in scores:
        known = found.setdefault(name, [None, 0, []])
        known[0] = _score_text(value)
        known[1] += 1
        if not isinstance(value, str):
            known[2].append(float(value))
    return tuple((name, last, count, round(sum(numbers) / count, 4) if len(numbers) == count else None)
                 for name, (last, count, numbers) in sorted(found.items()))


def is_score_value(value: Any) -> bool:
    """A score's value: a finite number, a boolean, or a category (text of at most 100 characters)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    return isinstance(value, str) and 0 < len(value) <= 100


def _place(root: Path, run_path: str | os.PathLike[str]) -> tuple[str, str, Scope]:
    root_name, path_name = os.fspath(root), os.fspath(run_path)
    if not path_name.startswith(root_name + os.sep):
        raise ValueError(f"{path_name} is not under {root_name}")
    relative = path_name[len(root_name) + 1 :].replace(os.sep, "/")
    directory = relative.rpartition("/")[0]
    return relative, directory, Scope.EVAL if relative.startswith("evals/") else Scope.LIVE


def opened_row(root: Path, run_path: str | os.PathLike[str], manifest: dict[str, Any]) -> RunRow:
    """The row of a run that has just opened: what ``run.json`` says, no records yet (``run_path``
    as the writer names it: a string, no ``Path`` made for each run)."""
    return _manifest_row(root, run_path, manifest, capture_status="recording", integrity="recording")


def _manifest_row(root: Path, run_path: str | os.PathLike[str], manifest: dict[str, Any], **capture: Any) -> RunRow:
    """What ``run.json`` says, and ``capture``'s fields: made at once (the writer's hook makes one a run)."""
    path, directory, scope = _place(root, run_path)
    return RunRow(
        path=path, directory=directory, scope=scope, session_id=manifest.get("session_id"),
        run_id=str(manifest.get("run_id") or os.path.basename(run_path)), kind=str(manifest.get("kind", "?")),
        created_at=str(manifest.get("created_at", "")), eval_id=manifest.get("eval_id"), agent=manifest.get("agent"),
        service=manifest.get("service"), **capture,
    )


def light_row(root: Path, run_path: str | os.PathLike[str], manifest: dict[str, Any] | None = None,
              capture: dict[str, Any] | None = None) -> RunRow:
    """The row of a run its writer has just sealed, from its ``run.json`` and terminal capture
    alone (as the writer wrote them, else read from the bundle): its capture status (as integrity
    too) and record count; its figures pending (an empty stamp), counted by the first reader that
    lists it or by a catch-up pass (``sync.complete_rows``). Counting them here cost the collector
    a fifth of its CPU (docs/performance.md)."""
    if manifest is None:
        manifest = read_manifest(Path(run_path)) or {}
    if capture is None:
        try:
            capture = orjson.loads(Path(run_path, layout.CAPTURE_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            capture = None
    status = capture.get("status") if isinstance(capture, dict) and isinstance(capture.get("status"), str) else None
    count = capture.get("event_count") if isinstance(capture, dict) else None
    return _manifest_row(root, run_path, manifest, capture_status=status, integrity=status or "invalid",
                         status="ok" if status == CaptureStatus.COMPLETE.value else "running",
                         event_count=count if type(count) is int and count >= 0 else 0)


def row_of(root: Path, run_path: Path) -> RunRow:
    """The row of the run at ``run_path`` as its bundle reads now (the tolerant reader: a bundle it
    cannot read is a row with its problem, never an error)."""
    stamp = bundle_stamp(run_path)
    return _row(root, read_bundle(run_path), stamp)


def sealed_row(root: Path, run_path: Path) -> RunRow:
    """The row of a run its writer has just sealed, parsing only the records a row counts.

    It leans on what the writer guarantees of a bundle it sealed (a manifest, a terminal capture
    that counts every line, one record a line, seqs in order) and checks the cheap parts of it on
    every line, not only on those it parses: the bundle may have been copied in or fetched from a
    store. Each line starts ``{"seq":N,`` with N its line number (``encode_record`` writes ``seq``
    first), ends with ``}``, names a ``"type":"``, and the last one ends with a newline. When
    anything is not so, the row is :func:`row_of`'s (the tolerant reader's verdict). Its integrity
    is the capture's status; its diagnostics the warnings a sealed bundle may carry (upstream drops,
    values cut for depth)."""
    stamp = bundle_stamp(run_path)
    manifest = read_manifest(run_path)
    try:
        capture = orjson.loads((run_path / layout.CAPTURE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return row_of(root, run_path)
    if manifest is None or not isinstance(capture, dict) or capture.get("status") not in _SEALED:
        return row_of(root, run_path)
    tally, count, first, last, truncated = _Tally(), 0, None, None, False
    try:
        with open(run_path / layout.EVENTS_FILE, "rb") as handle:
            for chunk in iter_line_chunks(handle):  # a block at a time: a 1M-record journal is 250 MB
                lines = chunk.split(b"\n")
                torn = lines.pop()
                heads = map(_SEQ_PREFIX.__mod__, range(count + 1, count + 1 + len(lines)))  # each line's own seq
                if torn or not (all(map(bytes.endswith, lines, repeat(b"}"))) and all(map(bytes.startswith, lines, heads))):
                    return row_of(root, run_path)  # a torn tail, a line that ends no object, a seq out of place
                count += len(lines)
                first = lines[0] if first is None else first
                last = lines[-1]
                truncated = truncated or _TRUNCATED_MARK in chunk
                for line in lines:
                    start = line.find(_TYPE_KEY)
                    if start < 0:
                        return row_of(root, run_path)  # a line that is not a record
                    start += len(_TYPE_KEY)
                    kind = line[start : line.find(b'"', start)]
                    if kind not in _TALLIED or (kind == b"message_finished" and tally.text_chars >= MAX_SEARCH_TEXT
                                                and tally.roles.get(_message_id(line)) not in (None, "assistant")):
                        continue  # a message that is not a model call, once the search text is full: it counts no more
                    event = orjson.loads(line)
                    tally.feed(event)
                    if event["type"] == "upstream_drop":
                        tally.upstream_drop = True
        if capture.get("event_count") != count:
            return row_of(root, run_path)
        edges = [orjson.loads(first), orjson.loads(last)] if count else []
    except (OSError, orjson.JSONDecodeError):
        return row_of(root, run_path)
    diagnostics = []
    if tally.upstream_drop:
        diagnostics.append(DiagnosticCode.UPSTREAM_DROP)
    if truncated:
        diagnostics.append(DiagnosticCode.VALUE_TRUNCATED)
    bundle = BundleRead(run_path, BundleStatus(capture["status"]), manifest, capture, [], [])
    return _row(root, bundle, stamp, tally=tally, event_count=count, edges=edges,
                diagnostics=tuple(code.value for code in diagnostics))


def _row(root: Path, bundle: BundleRead, stamp: str, *, tally: _Tally | None = None, event_count: int | None = None,
         edges: list[dict[str, Any]] | None = None, diagnostics: tuple[str, ...] | None = None) -> RunRow:
    """The row of ``bundle``: its records tallied here unless ``tally`` has them already."""
    path, directory, scope = _place(root, bundle.path)
    manifest = bundle.manifest or {}
    capture = bundle.capture or {}
    if tally is None:
        tally = _Tally()
        for event in bundle.events:
            tally.feed(event)
    if capture.get("status") == "failed":
        failure = capture.get("failure") if isinstance(capture.get("failure"), dict) else {}
        tally.problem("capture_failed", f"capture failed: {failure.get('code', '?')} {failure.get('message', '')}".strip())
    if bundle.status.value == "invalid":
        codes = sorted({diagnostic.code.value for diagnostic in bundle.diagnostics})
        tally.problem("invalid_bundle", f"the bundle is invalid: {', '.join(codes)}")
    edges = bundle.events if edges is None else edges
    started = edges[0].get("at") if edges else None
    ended = edges[-1].get("at") if edges else None
    start_ms, end_ms = _ms(started), _ms(ended)
    latencies = sorted(tally.latencies)
    turn_times = tally.turn_times()
    feedback_count, feedback_mean, scores = feedback_score(bundle.path)
    scores = score_summary(tally.scores + scores)  # the app's (from its spans), then the viewer's
    return RunRow(
        path=path, directory=directory, scope=scope, session_id=manifest.get("session_id"),
        run_id=str(manifest.get("run_id") or bundle.path.name), kind=str(manifest.get("kind", "?")),
        created_at=str(manifest.get("created_at", "")), eval_id=manifest.get("eval_id"),
        agent=tally.agent or manifest.get("agent"), service=manifest.get("service"),
        capture_status=capture.get("status") if isinstance(capture.get("status"), str) else None,
        integrity=bundle.status.value, status=tally.status(), started_at=started, finished_at=ended,
        duration_ms=round(end_ms - start_ms, 3) if start_ms is not None and end_ms is not None else None,
        event_count=len(bundle.events) if event_count is None else event_count, turns=tally.turns, messages=tally.messages, model_calls=tally.model_calls,
        tool_calls=tally.tool_calls, tool_errors=tally.tool_errors, guards_blocked=tally.guards_blocked,
        repeated_asks=tally.repeated_asks, input_tokens=tally.tokens["input_tokens"],
        output_tokens=tally.tokens["output_tokens"], models=tuple(tally.models),
        latency_p50_ms=_nearest_rank(latencies, 0.50) if latencies else None,
        latency_p95_ms=_nearest_rank(latencies, 0.95) if latencies else None,
        turn_p50_ms=_nearest_rank(turn_times, 0.50) if turn_times else None,
        turn_p95_ms=_nearest_rank(turn_times, 0.95) if turn_times else None,
        usage_by_model=tuple(tuple(counts) for counts in tally.usage_by_model.values()),
        problems=tuple(tally.problems),
        diagnostics=tuple(dict.fromkeys(diagnostic.code.value for diagnostic in bundle.diagnostics))
        if diagnostics is None else diagnostics,
        feedback_count=feedback_count, feedback_mean=feedback_mean, scores=scores, tags=tally.tags, metadata=tally.metadata,
        search_text="\n".join(tally.text).lower(), stamp=stamp,
    )
