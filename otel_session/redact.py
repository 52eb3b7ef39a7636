"""Redact: slot values, tool arguments/results and free text, before anything is recorded (SPEC §6).

Contract::

    redactor = Redactor(RedactionPolicy(keep_slots={"party_size"}), key=b"...")  # built once
    redactor.slot_value("date", "2026-12-04")   # -> "hmac-sha256:3f9a0c…" (16 hex digits)
    redactor.text("mail jane@example.com")      # -> "mail [email]"
    redactor.tool_arguments({"card": "4111 1111 1111 1111"})  # structure kept, leaves redacted
    redactor.redact_event(journal_event)        # -> a new JournalEvent, fields redacted by type
    redactor.redact_events(events)              # the events of a span or request, in place; deltas as streams
    stream = redactor.delta_stream()            # one streamed content block, record by record:
    stream.feed("mail jane@exa", 1)             # -> [] (held: the address may go on)
    stream.feed("mple.com now", 2)              # -> [(1, "mail [email]")] ("now" may go on)
    stream.flush()                              # -> [(2, " now")]: N deltas in, N records out

Each field has a :class:`FieldMode`: ``keep`` (as is), ``scan`` (free text: detected e-mail
addresses, phone numbers, Luhn-valid card numbers and national-id-like numbers are masked),
``mask`` (only the type and length remain) or ``hash`` (a keyed HMAC-SHA256 prefix, so equal values
compare equal without being readable). The behaviour is chosen once, when the redactor is built.

Redaction is idempotent: tokens this module produces (``hmac-sha256:…``, ``<redacted …>``,
``[email]`` …) pass through unchanged, so a collector may re-redact what an app already redacted.
A redactor error replaces the whole value with ``<redacted error>``; nothing passes through.

Streamed deltas are redacted as a stream (:class:`DeltaStream`), record by record: N deltas give N
records, each with its own redacted text, and their texts concatenate to the redacted whole. A
delta is held back until a later one shows where its last word or number ends, so a value split
across deltas is never released in part; its token goes to the delta where it starts.

Environment variables (read by :meth:`RedactionPolicy.from_env`):

=====================================  ==============================================================
``OTEL_SESSION_REDACTION_KEY``         HMAC key (text). Default: a random key stored in
                                       ``<bundle dir>/.redaction-key`` (mode 0600), made once.
``OTEL_SESSION_REDACT_KEEP_SLOTS``     comma-separated slot names recorded as is (allow-list)
``OTEL_SESSION_REDACT_SLOT_VALUES``    mode for slot values (default ``hash``)
``OTEL_SESSION_REDACT_TEXT``           mode for message text and error text (default ``scan``)
``OTEL_SESSION_REDACT_TOOL_ARGUMENTS`` mode for string leaves of tool arguments (default ``scan``)
``OTEL_SESSION_REDACT_TOOL_RESULTS``   mode for string leaves of tool results (default ``scan``)
``OTEL_SESSION_REDACT_DETECTORS``      comma-separated detectors for ``scan`` (default
                                       ``email,phone,card,national_id``)
=====================================  ==============================================================
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import orjson

from otel_session.journal import EventType
from otel_session.normalize import JournalEvent

__all__ = [
    "DEFAULT_DETECTORS",
    "DeltaStream",
    "ENV_REDACTION_KEY",
    "FieldMode",
    "KEY_FILE",
    "REDACTED_ERROR",
    "RedactionPolicy",
    "Redactor",
    "load_or_create_key",
]

logger = logging.getLogger(__name__)

ENV_REDACTION_KEY = "OTEL_SESSION_REDACTION_KEY"
KEY_FILE = ".redaction-key"
REDACTED_ERROR = "<redacted error>"
DEFAULT_DETECTORS = ("email", "phone", "card", "national_id")
_HASH_PREFIX = "hmac-sha256:"
_HASH_HEX_DIGITS = 16
_HASH_CACHE_SIZE = 4096
# Scanned texts are remembered (GenAI traffic repeats system prompts and whole histories): at most
# this many entries and this many characters in all, then the cache starts over.
_SCAN_CACHE_SIZE = 4096
_SCAN_CACHE_CHARS = 1 << 21
_SCAN_CACHE_MAX_TEXT = 1 << 16


class FieldMode(str, Enum):
    """How one kind of field is redacted."""

    KEEP = "keep"
    SCAN = "scan"
    MASK = "mask"
    HASH = "hash"


def _env_mode(name: str, default: FieldMode) -> FieldMode:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    try:
        return FieldMode(raw)
    except ValueError:
        logger.warning("%s=%r is not one of keep|scan|mask|hash; using %s", name, raw, default.value)
        return default


def _env_list(name: str) -> tuple[str, ...] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class RedactionPolicy:
    """What is kept, scanned, masked or hashed. The defaults are SPEC §6's default policy."""

    keep_slots: frozenset[str] = field(default_factory=frozenset)
    slot_values: FieldMode = FieldMode.HASH
    text: FieldMode = FieldMode.SCAN
    tool_arguments: FieldMode = FieldMode.SCAN
    tool_results: FieldMode = FieldMode.SCAN
    detectors: tuple[str, ...] = DEFAULT_DETECTORS

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep_slots", frozenset(self.keep_slots))
        for name in ("slot_values", "text", "tool_arguments", "tool_results"):
            object.__setattr__(self, name, FieldMode(getattr(self, name)))
        unknown = set(self.detectors) - set(DEFAULT_DETECTORS)
        if unknown:
            raise ValueError(f"unknown detectors {sorted(unknown)}; known: {', '.join(DEFAULT_DETECTORS)}")
        object.__setattr__(self, "detectors", tuple(self.detectors))

    @classmethod
    def from_env(cls, base: RedactionPolicy | None = None) -> RedactionPolicy:
        """``base`` (default: the default policy) overridden by ``OTEL_SESSION_REDACT_*``."""
        base = base or cls()
        keep = _env_list("OTEL_SESSION_REDACT_KEEP_SLOTS")
        detectors = _env_list("OTEL_SESSION_REDACT_DETECTORS")
        return replace(
            base,
            keep_slots=frozenset(keep) if keep is not None else base.keep_slots,
            slot_values=_env_mode("OTEL_SESSION_REDACT_SLOT_VALUES", base.slot_values),
            text=_env_mode("OTEL_SESSION_REDACT_TEXT", base.text),
            tool_arguments=_env_mode("OTEL_SESSION_REDACT_TOOL_ARGUMENTS", base.tool_arguments),
            tool_results=_env_mode("OTEL_SESSION_REDACT_TOOL_RESULTS", base.tool_results),
            detectors=detectors if detectors is not None else base.detectors,
        )


def load_or_create_key(bundle_dir: str | os.PathLike[str] | None) -> bytes:
    """The HMAC key: ``$OTEL_SESSION_REDACTION_KEY``, else ``<bundle_dir>/.redaction-key`` (made 0600)."""
    from_env = os.environ.get(ENV_REDACTION_KEY)
    if from_env:
        return from_env.encode("utf-8")
    if bundle_dir is None:
        return secrets.token_bytes(32)
    path = Path(bundle_dir) / KEY_FILE
    try:
        return _read_or_make_key_file(path)
    except (OSError, ValueError) as exc:
        logger.warning(
            "cannot keep a redaction key at %s (%s); using a key for this process only, so hashes "
            "will not match other processes' (set %s)", path, exc, ENV_REDACTION_KEY,
        )
        return secrets.token_bytes(32)


def _read_or_make_key_file(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as handle:
        handle.write(key.hex() + "\n")
    return key


# -- detectors -------------------------------------------------------------------------------

# Tokens this module emits; matched first so that redacting twice changes nothing.
_REDACTED_TOKEN = r"hmac-sha256:[0-9a-f]{16}|<redacted[^<>]{0,40}>|\[(?:email|phone|card|national_id)\]"
_EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
_NATIONAL_LETTERS = r"\b[A-CEGHJ-PR-TW-Z]{2}\d{6}[A-D]\b"  # UK NI number shape
# A run of digits with the usual separators, not glued to letters or other digits.
_NUMBER = r"(?<![\w+])\+?\(?\d[\d ().-]{5,}\d(?![\w])"
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}[./-]\d{2}[./-]\d{4}|\d{4}[./]\d{2}[./]\d{2}")
_SSN = re.compile(r"\d{3}-\d{2}-\d{4}")
_NEEDS_SCAN = re.compile(r"[@\d]")
# Every detection holds an "@" (e-mail) or a run of six or more digits and separators (national
# ids: six digits; phone and card numbers: seven or more characters): a whole text with neither
# scans to itself. (For a streamed delta, the test runs on the look-back tail and the delta joined:
# the two halves of a run may sit on both sides of the join.)
_DIGIT_RUN = re.compile(r"\d[\d ().-]{4,}\d")


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _classify_number(candidate: str, detectors: frozenset[str]) -> str | None:
    """Which detector a digit run belongs to, or None to leave it (dates, short numbers)."""
    stripped = candidate.strip()
    digits = "".join(char for char in stripped if char.isdigit())
    if "card" in detectors and 13 <= len(digits) <= 19 and _luhn_valid(digits):
        return "card"
    if "national_id" in detectors and _SSN.fullmatch(stripped):
        return "national_id"
    if _ISO_DATE.fullmatch(stripped):
        return None
    if "phone" in detectors and 7 <= len(digits) <= 15:
        return "phone"
    if "national_id" in detectors and len(digits) >= 9:
        return "national_id"
    return None


class _Scanner:
    """PII detectors compiled once into one pattern; already-redacted tokens are left alone.

    ``scan`` is a pure function of its text: texts that cannot hold a detection skip the pattern
    (``_DIGIT_RUN``), the pattern leaves out the e-mail branch for texts without an "@", and results
    are kept in a bounded cache (raw text in memory only, like the values the caller already holds).
    """

    def __init__(self, detectors: Iterable[str]) -> None:
        self._cache: dict[str, str] = {}
        self._cached_chars = 0
        self._enabled = frozenset(detectors)
        parts = [f"(?P<redacted>{_REDACTED_TOKEN})"]
        if "email" in self._enabled:
            parts.append(f"(?P<email>{_EMAIL})")
        if "national_id" in self._enabled:
            parts.append(f"(?P<national_letters>{_NATIONAL_LETTERS})")
        if self._enabled & {"phone", "card", "national_id"}:
            parts.append(f"(?P<number>{_NUMBER})")
        self._pattern = re.compile("|".join(parts))
        # The e-mail branch, tried at every letter, is most of the pattern's cost; it cannot match
        # in a text without "@".
        self._pattern_without_email = re.compile("|".join(part for part in parts if not part.startswith("(?P<email>")))

    def _replacement(self, match: re.Match[str]) -> str:
        kind = match.lastgroup
        text = match.group()
        if kind == "redacted":
            return text
        if kind == "national_letters":
            return "[national_id]"
        if kind == "number":
            found = _classify_number(text, self._enabled)
            if found is None:
                return text
            # keep whitespace the loose number pattern may have taken at its edges
            return text[: len(text) - len(text.lstrip())] + f"[{found}]" + text[len(text.rstrip()) :]
        return f"[{kind}]"

    def scan(self, text: str) -> str:
        if type(text) is not str:  # a subclass may compare, hash or search unlike its text
            return self._pattern.sub(self._replacement, text) if _NEEDS_SCAN.search(text) else text
        with_email = "@" in text
        if not with_email and _DIGIT_RUN.search(text) is None:
            return text
        cache = self._cache
        scanned = cache.get(text)
        if scanned is None:
            pattern = self._pattern if with_email else self._pattern_without_email
            scanned = pattern.sub(self._replacement, text)
            size = len(text)
            if size <= _SCAN_CACHE_MAX_TEXT:
                if len(cache) >= _SCAN_CACHE_SIZE or self._cached_chars + size > _SCAN_CACHE_CHARS:
                    cache.clear()
                    self._cached_chars = 0
                cache[text] = scanned
                self._cached_chars += size  # approximate under threads; it only bounds the cache
        return scanned

    def edits(self, text: str) -> list[tuple[int, int, str]]:
        """The detections in ``text`` as ``(start, end, replacement)``, in order: applied, they
        give ``scan(text)``."""
        if "@" not in text and _DIGIT_RUN.search(text) is None:
            return []
        pattern = self._pattern if "@" in text else self._pattern_without_email
        edits = []
        for match in pattern.finditer(text):
            replacement = self._replacement(match)
            if replacement != match.group():
                edits.append((match.start(), match.end(), replacement))
        return edits


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_IS_HASH = re.compile(r"hmac-sha256:[0-9a-f]{16}").fullmatch
_IS_MASK = re.compile(r"<redacted[^<>]{0,40}>").fullmatch


def _type_name(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


# Where a streamed block may be cut: right after whitespace, before a character that no detection
# continues with across whitespace (only numbers hold whitespace, between their digits, brackets,
# dots and dashes). No detection holds such a position, and the patterns' look-arounds see
# whitespace there as they would a string's edge: the text scans the same whole or cut there.
_CUT = re.compile(r"(?<=\s)[^\s0-9().\-]")
_LAST_CUT = re.compile(r"(?s:.*)" + _CUT.pattern)
# A redaction token (``<redacted …>``, the only one holding whitespace) is at most this long: a
# position with an unclosed "<" this close before it may be inside one, and is no cut.
_TOKEN_SPAN = 50

T = TypeVar("T")


class DeltaStream(Generic[T]):
    """One content block streamed in deltas, redacted record by record (``Redactor.delta_stream``).

    ``feed(chunk, item)`` takes one delta and returns the ``(item, redacted text)`` records now
    released; ``flush()`` releases the rest when the block ends. Every item fed is released exactly
    once, in feed order, with its own text redacted: text outside detections stays in its record,
    a detection spanning records is masked in the record where it starts (the others' share of it
    is dropped). The released texts concatenate to ``redactor.text(whole)`` for any split.

    In ``scan`` mode a record is held until a later delta shows a cut after it (see ``_CUT``: a
    word or number can no longer go on), so a live view lags by a token, never past the block's
    end. ``keep`` releases each record at once; ``mask``/``hash`` redact the whole block, so the
    block's records wait for ``flush`` (the first gets the token, the others ""). Not thread-safe
    (a block streams from one producer).
    """

    __slots__ = ("_cut", "_edits", "_length", "_mode", "_raw", "_records", "_redactor", "_tail")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._mode = redactor.policy.text
        self._edits = redactor._scanner.edits
        self._records: list[list[Any]] = []
        """Records not yet released, oldest first: [item, end offset in the block, redacted text so far]."""
        self._raw: list[str] = []
        """The block's raw text after the last cut (not yet scanned)."""
        self._cut = 0
        self._length = 0
        self._tail = ""
        """The block's last ``_TOKEN_SPAN`` characters before the newest delta."""

    def feed(self, chunk: str, item: T) -> list[tuple[T, str]]:
        mode = self._mode
        if mode is FieldMode.KEEP:
            return [(item, chunk)]
        length = self._length = self._length + len(chunk)
        self._records.append([item, length, ""])
        self._raw.append(chunk)
        if mode is not FieldMode.SCAN:
            return []
        tail = self._tail
        window = tail + chunk
        self._tail = window[-_TOKEN_SPAN:]
        cut = self._last_cut(window, len(tail))
        if cut is None:
            return self._released() if not chunk else []  # an empty delta after a cut goes at once
        return self._scan_to(length - len(window) + cut)

    def flush(self) -> list[tuple[T, str]]:
        if self._mode is FieldMode.SCAN:
            return self._scan_to(self._length)
        records, self._records = self._records, []
        whole, self._raw = "".join(self._raw), []
        text = self._redactor.text(whole)
        return [(record[0], text if position == 0 else "") for position, record in enumerate(records)]

    @staticmethod
    def _last_cut(window: str, start: int) -> int | None:
        """The last cut in ``window[start:]`` (the newest delta), else None."""
        match = _LAST_CUT.search(window, start)
        if match is None:
            return None
        position = match.end() - 1
        if "<" not in window[max(0, position - _TOKEN_SPAN) : position]:
            return position  # the common case: no redaction token can hold it
        for match in reversed(list(_CUT.finditer(window, start))):
            position = match.start()
            before = window[max(0, position - _TOKEN_SPAN) : position]
            if before.rfind("<") <= before.rfind(">"):
                return position
        return None

    def _scan_to(self, cut: int) -> list[tuple[T, str]]:
        """Scan the raw text up to block offset ``cut``, share it out to its records, release those
        that end by ``cut``."""
        raw = "".join(self._raw)
        split = cut - self._cut
        segment, rest = raw[:split], raw[split:]
        self._raw = [rest] if rest else []
        start, self._cut = self._cut, cut
        if segment:
            try:
                edits = self._edits(segment)
            except Exception:  # noqa: BLE001 - never release a segment unredacted
                logger.warning("redaction of a delta failed; its text was replaced", exc_info=True)
                edits = [(0, len(segment), REDACTED_ERROR)]
            self._share_out(segment, start, edits)
        return self._released()

    def _share_out(self, segment: str, start: int, edits: list[tuple[int, int, str]]) -> None:
        """Append to each pending record its share of ``segment`` (at block offset ``start``, which
        every pending record ends after), redacted by ``edits``: sorted, disjoint
        ``(start, end, replacement)`` in segment offsets."""
        records = self._records
        size = len(segment)
        index = cursor = 0
        for edit_start, edit_end, replacement in [*edits, (size, size, "")]:
            while cursor < edit_start:  # text outside detections: to the records it came from
                end = min(edit_start, records[index][1] - start)
                if end > cursor:
                    records[index][2] += segment[cursor:end]
                    cursor = end
                if cursor < edit_start:
                    index += 1
            if edit_start < size:  # a detection: its token to the record where it starts
                while records[index][1] - start <= edit_start:
                    index += 1
                records[index][2] += replacement
                cursor = edit_end

    def _released(self) -> list[tuple[T, str]]:
        records = self._records
        cut = self._cut
        if not records or records[0][1] > cut:
            return []
        count = 1
        while count < len(records) and records[count][1] <= cut:
            count += 1
        released = [(record[0], record[2]) for record in records[:count]]
        del records[:count]
        return released


class Redactor:
    """Applies one :class:`RedactionPolicy` with one key. Build once; call from any thread."""

    def __init__(self, policy: RedactionPolicy | None = None, *, key: bytes | None = None) -> None:
        self.policy = policy or RedactionPolicy()
        self._key = key if key is not None else secrets.token_bytes(32)
        self._keep_slots = self.policy.keep_slots
        self._hash_cache: dict[Any, str] = {}  # recent values (the next write's "previous" is the last value)
        self._scanner = _Scanner(self.policy.detectors)
        self._scan = self._scanner.scan
        self._scan_text = self.policy.text is FieldMode.SCAN
        self._slot_leaf = self._whole_value_function(self.policy.slot_values)
        self._text = self._leaf_function(self.policy.text)
        self._text_of_str = self._scan if self._scan_text else self._text  # _scan_leaf on a str is _scan
        self._tool_arguments_leaf = self._leaf_function(self.policy.tool_arguments)
        self._tool_results_leaf = self._leaf_function(self.policy.tool_results)

    # -- building blocks chosen at construction -------------------------------------------

    def _hash(self, value: Any) -> str:
        if value is None:
            return None  # type: ignore[return-value]  # absence is not personal data
        cacheable = type(value) in (str, int)
        if cacheable:
            cached = self._hash_cache.get(value)
            if cached is not None:
                return cached
        if isinstance(value, str) and (_IS_HASH(value) or _IS_MASK(value)):
            return value
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else _canonical(value)
        result = _HASH_PREFIX + hmac.digest(self._key, data, "sha256").hex()[:_HASH_HEX_DIGITS]
        if cacheable:
            if len(self._hash_cache) >= _HASH_CACHE_SIZE:
                self._hash_cache.clear()
            self._hash_cache[value] = result
        return result

    @staticmethod
    def _mask(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and (_IS_HASH(value) or _IS_MASK(value)):
            return value
        try:
            length = len(value)
        except TypeError:
            length = len(str(value))
        return f"<redacted {_type_name(value)} len={length}>"

    def _scan_leaf(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._scan(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = str(value)
            scanned = self._scan(text)
            return value if scanned == text else scanned
        return value

    def _leaf_function(self, mode: FieldMode) -> Callable[[Any], Any]:
        if mode is FieldMode.KEEP:
            return lambda value: value
        if mode is FieldMode.SCAN:
            return self._scan_leaf
        if mode is FieldMode.MASK:
            return self._mask
        return self._hash

    def _whole_value_function(self, mode: FieldMode) -> Callable[[Any], Any]:
        if mode is FieldMode.SCAN:
            return lambda value: self._map_leaves(value, self._scan_leaf)
        return self._leaf_function(mode)

    def _map_leaves(self, value: Any, leaf: Callable[[Any], Any]) -> Any:
        kind = type(value)
        if kind in _JSON_SCALARS:  # the common leaves, before the (slower) abstract Mapping check
            return leaf(value)
        if kind is dict or isinstance(value, Mapping):
            return {key: self._map_leaves(item, leaf) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._map_leaves(item, leaf) for item in value]
        return leaf(value)

    @staticmethod
    def _guarded(function: Callable[[Any], Any], value: Any) -> Any:
        try:
            return function(value)
        except Exception:  # noqa: BLE001 - a redactor error redacts the whole value
            logger.warning("redaction failed; the whole value was replaced", exc_info=True)
            return REDACTED_ERROR

    # -- public field redaction -----------------------------------------------------------

    def slot_value(self, slot: str, value: Any) -> Any:
        """A slot value (or previous value): kept when the slot is allow-listed, else per policy."""
        if slot in self._keep_slots:
            return value
        try:
            return self._slot_leaf(value)
        except Exception:  # noqa: BLE001 - a redactor error redacts the whole value
            logger.warning("redaction failed; the whole value was replaced", exc_info=True)
            return REDACTED_ERROR

    def text(self, value: str) -> str:
        """Free text: message text, deltas, reasons, error messages."""
        try:
            return self._text_of_str(value if isinstance(value, str) else str(value))
        except Exception:  # noqa: BLE001
            logger.warning("redaction failed; the whole text was replaced", exc_info=True)
            return REDACTED_ERROR

    @property
    def scans_text(self) -> bool:
        """Whether free text is scanned for detections (``scan`` mode), not kept, masked or hashed whole."""
        return self._scan_text

    def delta_stream(self) -> DeltaStream[Any]:
        """A redacting stream for one content block streamed in deltas (see :class:`DeltaStream`)."""
        return DeltaStream(self)

    def tool_arguments(self, value: Any) -> Any:
        """Tool-call arguments: structure kept, every leaf redacted per policy."""
        return self._guarded(lambda item: self._map_leaves(item, self._tool_arguments_leaf), value)

    def tool_result(self, value: Any) -> Any:
        """A tool's result: structure kept, every leaf redacted per policy."""
        return self._guarded(lambda item: self._map_leaves(item, self._tool_results_leaf), value)

    def free_leaves(self, value: Any) -> Any:
        """Any other structure (unknown record types): every string leaf scanned as text."""
        return self._guarded(lambda item: self._map_leaves(item, self._text), value)

    # -- journal events -------------------------------------------------------------------

    def redact_payload(self, event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the fields of ``event_type`` redacted (SPEC §5.2 table): a copy, or
        ``payload`` itself when it holds only text the policy leaves as it is. Neither is changed."""
        handler = self._payload_handlers.get(event_type)
        try:
            if handler is not None:
                return handler(self, payload)
            return {
                key: (item if key in _STRUCTURAL_KEYS else self.free_leaves(item)) for key, item in payload.items()
            }
        except Exception:  # noqa: BLE001 - never pass a payload through unredacted
            logger.warning("redaction of a %s payload failed; payload replaced", event_type, exc_info=True)
            return {"redaction_error": REDACTED_ERROR}

    def redact_events(self, events: list[JournalEvent]) -> list[JournalEvent]:
        """Redact the events of one span or export request in place, in order, and return them.

        For callers that own the events (freshly normalized): each payload is replaced by its
        redaction (``redact_payload``), and the ``assistant_delta`` events of each message block
        are redacted as one :class:`DeltaStream`: each delta keeps its own (redacted) text, a
        detection split across deltas is masked in the delta where it starts.
        """
        streams: dict[tuple[str | None, int], DeltaStream[JournalEvent]] = {}
        failed: set[tuple[str | None, int]] = set()
        released: list[tuple[JournalEvent, str]] = []
        redact_payload = self.redact_payload
        for event in events:
            block = _delta_block(event)
            if block is None:
                event.payload = redact_payload(event.type, event.payload or {})
                continue
            stream = streams.get(block)
            if stream is None:
                stream = streams[block] = self.delta_stream()
            delta = event.payload["delta"]
            event.payload = {**event.payload, "delta": REDACTED_ERROR}  # until its text is released
            if block in failed:
                continue
            try:
                released += stream.feed(delta if isinstance(delta, str) else str(delta), event)
            except Exception:  # noqa: BLE001 - never pass a delta through unredacted
                logger.warning("redaction of a delta failed; its block's deltas were replaced", exc_info=True)
                failed.add(block)
        for block, stream in streams.items():
            if block not in failed:
                try:
                    released += stream.flush()
                except Exception:  # noqa: BLE001
                    logger.warning("redaction of a delta failed; its block's deltas were replaced", exc_info=True)
        for event, text in released:
            event.payload["delta"] = text
        return events

    def redact_event(self, event: JournalEvent) -> JournalEvent:
        """``event`` with its payload redacted by type: a copy, or ``event`` itself when its payload
        needed no redaction (see ``redact_payload``). Neither is changed."""
        payload = event.payload
        redacted = self.redact_payload(event.type, payload or {})
        return event if redacted is payload else event.with_payload(redacted)

    def _slot_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        slot = str(payload.get("slot", ""))
        result = dict(payload)
        for key in ("value", "previous"):
            if key in payload:
                result[key] = self.slot_value(slot, payload[key])
        return result

    def _message_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        content = payload.get("content")
        if isinstance(content, list) and self._texts_kept(content):
            return payload
        result = dict(payload)
        if isinstance(content, list):
            result["content"] = [
                {**block, "text": self.text(block["text"])} if isinstance(block, dict) and "text" in block
                else self.free_leaves(block)
                for block in content
            ]
        elif content is not None:
            result["content"] = self.free_leaves(content)
        return result

    def _texts_kept(self, content: list[Any]) -> bool:
        """True when every block is a ``{..., "text"}`` object whose text redacts to itself."""
        text = self.text
        for block in content:
            if type(block) is not dict or "text" not in block:
                return False
            value = block["text"]
            if text(value) is not value:
                return False
        return True

    def _delta_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        if "delta" in payload:
            result["delta"] = self.text(payload["delta"])
        return result

    def _tool_started_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        if "arguments" in payload:
            result["arguments"] = self.tool_arguments(payload["arguments"])
        return result

    def _tool_finished_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        if "result" in payload:
            result["result"] = self.tool_result(payload["result"])
        if "error" in payload:
            result["error"] = self.free_leaves(payload["error"])
        if "detail" in payload:
            result["detail"] = self.free_leaves(payload["detail"])
        return result

    def _verdict_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = dict(payload)
        for key in ("reason", "candidates"):
            if key in payload:
                result[key] = self.free_leaves(payload[key])
        return result

    def _structural_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        # The project's own vocabulary (states, slot and guard names, flags, counts): PII
        # detectors run over its strings in case an integration put user data there.
        scan = self._scan
        for item in payload.values():
            if type(item) is not str or scan(item) is not item:
                break
        else:
            return payload  # only text the scanner leaves as it is
        return {
            key: scan(item) if type(item) is str else self._map_leaves(item, self._scan_strings)
            for key, item in payload.items()
        }

    def _scan_strings(self, value: Any) -> Any:
        return self._scan(value) if isinstance(value, str) else value

    _payload_handlers: ClassVar[dict[str, Callable[[Redactor, dict[str, Any]], dict[str, Any]]]] = {
        EventType.SLOT_WRITE.value: _slot_payload,
        EventType.SLOT_DIFF.value: _slot_payload,
        EventType.MESSAGE_FINISHED.value: _message_payload,
        EventType.ASSISTANT_DELTA.value: _delta_payload,
        EventType.TOOL_EXECUTION_STARTED.value: _tool_started_payload,
        EventType.TOOL_EXECUTION_UPDATED.value: _tool_finished_payload,
        EventType.TOOL_EXECUTION_FINISHED.value: _tool_finished_payload,
        EventType.TRANSITION_VERDICT.value: _verdict_payload,
        EventType.RUN_STARTED.value: _structural_payload,
        EventType.TURN_STARTED.value: _structural_payload,
        EventType.TURN_FINISHED.value: _structural_payload,
        EventType.MESSAGE_STARTED.value: _structural_payload,
        EventType.GUARD_EVALUATED.value: _structural_payload,
        EventType.RUN_FINISHED.value: _structural_payload,
        EventType.UPSTREAM_DROP.value: _structural_payload,
    }


_ASSISTANT_DELTA = EventType.ASSISTANT_DELTA.value


def _delta_block(event: JournalEvent) -> tuple[str | None, int] | None:
    """(message, content block) of an ``assistant_delta`` with text, else None."""
    payload = event.payload
    if event.type != _ASSISTANT_DELTA or not payload or "delta" not in payload:
        return None
    index = payload.get("index", 0)
    message_id = event.message_id
    if type(index) is not int or not (message_id is None or type(message_id) is str):
        return None  # a malformed delta: redacted on its own
    return message_id, index


_STRUCTURAL_KEYS = frozenset({"role", "kind", "index", "status", "name", "settled", "stop_reason"})
