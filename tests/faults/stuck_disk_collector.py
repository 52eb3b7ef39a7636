"""``otel-session collect`` on a disk that stops answering: once the file ``$STUCK_DISK_MARKER``
exists, every write to a run journal (``events.ndjson``) blocks forever, as on a hung device or a
hard-mounted network file system whose server went away. The rest of the process runs as usual."""

from __future__ import annotations

import os
import threading
from pathlib import Path

_marker = Path(os.environ["STUCK_DISK_MARKER"])
_real_write = os.write
_never = threading.Event()


def _write(fd: int, data: bytes) -> int:
    if _marker.exists():
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.endswith("events.ndjson"):
            _never.wait()
    return _real_write(fd, data)


os.write = _write

if __name__ == "__main__":
    from otel_session.cli import main

    main()
