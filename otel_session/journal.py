"""Journal records: the one record shape every stage writes and reads (SPEC §5.2).

A journal is ``events.ndjson``: one JSON object a line, ``seq`` 1, 2, 3 … per run with no gaps,
``at`` an RFC 3339 UTC timestamp with microseconds taken from the event's own clock. Readers
ignore unknown fields and keep unknown types in place.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

import orjson

__all__ = [
    "CAPTURE_SCHEMA",
    "CORRELATION_FIELDS",
    "REQUIRED_FIELDS",
    "RUN_SCHEMA",
    "CaptureStatus",
    "EventType",
    "RunKind",
    "decode_line",
    "encode_record",
    "format_timestamp",
    "parse_timestamp",
    "run_id_from_trace_id",
]

RUN_SCHEMA = "otel-session.run.v1"
CAPTURE_SCHEMA = "otel-session.capture.v1"

REQUIRED_FIELDS = ("seq", "at", "type", "session_id", "run_id")
CORRELATION_FIELDS = ("turn_index", "message_id", "tool_call_id", "trace_id", "span_id")


class EventType(str, Enum):
    """Journal record types. Readers keep unknown types in place and change no state for them."""

    RUN_STARTED = "run_started"
    TURN_STARTED = "turn_started"
    MESSAGE_STARTED = "message_started"
    ASSISTANT_DELTA = "assistant_delta"
    MESSAGE_FINISHED = "message_finished"
    TOOL_EXECUTION_STARTED = "tool_execution_started"
    TOOL_EXECUTION_UPDATED = "tool_execution_updated"
    TOOL_EXECUTION_FINISHED = "tool_execution_finished"
    SLOT_WRITE = "slot_write"
    SLOT_DIFF = "slot_diff"
    GUARD_EVALUATED = "guard_evaluated"
    TRANSITION_VERDICT = "transition_verdict"
    TURN_FINISHED = "turn_finished"
    RUN_FINISHED = "run_finished"
    UPSTREAM_DROP = "upstream_drop"


class RunKind(str, Enum):
    LIVE = "live"
    EVAL = "eval"


class CaptureStatus(str, Enum):
    RECORDING = "recording"
    COMPLETE = "complete"
    FAILED = "failed"


def run_id_from_trace_id(trace_id: int) -> str:
    """Return the run id of a trace: ``"run-" + str(uuid.UUID(int=trace_id))``."""
    return "run-" + str(uuid.UUID(int=trace_id))


_second_cache: tuple[int, str] = (-1, "")


def format_timestamp(time_ns: int) -> str:
    """Format nanoseconds since the epoch as ``2026-11-29T22:52:01.123456Z``."""
    global _second_cache
    seconds, micros = divmod(time_ns // 1000, 1_000_000)
    cached_seconds, prefix = _second_cache
    if cached_seconds != seconds:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second_cache = (seconds, prefix)
    return f"{prefix}.{micros:06d}Z"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def parse_timestamp(text: object) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp such as ``at`` (``format_timestamp``'s
    inverse, exact to the microsecond); ``None`` when ``text`` is not one. No offset means UTC."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MICROSECOND * 1000


_ENCODE_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE


def _encode_fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _valid_text(value: Any) -> Any:
    """Replace lone surrogates (not representable in UTF-8) everywhere in ``value``."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_valid_text(k) if isinstance(k, str) else k: _valid_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_valid_text(item) for item in value]
    return value


def encode_record(record: dict[str, Any]) -> bytes:
    """Encode one record as a single NDJSON line (newline included). Never raises for odd values:
    unencodable objects become their ``repr``, lone surrogates become ``?``."""
    try:
        return orjson.dumps(record, default=_encode_fallback, option=_ENCODE_OPTIONS)
    except TypeError:
        return orjson.dumps(_valid_text(record), default=_encode_fallback, option=_ENCODE_OPTIONS)


def decode_line(line: bytes) -> dict[str, Any]:
    """Decode one journal line; raise ``ValueError`` unless it is a JSON object."""
    value = orjson.loads(line)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value
