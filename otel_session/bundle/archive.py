"""Bundles in a tar archive, as the viewer downloads them (``<run_id>/run.json``, ``events.ndjson``, ...).

Contract::

    data: bytes = bundle_archive(run_path, run_id)           # the viewer's download, ustar
    is_bundle_archive(path) -> bool
    results: list[BundleRead] = read_bundle_archive(path)   # one per bundle directory in it

Each result's ``path`` is ``<archive>/<directory>``. Only regular files named like a bundle's, one
directory deep, in a directory named like a run id (``run-<uuid>``, as the viewer writes it), are
read: never a link, a device, an absolute path or a path leaving the archive; the reader judges
them as it judges a bundle on disk. A bundle directory's files are unpacked into a private
temporary directory for that (they are the bundle's own, already redacted, bytes) and removed after.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from otel_session.core import layout
from otel_session.bundle.read import BundleRead, read_bundle

__all__ = ["BUNDLE_FILES", "bundle_archive", "is_bundle_archive", "read_bundle_archive"]

BUNDLE_FILES = (layout.RUN_FILE, layout.EVENTS_FILE, layout.CAPTURE_FILE, layout.FEEDBACK_FILE)
_BUNDLE_FILES = frozenset(BUNDLE_FILES)


def bundle_archive(run_path: str | os.PathLike[str], run_id: str) -> bytes:
    """An uncompressed ustar archive ``<run_id>/{run.json,events.ndjson,capture.json,feedback.ndjson}``.

    Each file is read once, so a recording run archives as a consistent prefix of its journal; a
    file that is absent, or a symlink planted in its place, is left out (never followed).
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name in BUNDLE_FILES:
            try:
                fd = os.open(Path(run_path) / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            member = tarfile.TarInfo(f"{run_id}/{name}")
            member.size = len(data)
            member.mode = 0o600
            member.mtime = int(time.time())
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def is_bundle_archive(path: str | os.PathLike[str]) -> bool:
    """True for a regular file that is a tar archive (compressed or not)."""
    path = Path(path)
    return path.is_file() and tarfile.is_tarfile(path)


def read_bundle_archive(path: str | os.PathLike[str]) -> list[BundleRead]:
    """Read every bundle in the archive at ``path``, by directory name."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="otel-session-archive-") as scratch, tarfile.open(path) as archive:
        directories: set[str] = set()
        for member in archive:
            parts = PurePosixPath(member.name).parts
            parts = parts[1:] if parts[:1] == (".",) else parts
            if not member.isfile() or len(parts) != 2 or parts[1] not in _BUNDLE_FILES or not layout.is_valid_run_id(parts[0]):
                continue
            source = archive.extractfile(member)
            if source is None:
                continue
            target = Path(scratch) / parts[0]
            target.mkdir(mode=0o700, exist_ok=True)
            with source, open(target / parts[1], "wb") as unpacked:
                shutil.copyfileobj(source, unpacked)  # in blocks: a journal may be large
            directories.add(parts[0])
        return [
            dataclasses.replace(read_bundle(Path(scratch) / name), path=path / name) for name in sorted(directories)
        ]
