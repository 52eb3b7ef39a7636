"""Redaction policy: what is kept, scanned, masked or hashed, and the HMAC key (SPEC §6).

Contract::

    policy = RedactionPolicy(keep_slots={"party_size"}, patterns={"employee_id": r"EMP-\\d{6}"})
    policy = RedactionPolicy.from_env(policy)   # OTEL_SESSION_REDACT_* override it
    key = load_or_create_key(bundle_dir)        # $OTEL_SESSION_REDACTION_KEY or <dir>/.redaction-key

Environment variables (read by :meth:`RedactionPolicy.from_env`):

=====================================  ==============================================================
``OTEL_SESSION_REDACTION_KEY``         HMAC key (text). Default: a random key stored in
                                       ``<bundle dir>/.redaction-key`` (mode 0600), made once.
``OTEL_SESSION_REDACT_KEEP_SLOTS``     comma-separated slot names recorded as is (allow-list)
``OTEL_SESSION_REDACT_SLOT_VALUES``    mode for slot values (default ``hash``)
``OTEL_SESSION_REDACT_TEXT``           mode for message text and error text (default ``scan``)
``OTEL_SESSION_REDACT_TOOL_ARGUMENTS`` mode for string leaves of tool arguments (default ``scan``)
``OTEL_SESSION_REDACT_TOOL_RESULTS``   mode for string leaves of tool results (default ``scan``)
``OTEL_SESSION_REDACT_DETECTORS``      comma-separated built-in detectors for ``scan`` (default: all,
                                       ``email,phone,card,national_id,iban,ipv4,ipv6``)
``OTEL_SESSION_REDACT_PATTERNS``       user detectors, a JSON object ``{"label": "regex", ...}``:
                                       each match (within a word) masks as ``[label]``
``OTEL_SESSION_REDACT_IDENTIFIERS``    ``hash`` (default: PII in an id becomes a keyed hash) or ``keep``
=====================================  ==============================================================

A setting that cannot be read is logged (an error for a pattern: it is left out) and the base
policy's value is used: configuration never raises into the application.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

import orjson

from otel_session.core.log import get_logger
from otel_session.redact.detectors import BUILTIN_DETECTORS, DEFAULT_DETECTORS, LABEL

__all__ = [
    "ENV_PATTERNS",
    "ENV_REDACTION_KEY",
    "FieldMode",
    "KEY_FILE",
    "REDACTED_ERROR",
    "RedactionPolicy",
    "load_or_create_key",
    "read_key",
]

logger = get_logger(__name__)

ENV_REDACTION_KEY = "OTEL_SESSION_REDACTION_KEY"
ENV_PATTERNS = "OTEL_SESSION_REDACT_PATTERNS"
KEY_FILE = ".redaction-key"
REDACTED_ERROR = "<redacted error>"


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
    patterns: Mapping[str, str] = field(default_factory=dict)
    """User detectors: label -> regular expression, matched within each word, masked ``[label]``."""
    identifiers: FieldMode = FieldMode.HASH
    """Ids (``Redactor.identifier``): ``hash`` replaces the PII found in one by a keyed hash,
    ``keep`` keeps ids as given. (``scan``/``mask`` would give two callers one id: refused.)"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep_slots", frozenset(self.keep_slots))
        for name in ("slot_values", "text", "tool_arguments", "tool_results", "identifiers"):
            object.__setattr__(self, name, FieldMode(getattr(self, name)))
        if self.identifiers not in (FieldMode.KEEP, FieldMode.HASH):
            raise ValueError(f"identifiers must be keep or hash (masking ids would merge sessions), not {self.identifiers.value}")
        unknown = set(self.detectors) - set(BUILTIN_DETECTORS)
        if unknown:
            raise ValueError(f"unknown detectors {sorted(unknown)}; known: {', '.join(BUILTIN_DETECTORS)}")
        object.__setattr__(self, "detectors", tuple(self.detectors))
        patterns = dict(self.patterns)
        for label, pattern in patterns.items():
            _check_pattern(label, pattern)
        object.__setattr__(self, "patterns", patterns)

    def __hash__(self) -> int:
        return hash((self.keep_slots, self.slot_values, self.text, self.tool_arguments, self.tool_results,
                     self.detectors, tuple(sorted(self.patterns.items())), self.identifiers))

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
            detectors=_known_detectors(detectors) if detectors is not None else base.detectors,
            patterns=_env_patterns(base.patterns),
            identifiers=_env_identifiers(base.identifiers),
        )


def _check_pattern(label: str, pattern: str) -> None:
    if not isinstance(label, str) or not LABEL.fullmatch(label) or label in BUILTIN_DETECTORS:
        raise ValueError(f"a user detector's label must match {LABEL.pattern} and not be a built-in "
                         f"detector's name; got {label!r}")
    try:
        compiled = re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ValueError(f"user detector {label!r}: {pattern!r} is not a regular expression ({exc})") from exc
    if compiled.fullmatch(""):
        raise ValueError(f"user detector {label!r}: {pattern!r} matches the empty text")


def _env_identifiers(default: FieldMode) -> FieldMode:
    mode = _env_mode("OTEL_SESSION_REDACT_IDENTIFIERS", default)
    if mode not in (FieldMode.KEEP, FieldMode.HASH):
        logger.warning("OTEL_SESSION_REDACT_IDENTIFIERS=%s would merge sessions; using %s", mode.value, default.value)
        return default
    return mode


def _known_detectors(names: tuple[str, ...]) -> tuple[str, ...]:
    unknown = sorted(set(names) - set(BUILTIN_DETECTORS))
    if unknown:
        logger.warning("OTEL_SESSION_REDACT_DETECTORS: unknown detectors %s left out; known: %s",
                       unknown, ", ".join(BUILTIN_DETECTORS))
    return tuple(name for name in names if name in BUILTIN_DETECTORS)


def _env_patterns(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` and the user detectors of ``$OTEL_SESSION_REDACT_PATTERNS`` (a JSON object)."""
    raw = os.environ.get(ENV_PATTERNS, "").strip()
    patterns = dict(base)
    if not raw:
        return patterns
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        logger.error("%s is not JSON (%s); no user detector read from it", ENV_PATTERNS, exc)
        return patterns
    if not isinstance(parsed, dict):
        logger.error("%s must be a JSON object {\"label\": \"regex\"}; no user detector read from it", ENV_PATTERNS)
        return patterns
    for label, pattern in parsed.items():
        try:
            _check_pattern(label, pattern)
        except ValueError as exc:
            logger.error("%s: %s; that detector is left out", ENV_PATTERNS, exc)
            continue
        patterns[label] = pattern
    return patterns


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


def read_key(bundle_dir: str | os.PathLike[str]) -> bytes | None:
    """The key ``load_or_create_key`` gives processes writing under ``bundle_dir``, for a reader
    (never made here): None when there is none yet."""
    from_env = os.environ.get(ENV_REDACTION_KEY)
    if from_env:
        return from_env.encode("utf-8")
    try:
        return bytes.fromhex((Path(bundle_dir) / KEY_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


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

