"""A bundle's whole life: paths, files, writer, recorder, seal, recovery, reader, archive.

Contract (SPEC §5)::

    writer = BundleWriter(root)                     # one writer thread for every run under root
    run = writer.open_run(session_id=..., run_id=...)   # -> RunRecorder (the run's lock taken)
    run.append(EventType.TURN_STARTED, payload, at_ns=...)  # -> AppendResult, never raises
    run.close(run_status="ok")                      # drain, seal: terminal capture, durable
    writer.force_flush(); writer.shutdown()         # the OTel exporter contract

    bundle = read_bundle(run_dir)                   # -> BundleRead(status: BundleStatus, events,
                                                    #    diagnostics, manifest, capture)
    JournalTail(events_path, offset).poll()         # a live run's new records

The writer's modules import downwards only: ``files`` < ``recorder`` < ``capture_pool`` <
``seal`` < ``recovery`` < ``write``; the reader (``read``, ``archive``) imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_session.core.lazy import lazy_exports

if TYPE_CHECKING:
    from otel_session.bundle.read import BundleRead, BundleStatus, JournalTail, read_bundle
    from otel_session.bundle.recorder import AppendResult, FailureCode, RunRecorder, WriterLimits
    from otel_session.bundle.write import BundleWriter

_HOMES = {
    **dict.fromkeys(("BundleRead", "BundleStatus", "JournalTail", "read_bundle"), "otel_session.bundle.read"),
    **dict.fromkeys(("AppendResult", "FailureCode", "RunRecorder", "WriterLimits"), "otel_session.bundle.recorder"),
    "BundleWriter": "otel_session.bundle.write",
}
"""Imported when first asked for (PEP 562): a reader (``sessions``, the viewer's lists) that imports
``bundle.read`` does not pay for the writer, the redactor and the normalizer it pulls in."""

__all__ = [
    "AppendResult",
    "BundleRead",
    "BundleStatus",
    "BundleWriter",
    "FailureCode",
    "JournalTail",
    "RunRecorder",
    "WriterLimits",
    "read_bundle",
]

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
