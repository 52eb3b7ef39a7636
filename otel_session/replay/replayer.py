"""Seekable replay of one journal held in memory: checkpoints every 256 events, built lazily.

Contract::

    replayer = Replayer(events)
    replayer.state_at(seq=None) -> dict      # folds at most CHECKPOINT_INTERVAL events past a checkpoint
    replayer.extend(more_events)             # a live tail grows the journal
    replayer.last_seq, len(replayer)

States share their message and tool objects with the replayer's checkpoints: treat them as
read-only (serialize or copy before changing them). A sealed run on disk is read through
``otel_session.replay.index`` instead, which keeps its checkpoints beside the bundle root.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from otel_session.replay.fold import CHECKPOINT_INTERVAL, State, ordered_events

__all__ = ["Replayer"]


class Replayer:
    """Seekable replay of one journal. Checkpoints every :data:`CHECKPOINT_INTERVAL` events are
    built lazily as seeks reach them (a cache, never written anywhere), so a seek folds at most
    that many events whatever its position."""

    def __init__(self, events: Iterable[dict[str, Any]] = ()) -> None:
        self._events: list[dict[str, Any]] = []
        self._seqs: list[int] = []
        self._checkpoints: list[State] = [State()]  # state after the first k * interval events
        self.extend(events)

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        """Add events (e.g. from a live tail). Out-of-order additions drop the affected checkpoints."""
        added = ordered_events(events)
        if not added:
            return
        if self._seqs and added[0]["seq"] < self._seqs[-1]:
            merged = ordered_events(self._events + added)
            first_changed = bisect.bisect_left(self._seqs, added[0]["seq"])
            del self._checkpoints[first_changed // CHECKPOINT_INTERVAL + 1 :]
            self._events = merged
        else:
            self._events += added
        self._seqs = [event["seq"] for event in self._events]

    def __len__(self) -> int:
        return len(self._events)

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` known (0 for an empty journal)."""
        return self._seqs[-1] if self._seqs else 0

    def state_at(self, seq: int | None = None) -> dict[str, Any]:
        """Return the replay state after every event with ``seq <= seq`` (the newest when ``None``)."""
        count = len(self._events) if seq is None else bisect.bisect_right(self._seqs, seq)
        slot = count // CHECKPOINT_INTERVAL
        self._build_checkpoints(slot)
        state = self._checkpoints[slot].snapshot()
        for event in self._events[slot * CHECKPOINT_INTERVAL : count]:
            state.apply(event)
        return state.render()

    def _build_checkpoints(self, slot: int) -> None:
        while len(self._checkpoints) <= slot:
            built = len(self._checkpoints) - 1
            state = self._checkpoints[built].snapshot()
            for event in self._events[built * CHECKPOINT_INTERVAL : (built + 1) * CHECKPOINT_INTERVAL]:
                state.apply(event)
            self._checkpoints.append(state.freeze())
