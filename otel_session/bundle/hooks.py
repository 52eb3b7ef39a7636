"""What the bundle writer tells others of its runs (the run catalog), on a thread of their own.

Contract::

    class RunHooks(Protocol): runs_passed(opened, sealed); close()   # e.g. catalog.CatalogHook
    teller = HookTeller(hooks, hold_s=HOLD_S)   # the writer's: one daemon thread
    teller.opened(directory, manifest)   # a producer opened a run (cheap: a deque append)
    teller.passed([SealedRun(directory, manifest, capture)])   # the writer thread sealed runs (never waits)
    teller.flush(timeout_s)              # -> True once everything handed over so far was told
    teller.close(timeout_s)              # tell what is left, then close the hooks
    hooks = chain_hooks(catalog_hook, indexer, uploader)   # several hooks (None ones left out), told in order

A hook may wait (a catalog locked by a viewer, a database across the network): it never holds up
the writer thread, whose queues are bounded, nor the producers. What piles up while a hook is slow
is merged into one call (opened runs in order, sealed ones as a set). A run opened is told with its
own seal, or ``hold_s`` after it opened if it is still recording (at once on a flush): the catalog
writes a call in one transaction, and a short run as one row (sealed), where telling each opening at
once cost a transaction and a row more a run. Past ``MAX_PENDING`` runs the
oldest are left to the hook's own catch-up (the catalog's keeper, ``otel-session reindex``) and a
warning says so: the bundles are the truth, a hook only indexes them.

A sealed run is told with what its writer holds of it (``SealedRun``: its ``run.json`` and the
terminal ``capture.json`` it wrote), so that a hook reads nothing back from disk.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from otel_session.core.log import get_logger

__all__ = ["MAX_PENDING", "HookTeller", "RunHooks", "SealedRun", "chain_hooks"]

logger = get_logger(__name__)

MAX_PENDING = 100_000
"""Runs waiting to be told; past it the oldest are dropped (the hook's catch-up finds them)."""
HOLD_S = 2.0
"""How long a run opened waits to be told with its own seal before it is told alone: a run shorter
than this is one catalog row, written as it seals; a longer (live) run's row is in the catalog this
soon after it opened."""


class SealedRun(NamedTuple):
    """A run its writer has just sealed, as the writer knows it."""

    directory: str
    manifest: dict[str, Any]
    """Its ``run.json`` as written."""
    capture: dict[str, Any] | None
    """Its terminal ``capture.json`` as written; None when the writer could not say (the file may
    not hold it: a hook reads the bundle)."""


class RunHooks(Protocol):
    """Told of the runs opened since the last call (their directory and manifest) and of the runs
    sealed. Never raises (``otel_session.catalog.CatalogHook`` keeps the catalog)."""

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[SealedRun]) -> None: ...

    def close(self) -> None: ...


class HookTeller:
    """Tells ``hooks`` of runs opened and sealed, from a thread of its own (see the module docstring)."""

    def __init__(self, hooks: RunHooks, *, hold_s: float = HOLD_S) -> None:
        self._hooks = hooks
        self._hold_s = hold_s
        self._cond = threading.Condition()
        self._opened: deque[tuple[str, dict[str, Any], float]] = deque()
        """Runs opened, oldest first, with when: each told at its seal or ``hold_s`` after it opened."""
        self._sealed: dict[str, SealedRun] = {}
        self._stopping = False
        self._dropped = 0
        self._handed = 0  # calls of opened()/passed() so far
        self._told = 0  # of those, how many the hooks were told of
        self._flushing = 0  # flush() calls waiting: nothing is held meanwhile
        self._thread = threading.Thread(target=self._run, name="otel-session-run-hooks", daemon=True)
        self._thread.start()

    def opened(self, directory: str, manifest: dict[str, Any]) -> None:
        with self._cond:
            self._opened.append((directory, manifest, time.monotonic()))
            self._handed += 1
            self._bound()
            self._cond.notify_all()

    def passed(self, sealed: Sequence[SealedRun]) -> None:
        with self._cond:
            self._sealed.update((run.directory, run) for run in sealed)
            self._handed += 1
            self._bound()
            self._cond.notify_all()

    def _bound(self) -> None:
        """Drop the oldest opened runs past ``MAX_PENDING`` (``_cond`` held); a sealed one is kept."""
        while len(self._opened) + len(self._sealed) > MAX_PENDING and self._opened:
            self._opened.popleft()
            self._dropped += 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    self._cond.wait(self._hold_s - (time.monotonic() - self._opened[0][2]) if self._opened else None)
                if not (self._opened or self._sealed):
                    return  # stopping, nothing left
                now_sealed, self._sealed = self._sealed, {}
                sealed = list(now_sealed.values())
                held_since = time.monotonic() - self._hold_s
                everything = self._stopping or self._flushing
                told = [entry for entry in self._opened if everything or entry[2] <= held_since or entry[0] in now_sealed]
                self._opened = deque(entry for entry in self._opened
                                     if not (everything or entry[2] <= held_since or entry[0] in now_sealed))
                dropped, self._dropped = self._dropped, 0
                handed = self._handed if not self._opened else None  # runs still held: not everything told
            if dropped:
                logger.warning("run hooks fell behind: %d opened run(s) not told (the catalog's next pass adds them)",
                               dropped)
            try:
                self._hooks.runs_passed([(directory, manifest) for directory, manifest, _ in told], sealed)
            except Exception:  # noqa: BLE001 - a hook never stops the writer
                logger.exception("bundle writer: a run hook failed")
            with self._cond:
                if handed is not None:
                    self._told = handed
                self._cond.notify_all()

    def _due(self) -> bool:
        """Whether there is something to tell now (``_cond`` held): a run sealed, a run opened
        ``hold_s`` ago, a flush or the stop."""
        return bool(self._sealed or self._stopping or (self._opened and (
            self._flushing or time.monotonic() - self._opened[0][2] >= self._hold_s)))

    def flush(self, timeout_s: float) -> bool:
        """Wait until the hooks were told of everything handed over before this call."""
        with self._cond:
            target = self._handed
            self._flushing += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._told >= target or not self._thread.is_alive(), timeout_s) \
                    and self._told >= target
            finally:
                self._flushing -= 1

    def close(self, timeout_s: float) -> None:
        """Tell what is left (within ``timeout_s``), then close the hooks. Idempotent."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            logger.warning("run hooks did not finish within %.0f s; the catalog's next pass adds what they missed",
                           timeout_s)
            return
        self._hooks.close()


class _Chain:
    def __init__(self, hooks: Sequence[RunHooks]) -> None:
        self.hooks = hooks

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[SealedRun]) -> None:
        for hook in self.hooks:  # in order: the catalog's rows are in before an upload records a location
            hook.runs_passed(opened, sealed)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()


def chain_hooks(*hooks: RunHooks | None) -> RunHooks | None:
    """The writer hooks given (None ones left out), told in order; None when there are none."""
    present = [hook for hook in hooks if hook is not None]
    return None if not present else present[0] if len(present) == 1 else _Chain(present)
