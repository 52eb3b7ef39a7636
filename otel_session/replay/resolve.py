"""Run resolution (SPEC §7.3): which run bundle a session id (and maybe a run id) names.

Contract::

    check_session_id(session_id)                        # -> session_id, or InvalidId (400)
    check_run_id(run_id)                                # -> run_id, or InvalidId (400)
    check_run_id(run_id, prefix=True)                   # a short id as the viewer shows it (run-45757dbf)
    runs = session_runs(root, session_id)               # [RunInfo], latest first ([] when none)
    raise session_not_found(root, session_id)           # SessionNotFound, naming the evals that hold it
    shown_session_id(root, session_id)                  # how an answer names a typed id: never raw PII
    resolved = resolve_run(root, session_id, run_id=None, include_evals=False)   # -> ResolvedRun

Every ``RunResolutionError`` carries ``code`` and ``http_status``, so the CLI (exit codes) and the
viewer (JSON errors) map the same failure the same way. Nothing here writes, and no path derived
from an id leaves the root (``otel_session.core.layout``). An error names a session the way it is
stored (``shown_session_id``): a typed id holding personal data (a caller's number) is never
echoed raw, and a session not found says which key its keyed hash was computed with, so bundles
written with another key are not mistaken for absent ones.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from otel_session.core import layout
from otel_session.bundle.read import RunInfo, find_run, iter_session_runs
from otel_session.redact import ENV_REDACTION_KEY, KEY_FILE, FieldMode, RedactionPolicy, Redactor, session_id_candidates
from otel_session.redact.policy import read_key

__all__ = [
    "AmbiguousRunId",
    "EvalRunNotServed",
    "InvalidId",
    "OutsideRoot",
    "ResolvedRun",
    "RunNotFound",
    "RunResolutionError",
    "RunSessionMismatch",
    "SessionNotFound",
    "check_run_id",
    "check_session_id",
    "latest_first",
    "quoted_id",
    "resolve_run",
    "session_not_found",
    "session_runs",
    "shown_session_id",
]

MAX_SESSION_ID_CHARS = 1024
"""The longest session id any writer stores."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RUN_ID_PREFIX = re.compile(r"run-[0-9a-f][0-9a-f-]{3,34}").fullmatch
"""A short run id: ``run-`` and at least 4 characters of the UUID (the viewer shows 8)."""


class RunResolutionError(Exception):
    """A session or run could not be resolved. ``code`` and ``http_status`` map it onto the API."""

    code = "resolution_error"
    http_status = 404


class InvalidId(RunResolutionError, ValueError):
    """A session or run id is malformed (400); ``code`` says which."""

    http_status = 400

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def quoted_id(value: object) -> str:
    """An id as a message names it (quoted), the personal data in it masked (``[phone]``): an
    answer, an error or a log line never echoes what the detectors find in an id it was given."""
    text = value if isinstance(value, str) else repr(value)
    scanner = _id_scanner(RedactionPolicy.from_env())
    return repr(text if scanner is None else scanner.text(text))


class SessionNotFound(RunResolutionError, LookupError):
    """The session has no runs (404). ``eval_ids`` names the evals holding runs of it, if any."""

    code = "session_not_found"

    def __init__(self, session_id: str, eval_ids: Iterable[str] = (), *, note: str = "") -> None:
        self.session_id = session_id
        self.eval_ids = sorted(set(eval_ids))
        if self.eval_ids:
            evals = ", ".join(repr(eval_id) for eval_id in self.eval_ids)
            message = (f"session {session_id!r} has no live runs: it is an eval session (eval {evals}); "
                       "ask for eval runs to see it (otel-session facts --evals)")
        else:
            message = f"session {session_id!r} has no runs{note}"
        super().__init__(message)


class RunNotFound(RunResolutionError, LookupError):
    """No run with this id exists (404)."""

    code = "run_not_found"

    def __init__(self, session_id: str, run_id: str) -> None:
        super().__init__(f"run {quoted_id(run_id)} not found in session {quoted_id(session_id)}")
        self.session_id = session_id
        self.run_id = run_id


class EvalRunNotServed(RunNotFound):
    """The run is an eval run of this session, and eval runs were not asked for (404)."""

    def __init__(self, session_id: str, run_id: str, eval_id: str | None) -> None:
        super().__init__(session_id, run_id)
        self.args = (f"run {quoted_id(run_id)} of session {quoted_id(session_id)} is an eval run (eval {eval_id!r}); "
                     "ask for eval runs to see it (otel-session facts/replay --evals)",)
        self.eval_id = eval_id


class OutsideRoot(RunResolutionError, LookupError):
    """The session's directory leads outside the bundle root (a planted symlink): treated as absent (404)."""

    code = "run_not_found"

    def __init__(self) -> None:
        super().__init__("no such run inside the bundle root")


class RunSessionMismatch(RunResolutionError):
    """The run exists but belongs to another session (409)."""

    code = "run_session_mismatch"
    http_status = 409

    def __init__(self, session_id: str, run_id: str, owner_session_id: str) -> None:
        super().__init__(f"run {quoted_id(run_id)} belongs to session {quoted_id(owner_session_id)}, "
                         f"not to session {quoted_id(session_id)}")
        self.session_id = session_id
        self.run_id = run_id
        self.owner_session_id = owner_session_id


class AmbiguousRunId(InvalidId):
    """A short run id that starts more than one run of the session (400), naming them."""

    def __init__(self, prefix: str, session_id: str, matches: list[str]) -> None:
        super().__init__(f"run id {quoted_id(prefix)} is ambiguous in session {quoted_id(session_id)}: it starts "
                         f"{len(matches)} runs ({', '.join(matches)}); give more of it", code="ambiguous_run_id")
        self.matches = matches


@dataclass(frozen=True)
class ResolvedRun:
    """The run a request binds to, and whether it was chosen as the session's latest."""

    session_id: str
    run_id: str
    path: Path
    fallback_to_latest_run: bool
    run: RunInfo


def check_session_id(session_id: object) -> str:
    """``session_id`` if a writer could have stored it: 1 to 1024 characters, no control characters."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > MAX_SESSION_ID_CHARS:
        length = len(session_id) if isinstance(session_id, str) else type(session_id).__name__
        raise InvalidId(f"malformed session id: expected 1 to {MAX_SESSION_ID_CHARS} characters, got {length}",
                        code="malformed_session_id")
    if _CONTROL.search(session_id):
        raise InvalidId(f"malformed session id: control characters are not allowed (at {_CONTROL.search(session_id).start()})",
                        code="malformed_session_id")
    return session_id


def check_run_id(run_id: object, *, prefix: bool = False) -> str:
    """``run_id`` if it is ``run-`` followed by a lower-case UUID (the only run ids written), or,
    with ``prefix``, by at least its first 4 characters (a short id)."""
    if isinstance(run_id, str) and (layout.is_valid_run_id(run_id) or prefix and _RUN_ID_PREFIX(run_id)):
        return run_id
    expected = "a lower-case UUID (or its first 4 or more characters)" if prefix else "a lower-case UUID"
    raise InvalidId(f"malformed run id {quoted_id(run_id)}: expected 'run-' followed by {expected}",
                    code="malformed_run_id")


def _complete_run_id(root: str | os.PathLike[str], session_id: str, prefix: str, runs: list[RunInfo]) -> str:
    """The whole id of the one run ``prefix`` starts: among the session's ``runs``, else anywhere
    under the root (so a run of another session is still named as such); ``prefix`` itself when
    none (then not found). Raises ``AmbiguousRunId`` when it starts several."""
    matches = sorted({run.run_id for run in runs if run.run_id.startswith(prefix)})
    if not matches:  # the prefix is [0-9a-f-] only, so it is no glob pattern
        matches = sorted({path.name for pattern in ("sessions/*/", "evals/*/sessions/*/")
                          for path in Path(root).glob(pattern + prefix + "*") if layout.is_valid_run_id(path.name)})
    if len(matches) > 1:
        raise AmbiguousRunId(prefix, session_id, matches)
    return matches[0] if matches else prefix


def latest_first(runs: Iterable[RunInfo]) -> list[RunInfo]:
    """Runs by ``created_at`` descending, then ``run_id`` descending (the resolution order)."""
    return sorted(runs, key=lambda run: (run.created_at, run.run_id), reverse=True)


def session_runs(root: str | os.PathLike[str], session_id: str, *, include_evals: bool = False) -> list[RunInfo]:
    """The runs of one session, latest first; [] when it has none or its directory leads out of the root."""
    check_session_id(session_id)
    try:
        return _stored_runs(root, session_id, include_evals)[1]
    except layout.UnsafePathError:
        return []


def _stored_runs(root: str | os.PathLike[str], session_id: str, include_evals: bool) -> tuple[str, list[RunInfo]]:
    """The id the session is stored under (its keyed hash when it holds PII, issue 15 §5) and its
    runs, latest first: the original id finds the session through the root's key. With no runs,
    the id as an answer may show it (``shown_session_id``)."""
    for candidate in session_id_candidates(root, session_id):
        runs = latest_first(iter_session_runs(root, candidate, include_evals=include_evals))
        if runs:
            return candidate, runs
    return shown_session_id(root, session_id), []


def shown_session_id(root: str | os.PathLike[str], session_id: str) -> str:
    """``session_id`` as an answer (an error, a listing) may name it: as it is stored — its
    ``Redactor.identifier`` with the root's key, or as typed when it holds no personal data (or
    ids are kept as given) —, and with the personal data masked when there is no key to hash it."""
    stored = session_id_candidates(root, session_id)[0]
    if stored != session_id:
        return stored
    scanner = _id_scanner(RedactionPolicy.from_env())
    return session_id if scanner is None or scanner.identifier(session_id) == session_id else scanner.text(session_id)


@functools.lru_cache(maxsize=4)
def _id_scanner(policy: RedactionPolicy) -> Redactor | None:
    """A redactor that finds PII in ids (its key is never used for a hash shown), None under ``keep``."""
    return None if policy.identifiers is FieldMode.KEEP else Redactor(policy, key=b"")


def _key_note(root: str | os.PathLike[str], session_id: str) -> str:
    """Why a session holding PII may exist and not be found: its keyed hash depends on the key."""
    scanner = _id_scanner(RedactionPolicy.from_env())
    if scanner is None or scanner.identifier(session_id) == session_id:
        return ""
    if read_key(root) is None:
        return (f": the id holds personal data, which bundles store as a keyed hash, and there is no key to "
                f"compute it (the bundle root has no {KEY_FILE}); set ${ENV_REDACTION_KEY} to the key the "
                "bundles were written with")
    source = f"${ENV_REDACTION_KEY}" if os.environ.get(ENV_REDACTION_KEY) else f"the bundle root's {KEY_FILE}"
    return (f" (the id holds personal data: it was looked up by its keyed hash, with the key of {source}; "
            f"bundles written with another key are found with that key in ${ENV_REDACTION_KEY})")


def session_not_found(root: str | os.PathLike[str], session_id: str, *, include_evals: bool = False) -> SessionNotFound:
    """The error for a session with no runs, naming it as ``shown_session_id`` does (and the key
    its hash was looked up with, when it holds PII); without ``include_evals`` it names the evals
    that hold runs of the session (an eval session is never part of the live index)."""
    evals = [] if include_evals else [run.eval_id or "?" for run in session_runs(root, session_id, include_evals=True)]
    return SessionNotFound(shown_session_id(root, session_id), evals, note=_key_note(root, session_id))


def resolve_run(
    root: str | os.PathLike[str], session_id: str, run_id: str | None = None, *, include_evals: bool = False
) -> ResolvedRun:
    """Bind ``session_id`` (and ``run_id`` if given) to one run bundle.

    ``run_id`` may be short (its first characters, as the viewer shows it); several runs it starts
    raise ``AmbiguousRunId``. Without ``run_id`` the latest run is chosen (``created_at`` descending, then ``run_id``
    descending) and ``fallback_to_latest_run`` is true. Raises ``InvalidId`` for malformed ids,
    ``RunSessionMismatch`` when the run belongs to another session, ``SessionNotFound`` when the
    session has no runs (naming the evals that hold it), ``EvalRunNotServed`` for
    an eval run when evals were not asked for, ``RunNotFound`` for an unknown run and
    ``OutsideRoot`` when the session's directory leads out of the root.
    """
    check_session_id(session_id)
    if run_id is not None:
        check_run_id(run_id, prefix=True)
    typed = session_id
    try:
        session_id, runs = _stored_runs(root, session_id, include_evals)
    except layout.UnsafePathError:
        raise OutsideRoot() from None
    if run_id is not None and not layout.is_valid_run_id(run_id):
        run_id = _complete_run_id(root, session_id, run_id, runs)
    if run_id is None:
        if not runs:
            raise session_not_found(root, typed, include_evals=include_evals)
        latest = runs[0]
        return ResolvedRun(session_id, latest.run_id, latest.path, True, latest)
    for run in runs:
        if run.run_id == run_id:
            return ResolvedRun(session_id, run_id, run.path, False, run)
    elsewhere = find_run(root, run_id, include_evals=True)
    if elsewhere is not None:
        if elsewhere.session_id == session_id:  # found only among the eval runs
            raise EvalRunNotServed(session_id, run_id, elsewhere.eval_id)
        raise RunSessionMismatch(session_id, run_id, elsewhere.session_id)
    if not runs:
        raise session_not_found(root, typed, include_evals=include_evals)
    raise RunNotFound(session_id, run_id)
