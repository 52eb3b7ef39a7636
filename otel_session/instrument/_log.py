"""What the instrumentation says when recording fails or is misused: each thing once, never raised.

Contract::

    warn_once(key, message, *args)   # logged the first time ``key`` is seen in this process
    capture_failed(what)             # "recording <what> failed; the app goes on", with the traceback, once
    forget_warnings()                # say everything again (a test's fresh start)
"""

from __future__ import annotations

from typing import Any

from otel_session.core.log import get_logger

__all__ = ["capture_failed", "forget_warnings", "logger", "warn_once"]

logger = get_logger("otel_session.instrument")

_warned: set[str] = set()


def warn_once(key: str, message: str, *args: Any, **kwargs: Any) -> None:
    """Log ``message`` the first time ``key`` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(message, *args, **kwargs)


def capture_failed(what: str) -> None:
    warn_once(f"capture:{what}", "otel_session: recording %s failed; the app goes on", what, exc_info=True)


def forget_warnings() -> None:
    """Every warning is said again once (each test starts as a fresh process would)."""
    _warned.clear()
