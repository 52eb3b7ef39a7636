"""Waiting for SIGTERM/SIGINT in a command's main thread, without the lock-in-a-handler deadlock.

A Python signal handler runs on the main thread between two bytecodes. Setting a
``threading.Event`` there deadlocks when the signal lands while the main thread is inside that same
Event's ``wait()`` (it holds the Event's lock). So the handler here only stores the signal number,
and :meth:`StopSignal.wait` polls it with ``time.sleep``, which holds no lock.
"""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

__all__ = ["StopSignal"]

_POLL_S = 0.1


class StopSignal:
    """Catch SIGTERM and SIGINT while in use (``with StopSignal() as stop: stop.wait()``)."""

    def __init__(self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = signals
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum

    def install(self) -> StopSignal:
        """Catch the signals from now on (call from the main thread)."""
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.signals}
        return self

    def restore(self) -> None:
        """Put back the handlers there were before :meth:`install`."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def __enter__(self) -> StopSignal:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def wait(self) -> int:
        """Block until one of the signals arrives; return its number."""
        while self.received is None:
            time.sleep(_POLL_S)
        return self.received
