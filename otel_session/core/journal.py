"""Journal records: the one record shape every stage writes and reads (SPEC §5.2).

A journal is ``events.ndjson``: one JSON object a line, ``seq`` 1, 2, 3 … per run with no gaps,
``at`` an RFC 3339 UTC timestamp with microseconds taken from the event's own clock. Readers
ignore unknown fields and keep unknown types in place.

Contract::

    line = encode_record(record)    # one NDJSON line; never raises for any value
    text = encode_json(value)       # one value as JSON text (a span attribute), by the same rules
    record = decode_line(line)      # ValueError unless the line is a JSON object

    # the same line from parts, a run's constant ones encoded once (the recorder's way):
    head = encode_head(type, session_id, run_id, turn_index, message_id, tool_call_id, trace_id, span_id)
    body = composed_payload(payload, at_ns)  # None: only encode_record can tell (a value deep enough to cut)
    line = compose_line(seq, at_ns, head, body)   # == encode_record(the record), byte for byte
    heads = HeadEncoder(session_id, run_id)   # one run's heads from parts encoded once
    head = heads.encode(type, turn_index, message_id, tool_call_id, trace_id, span_id)   # == encode_head(...)
    parts = heads.parts(records)                 # many records' (head, payload) in one loop, before a lock
    lines = stamp_lines(seq, records, parts, whole)   # their lines numbered from seq (under the lock)

A record nests at most ``MAX_DEPTH`` levels (the record object is level 1). Deeper objects and
arrays, which JSON codecs cannot all encode or decode (orjson stops at 255 levels), are replaced
by ``DEPTH_MARKER`` and the record says so with ``"truncated": "depth"``, on encoding and again on
decoding (a journal written by hand), so every value a reader returns can be encoded again.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Protocol

import orjson

__all__ = [
    "CAPTURE_SCHEMA",
    "CORRELATION_FIELDS",
    "DEPTH_MARKER",
    "MAX_DEPTH",
    "REQUIRED_FIELDS",
    "RUN_SCHEMA",
    "RecordFields",
    "CaptureStatus",
    "EventType",
    "HeadEncoder",
    "RunKind",
    "TRUNCATED_FIELD",
    "compose_line",
    "composed_payload",
    "decode_line",
    "encode_head",
    "encode_json",
    "encode_record",
    "format_timestamp",
    "parse_timestamp",
    "run_id_from_trace_id",
    "stamp_lines",
]

RUN_SCHEMA = "otel-session.run.v1"
CAPTURE_SCHEMA = "otel-session.capture.v1"

REQUIRED_FIELDS = ("seq", "at", "type", "session_id", "run_id")

MAX_DEPTH = 128
"""Levels of objects and arrays a record holds (the record itself is level 1); deeper ones are cut."""
DEPTH_MARKER = f"[truncated: nested deeper than {MAX_DEPTH} levels]"
"""What stands in place of an object or array nested deeper than ``MAX_DEPTH``."""
TRUNCATED_FIELD = "truncated"
"""Set to ``"depth"`` on a record whose values were cut at ``MAX_DEPTH``."""
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
    SPAN = "span"
    """One span as it ended (opt-in, ``OTEL_SESSION_SPAN_RECORDS``): ``normalize.span_record``."""


class RunKind(str, Enum):
    LIVE = "live"
    EVAL = "eval"


class CaptureStatus(str, Enum):
    RECORDING = "recording"
    COMPLETE = "complete"
    FAILED = "failed"


def run_id_from_trace_id(trace_id: int) -> str:
    """Return the run id of a trace: ``"run-" + str(uuid.UUID(int=trace_id))``, written from its
    hex digits (a ``UUID`` object a run cost more than the rest of its routing)."""
    if not 0 <= trace_id < 1 << 128:
        raise ValueError("a trace id is a 128-bit unsigned integer")
    digits = f"{trace_id:032x}"
    return f"run-{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


_second_prefixes: dict[int, bytes] = {}  # second → b"2026-11-29T22:52:01"; emptied when it holds _PREFIXES_KEPT
_PREFIXES_KEPT = 4096


def _second_prefix(seconds: int) -> bytes:
    """``seconds``' ``at`` up to the fraction (``format_timestamp``'s cache; a miss fills it)."""
    if len(_second_prefixes) >= _PREFIXES_KEPT:
        _second_prefixes.clear()
    prefix = _second_prefixes[seconds] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)).encode()
    return prefix


def format_timestamp(time_ns: int) -> str:
    """Format nanoseconds since the epoch as ``2026-11-29T22:52:01.123456Z``.

    The per-second prefixes are cached for many seconds at once: the records of concurrent
    requests interleave their runs' seconds, and a one-entry cache rebuilt the prefix at each switch.
    """
    seconds, micros = divmod(time_ns // 1000, 1_000_000)
    prefix = _second_prefixes.get(seconds) or _second_prefix(seconds)
    return (b"%b.%06dZ" % (prefix, micros)).decode()


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
    """Replace what orjson cannot write everywhere in ``value``: lone surrogates (not representable
    in UTF-8) and integers past 64 bits (written as their decimal text)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if type(value) is int and not -(2**63) <= value < 2**64:
        return str(value)
    if isinstance(value, dict):
        return {_valid_text(k) if isinstance(k, str) else k: _valid_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_valid_text(item) for item in value]
    return value


def _too_deep(value: Any, depth: int) -> bool:
    """True when a container at level ``depth`` or below it is nested past ``MAX_DEPTH``
    (the recursion stops there, so it is bounded whatever the value)."""
    if isinstance(value, dict):
        if depth > MAX_DEPTH:
            return True
        return any(_too_deep(item, depth + 1) for item in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        if depth > MAX_DEPTH:
            return True
        return any(_too_deep(item, depth + 1) for item in value)
    return False


def _cut(value: Any, depth: int) -> Any:
    """``value`` with every container nested past ``MAX_DEPTH`` replaced by ``DEPTH_MARKER``."""
    if isinstance(value, dict):
        return DEPTH_MARKER if depth > MAX_DEPTH else {key: _cut(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return DEPTH_MARKER if depth > MAX_DEPTH else [_cut(item, depth + 1) for item in value]
    return value


def _openers(line: bytes) -> int:
    return line.count(b"[") + line.count(b"{")


_SHORT_LINE = 2 * MAX_DEPTH + 1
"""Bytes a line needs to nest deeper than ``MAX_DEPTH`` (an opener and a closer per level)."""


def _dumps(value: Any, option: int) -> bytes:
    try:
        return orjson.dumps(value, default=_encode_fallback, option=option)
    except TypeError:
        return orjson.dumps(_valid_text(value), default=_encode_fallback, option=option)


def _encode(value: Any, option: int, line: bytes | None = None) -> tuple[bytes, bool]:
    """``value`` as JSON (``line`` if it is already that), and whether containers nested past
    ``MAX_DEPTH`` were cut from it."""
    if line is None:
        try:
            line = _dumps(value, option)
        except (TypeError, RecursionError):  # orjson's nesting limit (or a value deeper than Python recurses)
            return _dumps(_cut(value, 1), option), True
    # Text too short for, or with no more openers than, MAX_DEPTH + 1 levels cannot nest deeper.
    if len(line) <= _SHORT_LINE or _openers(line) <= MAX_DEPTH or not _too_deep(value, 1):
        return line, False
    return _dumps(_cut(value, 1), option), True


def encode_record(record: dict[str, Any]) -> bytes:
    """Encode one record as a single NDJSON line (newline included). Never raises for odd values:
    unencodable objects become their ``repr``, lone surrogates become ``?``, containers nested
    past ``MAX_DEPTH`` become ``DEPTH_MARKER`` (and the record gets ``"truncated": "depth"``)."""
    try:  # the hot path, inlined: one encode; a line this short cannot open MAX_DEPTH + 1 containers
        line = orjson.dumps(record, default=_encode_fallback, option=_ENCODE_OPTIONS)
        if len(line) <= _SHORT_LINE:
            return line
    except TypeError:
        line = None
    line, cut = _encode(record, _ENCODE_OPTIONS, line)
    if cut:
        line, _ = _encode({**_cut(record, 1), TRUNCATED_FIELD: "depth"}, _ENCODE_OPTIONS)
    return line


def encode_json(value: Any) -> bytes:
    """One value as JSON text (no newline) by ``encode_record``'s rules: never raises, containers
    nested past ``MAX_DEPTH`` (the value itself is level 1) become ``DEPTH_MARKER``."""
    try:  # the hot path, inlined (span attributes): one encode
        text = orjson.dumps(value, default=_encode_fallback, option=orjson.OPT_NON_STR_KEYS)
        if len(text) <= _SHORT_LINE:
            return text
    except TypeError:
        text = None
    return _encode(value, orjson.OPT_NON_STR_KEYS, text)[0]


# A record's line in parts. The record's fields are, in order: ``seq``, ``at``, the head (``type``,
# ``session_id``, ``run_id``, the correlation fields present, the ``payload`` key), the payload.
# orjson writes a dict as its keys' and values' texts joined, with no whitespace, so the parts
# joined are byte for byte the whole record's encoding.
_LINE = b'{"seq":%d,"at":"%b.%06dZ",%b%b}\n'  # seq, the second's prefix, µs, the head, the payload
COMPOSED_AT_NS = range(0, 253_402_300_800 * 1_000_000_000)
"""Event times a line is composed for (years 1970–9999); a record at another goes to ``encode_record``."""
_SHORT_PAYLOAD = _SHORT_LINE - 2
"""Bytes a payload needs to nest ``MAX_DEPTH`` levels (in the record: past ``MAX_DEPTH``)."""


def encode_head(
    event_type: str,
    session_id: str,
    run_id: str,
    turn_index: int | None = None,
    message_id: str | None = None,
    tool_call_id: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
) -> bytes:
    """The record's fields from ``type`` to the ``payload`` key, as ``encode_record`` writes them
    (``None`` fields left out), for ``compose_line``: one encoding per message or span."""
    fields: dict[str, Any] = {"type": event_type, "session_id": session_id, "run_id": run_id}
    for key, value in zip(CORRELATION_FIELDS, (turn_index, message_id, tool_call_id, trace_id, span_id)):
        if value is not None:
            fields[key] = value
    fields["payload"] = None
    return encode_record(fields)[1:-6]  # up to ``null}\n``


def composed_payload(payload: dict[str, Any] | None, at_ns: Any) -> bytes | None:
    """The payload as ``encode_record`` writes it inside a record, when its record's line can be
    composed from parts (a head encoded once, this, the stamp); None when only ``encode_record``
    can tell: no payload, an integer time outside ``COMPOSED_AT_NS``, a value it must fall back for
    (lone surrogates) or one nested deep enough that the record might pass ``MAX_DEPTH``."""
    if payload is None or type(at_ns) is not int or at_ns not in COMPOSED_AT_NS:
        return None
    try:
        text = orjson.dumps(payload, default=_encode_fallback, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return None
    if len(text) <= _SHORT_PAYLOAD or _openers(text) < MAX_DEPTH:
        return text
    return None


def compose_line(seq: int, at_ns: int, head: bytes, payload: bytes) -> bytes:
    """The record's NDJSON line from its parts: ``encode_record`` of the same record, byte for byte."""
    seconds, micros = divmod(at_ns // 1000, 1_000_000)
    return _LINE % (seq, _second_prefixes.get(seconds) or _second_prefix(seconds), micros, head, payload)


class HeadEncoder:
    """``encode_head``'s bytes for one run's records, composed from parts encoded once (the run's
    session and run ids, each record type, turn index and trace/span id pair) and the record's own
    message and tool call ids: the collector's records share little but these. A part orjson
    cannot encode alone exactly as inside the record (a lone surrogate, an int past 64 bits, a
    value that is not text) sends the head to ``encode_head``."""

    __slots__ = ("_ids", "_messages", "_run", "_session_id", "_run_id", "_turns", "_types")

    def __init__(self, session_id: str, run_id: str) -> None:
        self._session_id = session_id
        self._run_id = run_id
        session, run = _text_part(session_id), _text_part(run_id)
        self._run = None if session is None or run is None else b',"session_id":%b,"run_id":%b' % (session, run)
        self._types: dict[str, bytes] = {}
        self._turns: dict[int, bytes] = {}
        self._ids: dict[tuple[str | None, str | None], bytes] = {}
        self._messages: dict[tuple[str | None, str | None], bytes] = {}

    def encode(
        self,
        event_type: str,
        turn_index: int | None = None,
        message_id: str | None = None,
        tool_call_id: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> bytes:
        """The head of a record with these fields (``encode_head``'s, byte for byte)."""
        head = self._types.get(event_type) or self._type_part(event_type)
        if turn_index is not None and head is not None:
            turn = (self._turns.get(turn_index) if type(turn_index) is int else None) or self._turn_part(turn_index)
            head = None if turn is None else head + turn
        if (message_id is not None or tool_call_id is not None) and head is not None:
            try:
                message = self._messages.get((message_id, tool_call_id)) or self._message_part(message_id, tool_call_id)
            except TypeError:  # an id that is no text (unhashable): encode_head writes it
                message = None
            head = None if message is None else head + message
        try:
            ids = self._ids.get((trace_id, span_id)) or self._ids_part(trace_id, span_id)
        except TypeError:  # an id that is no text (unhashable): encode_head writes it
            ids = None
        if head is None or ids is None:
            return encode_head(event_type, self._session_id, self._run_id, turn_index, message_id, tool_call_id,
                               trace_id, span_id)
        return head + ids

    def parts(self, records: Sequence[RecordFields]) -> list[tuple[bytes, bytes] | None]:
        """``(head, payload's JSON)`` of each record (its fields as attributes: a normalized span's)
        by ``encode`` and ``composed_payload``, in one loop; None for a record only
        ``encode_record`` can tell about. Before the run's lock: encoding may run an app's code (a
        value's ``repr``), which may append to the same run."""
        encode = self.encode
        parts: list[tuple[bytes, bytes] | None] = []
        add = parts.append
        for record in records:
            body = composed_payload(record.payload, record.at_ns)
            if body is None:
                add(None)
            else:
                add((encode(record.type, record.turn_index, record.message_id, record.tool_call_id, record.trace_id,
                            record.span_id), body))
        return parts


    def _type_part(self, event_type: str) -> bytes | None:
        text = _text_part(event_type, b'"type":') if type(event_type) is str else None
        if text is None or self._run is None:
            return None
        if len(self._types) < _PARTS_KEPT:
            self._types[event_type] = text + self._run
        return text + self._run

    def _turn_part(self, turn_index: Any) -> bytes | None:
        if type(turn_index) is not int or not _INT64.start <= turn_index < _INT64.stop:
            return None  # orjson writes a bool, a float or a longer int otherwise than %d, or not at all
        part = b',"turn_index":%d' % turn_index
        if len(self._turns) < _PARTS_KEPT:
            self._turns[turn_index] = part
        return part

    def _message_part(self, message_id: str | None, tool_call_id: str | None) -> bytes | None:
        message = b"" if message_id is None else _text_part(message_id, b',"message_id":')
        tool_call = b"" if tool_call_id is None else _text_part(tool_call_id, b',"tool_call_id":')
        if message is None or tool_call is None:
            return None
        if len(self._messages) >= _PARTS_KEPT:
            self._messages.clear()  # a run's messages come and go: keep the recent ones
        part = self._messages[(message_id, tool_call_id)] = message + tool_call
        return part

    def _ids_part(self, trace_id: str | None, span_id: str | None) -> bytes | None:
        trace = b"" if trace_id is None else _text_part(trace_id, b',"trace_id":')
        span = b"" if span_id is None else _text_part(span_id, b',"span_id":')
        if trace is None or span is None:
            return None
        part = trace + span + b',"payload":'
        if len(self._ids) >= _PARTS_KEPT:
            self._ids.clear()  # a run's spans come and go: keep the recent ones
        self._ids[(trace_id, span_id)] = part
        return part



def stamp_lines(
    seq: int, records: Sequence[RecordFields], parts: list[tuple[bytes, bytes] | None], whole: Callable[..., bytes]
) -> list[bytes]:
    """The NDJSON lines of ``records`` numbered from ``seq``: each record's ``HeadEncoder.parts``
    with its stamp (``compose_line``'s, in line: a call a record), or ``whole(seq, type, at_ns,
    turn_index, message_id, tool_call_id, trace_id, span_id, payload)`` for one without parts."""
    prefixes = _second_prefixes
    lines: list[bytes] = []
    add = lines.append
    for record, part in zip(records, parts):
        at_ns = record.at_ns
        if part is None:
            add(whole(seq, record.type, at_ns, record.turn_index, record.message_id, record.tool_call_id,
                      record.trace_id, record.span_id, record.payload))
        else:
            seconds, micros = divmod(at_ns // 1000, 1_000_000)
            add(_LINE % (seq, prefixes.get(seconds) or _second_prefix(seconds), micros, *part))
        seq += 1
    return lines


_INT64 = range(-(2**63), 2**64)
_PARTS_KEPT = 1024


class RecordFields(Protocol):
    """A record's fields as attributes (``normalize.JournalEvent``: this stage imports none above it)."""

    type: str
    at_ns: int
    payload: dict[str, Any] | None
    turn_index: int | None
    message_id: str | None
    tool_call_id: str | None
    trace_id: str | None
    span_id: str | None


def _text_part(value: Any, key: bytes = b"") -> bytes | None:
    """``key`` and the JSON text of ``value`` (a ``str``) as orjson writes it inside a record; None
    for anything else, or text orjson refuses (lone surrogates: ``encode_record`` replaces them)."""
    if type(value) is not str:
        return None
    try:
        return key + orjson.dumps(value)
    except TypeError:
        return None


_STRUCTURE = re.compile(rb'[\[\]{}"]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_MARKER_JSON = orjson.dumps(DEPTH_MARKER)


def _cut_text(line: bytes) -> bytes | None:
    """The JSON text ``line`` with every object or array nested past ``MAX_DEPTH`` replaced by
    ``DEPTH_MARKER``; None when nothing is that deep (or the text is not JSON enough to tell)."""
    parts: list[bytes] = []
    depth = 0
    kept = 0  # line[kept:] is not yet copied to parts
    cut_at = -1
    position = 0
    while (found := _STRUCTURE.search(line, position)) is not None:
        char, at = found.group(), found.start()
        if char == b'"':
            rest = _STRING_REST.match(line, at + 1)
            if rest is None:
                return None  # an unterminated string: the decoder will say what is wrong
            position = rest.end()
            continue
        if char in b"[{":
            depth += 1
            if depth == MAX_DEPTH + 1:
                cut_at = at
        else:
            if depth == MAX_DEPTH + 1 and cut_at >= 0:
                parts += (line[kept:cut_at], _MARKER_JSON)
                kept, cut_at = at + 1, -1
            depth -= 1
        position = at + 1
    if not parts:
        return None
    parts.append(line[kept:])
    return b"".join(parts)


def decode_line(line: bytes) -> dict[str, Any]:
    """Decode one journal line; raise ``ValueError`` unless it is a JSON object. Containers nested
    past ``MAX_DEPTH`` are replaced by ``DEPTH_MARKER`` (and ``"truncated": "depth"`` is set)."""
    cut = _cut_text(line) if len(line) > _SHORT_LINE and _openers(line) > MAX_DEPTH else None
    value = orjson.loads(line if cut is None else cut)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    if cut is not None:
        value[TRUNCATED_FIELD] = "depth"
    return value
