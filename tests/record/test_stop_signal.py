"""StopSignal: commands wait for SIGTERM/SIGINT without taking a lock in the handler."""

from __future__ import annotations

import os
import signal
import threading

from otel_session.core.stop_signal import StopSignal


def test_wait_returns_the_signal_and_restore_puts_the_old_handlers_back():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        assert stop.wait() == signal.SIGTERM
        timer.join()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_before_wait_is_not_lost():
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait() == signal.SIGINT
