"""The API's clock: every record the instrumentation API makes is stamped ``now_ns()``.

``now_ns`` is ``time.time_ns``; it is looked up through this module at each call, so a test can
step the app's wall clock (``monkeypatch.setattr(_clock, "now_ns", stepped)``) without stepping
the machine's.
"""

from __future__ import annotations

import time

__all__ = ["now_ns"]

now_ns = time.time_ns
