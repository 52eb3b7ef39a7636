"""The deterministic replay reducer (SPEC §7.1): journal events through a ``seq`` → replay state.

Contract::

    state = replay_state(events, seq=None)   # pure; the state after every event with seq <= seq
    canonical_json(state) -> bytes           # the byte-exact form the JavaScript twin also produces
    replayer = Replayer(events)              # seeks through checkpoints every 256 events
    replayer.state_at(seq) -> dict
    replayer.extend(more_events)             # a live tail grows the journal

The same rules are implemented in ``viewer/static/reducer.js``; the shared fixtures in
``fixtures/replay/`` hold the Python output at every ``seq`` and the JavaScript tests must match
them byte for byte. Regenerate them with ``python -m otel_session.replay.reduce --regenerate fixtures/replay``.

Rules (``docs/replay-and-facts.md`` explains them):

- Events are processed in ``seq`` order only; ``at`` is copied into tool times and never reorders.
  A skipped ``seq`` adds a ``seq_gap`` diagnostic; a repeated one adds ``duplicate_seq`` and is ignored.
- ``assistant_delta`` appends to the block ``payload.index`` of ``message_id`` (kinds ``text``,
  ``thinking``, ``tool_call``). A settled ``message_finished`` replaces the fold with its final
  content; if deltas were folded and differ, a ``reconcile_mismatch`` diagnostic is added and the
  final content wins. An unsettled ``message_finished`` keeps the fold (partial) and is marked
  finished. Deltas after a message finished add ``delta_after_finish`` and change nothing.
- Unknown event types advance ``seq`` and change nothing else.

The fold lives in ``fold``, the in-memory seek in ``replayer``, the byte-exact JSON in
``canonical``; this module is their one public face and the fixtures' command line.

Returned states are plain JSON values. States from a :class:`Replayer` share their message and tool
objects with its cache: treat them as read-only (serialize or copy before changing them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from otel_session.bundle.read import parse_journal
from otel_session.replay.canonical import canonical_json
from otel_session.replay.fold import CHECKPOINT_INTERVAL, ReducerCode, iter_states, replay_state
from otel_session.replay.replayer import Replayer

__all__ = [
    "CHECKPOINT_INTERVAL",
    "ReducerCode",
    "Replayer",
    "canonical_json",
    "expected_states",
    "iter_states",
    "replay_state",
]


# -- shared fixtures -----------------------------------------------------------------------------


def expected_states(journal: bytes) -> bytes:
    """The ``*.expected.ndjson`` body for a journal: the canonical state before any event, then
    after each complete record in ``seq`` order (garbage lines skipped, a torn tail left out)."""
    events, _garbage, _torn = parse_journal(journal)
    return b"".join(canonical_json(state) + b"\n" for state in iter_states(events))


def _regenerate(directory: Path, *, check: bool) -> int:
    """Write (or with ``check`` only compare) ``<name>.expected.ndjson`` beside each journal."""
    stale = []
    for journal in sorted(directory.glob("*.ndjson")):
        if journal.name.endswith(".expected.ndjson"):
            continue
        target = journal.with_name(journal.name[: -len(".ndjson")] + ".expected.ndjson")
        body = expected_states(journal.read_bytes())
        if target.exists() and target.read_bytes() == body:
            continue
        stale.append(target)
        if not check:
            target.write_bytes(body)
    verb = "stale" if check else "rewrote"
    for target in stale:
        print(f"{verb}: {target}", file=sys.stderr)
    return 1 if check and stale else 0


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m otel_session.replay.reduce", description="Regenerate or check the shared reducer fixtures.")
    parser.add_argument("directory", type=Path, help="fixture directory holding *.ndjson journals")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--regenerate", action="store_true", help="write <name>.expected.ndjson for every journal")
    mode.add_argument("--check", action="store_true", help="exit 1 if any expectation is stale")
    args = parser.parse_args(argv)
    return _regenerate(args.directory, check=args.check)


if __name__ == "__main__":
    sys.exit(_main())
