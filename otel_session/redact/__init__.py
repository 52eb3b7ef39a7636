"""Redact: slot values, tool arguments/results, free text and ids, before anything is recorded (SPEC §6).

Contract::

    redactor = Redactor(RedactionPolicy(keep_slots={"party_size"}), key=b"...")  # built once
    redactor = Redactor.from_env(bundle_dir)    # the policy from OTEL_SESSION_REDACT_*, the key under bundle_dir
    redactor.slot_value("date", "2026-12-04")   # -> "hmac-sha256:3f9a0c…" (16 hex digits)
    redactor.text("mail jane@example.com")      # -> "mail [email]"
    redactor.tool_arguments({"card": "4111 1111 1111 1111"})  # structure kept, leaves redacted
    redactor.redact_event(journal_event)        # -> a new JournalEvent, fields redacted by type
    redactor.redact_events(events)              # the events of a span or request, in place; deltas as streams
    stream = redactor.delta_stream()            # one streamed block, record by record (see ``stream``)

Each field has a :class:`FieldMode`: ``keep`` (as is), ``scan`` (free text: what the detectors find
is masked, see ``detectors``), ``mask`` (only the type and length remain) or ``hash`` (a keyed
HMAC-SHA256 prefix, so equal values compare equal without being readable). The behaviour is chosen
once, when the redactor is built; the policy and its environment variables are in ``policy``.

Redaction is idempotent: tokens this package produces (``hmac-sha256:…``, ``<redacted …>``,
``[email]`` …) pass through unchanged, so a collector may re-redact what an app already redacted.
A redactor error replaces the whole value with ``<redacted error>``; nothing passes through.

Streamed deltas are redacted as a stream (:class:`DeltaStream`), record by record: N deltas give N
records, each with its own redacted text, and their texts concatenate to the redacted whole. A
delta is held back until a later one shows where its last word or number ends, so a value split
across deltas is never released in part; its token goes to the delta where it starts.

Modules: ``policy`` (modes, environment, key), ``detectors`` (what free text is scanned for),
``redactor`` (``Redactor``: value functions built once), ``records`` (its record-level half),
``stream`` (``DeltaStream``), ``otlp`` (spans and log records leaving the process).
"""

from __future__ import annotations

import functools
import os
import secrets
from pathlib import Path

from otel_session.core import layout
from otel_session.core.log import redact_with
from otel_session.redact.detectors import BUILTIN_DETECTORS, DEFAULT_DETECTORS
from otel_session.redact.policy import (
    ENV_PATTERNS,
    ENV_REDACTION_KEY,
    KEY_FILE,
    REDACTED_ERROR,
    FieldMode,
    RedactionPolicy,
    load_or_create_key,
    read_key,
)
from otel_session.redact.redactor import Redactor
from otel_session.redact.stream import DeltaStream

__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_DETECTORS",
    "DeltaStream",
    "ENV_PATTERNS",
    "ENV_REDACTION_KEY",
    "FieldMode",
    "KEY_FILE",
    "REDACTED_ERROR",
    "RedactionPolicy",
    "Redactor",
    "load_or_create_key",
    "log_redactor",
    "session_id_candidates",
    "stored_session_id",
]

def stored_session_id(
    root: str | os.PathLike[str], session_id: str, *, eval_id: str | None = None, policy: RedactionPolicy | None = None,
) -> str | None:
    """The id under which the session a user names by its original id (a caller's phone number)
    is stored in ``root``: its ``Redactor.identifier`` with the root's key and the environment's
    policy, or the id as given (bundles recorded before, ids without PII); None when neither has a
    directory. For the CLI and the viewer; reads only (no key is made)."""
    for candidate in session_id_candidates(root, session_id, policy=policy):
        if layout.session_dir(Path(root), candidate, eval_id=eval_id).is_dir():
            return candidate
    return None


def session_id_candidates(
    root: str | os.PathLike[str], session_id: str, *, policy: RedactionPolicy | None = None,
) -> list[str]:
    """The ids a session named ``session_id`` may be stored under, most likely first: its
    ``Redactor.identifier`` with the root's key (when there is one), then the id as given."""
    key = read_key(root)
    if key is None:
        return [session_id]
    stored = _lookup_redactor(policy if policy is not None else RedactionPolicy.from_env(), key).identifier(session_id)
    return list(dict.fromkeys([stored, session_id]))


@functools.lru_cache(maxsize=8)
def _lookup_redactor(policy: RedactionPolicy, key: bytes) -> Redactor:
    """A redactor for id lookups, built once per policy and key (a viewer looks ids up per request)."""
    return Redactor(policy, key=key)


_PROCESS_KEY = secrets.token_bytes(32)


def log_redactor() -> Redactor:
    """The redactor of this process's log lines (``otel_session.core.log``): the environment's policy,
    read again when ``OTEL_SESSION_REDACT*`` changes, with ``$OTEL_SESSION_REDACTION_KEY`` or a key
    of this process's."""
    return _log_redactor(tuple(sorted(item for item in os.environ.items() if item[0].startswith("OTEL_SESSION_REDACT"))))


@functools.lru_cache(maxsize=8)
def _log_redactor(settings: tuple[tuple[str, str], ...]) -> Redactor:
    key = dict(settings).get(ENV_REDACTION_KEY)
    return Redactor(RedactionPolicy.from_env(), key=key.encode("utf-8") if key else _PROCESS_KEY)


redact_with(log_redactor)
