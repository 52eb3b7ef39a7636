"""The instrumentation's own span writing: a fast ``add_event`` for its own events, redacted errors.

Contract::

    add_event = event_adder(span)        # add_event(name, attributes, timestamp_ns)
    mark_error(span, exc, redactor)      # like span.record_exception, message and stack redacted
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Event as _SdkEvent
from opentelemetry.trace import Status, StatusCode

from otel_session.core import semconv as sc
from otel_session.redact import Redactor

__all__ = ["event_adder", "mark_error", "span_attributes"]

class _OwnEvent(_SdkEvent):
    """An SDK ``Event`` made from attributes already valid: ``Event.__init__`` less its base-class
    call (what it sets, set directly)."""

    def __init__(self, name: str, attributes: MappingProxyType[str, Any], timestamp: int) -> None:
        self._name = name
        self._attributes = attributes
        self._timestamp = timestamp


def event_adder(span: trace.Span) -> Callable[[str, dict[str, Any], int], None]:
    """``span.add_event`` for attributes this module built itself (known types, few keys).

    The SDK's ``add_event`` re-validates every attribute into a ``BoundedAttributes``; that is most
    of its cost. For our own events the values are already valid, so the event is appended as an
    immutable mapping directly, under the span's lock and only while it has not ended, as the
    SDK's ``_add_event`` does (on an ended span, the public ``add_event`` says so, as ever). Falls back to the
    public ``add_event`` when the SDK's internals differ or an attribute length/count limit would
    have to be applied.
    """
    events = getattr(span, "_events", None)
    lock = getattr(span, "_lock", None)
    limits = getattr(span, "_limits", None)
    if (
        not hasattr(events, "append")
        or lock is None
        or not hasattr(span, "_end_time")
        or limits is None
        or limits.max_attribute_length is not None
        or (limits.max_event_attributes is not None and limits.max_event_attributes < 8)
    ):
        return lambda name, attributes, timestamp: span.add_event(name, attributes, timestamp=timestamp)
    append = events.append  # type: ignore[union-attr]

    def add_event(name: str, attributes: dict[str, Any], timestamp: int) -> None:
        event = _OwnEvent(name, MappingProxyType(attributes), timestamp)
        with lock:
            if span._end_time is None:  # type: ignore[attr-defined]
                append(event)
                return
        span.add_event(name, attributes, timestamp=timestamp)  # ended: the SDK says so, as it does

    return add_event


def mark_error(span: trace.Span, exc: BaseException, redactor: Redactor) -> None:
    """Like ``span.record_exception``, but the message and stack trace are redacted first."""
    error_type = type(exc).__qualname__
    span.add_event(
        "exception",
        {
            "exception.type": error_type,
            "exception.message": redactor.text(str(exc)),
            "exception.stacktrace": redactor.text("".join(traceback.format_exception(exc))),
        },
    )
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))



def span_attributes(span: trace.Span) -> Any:
    """The attributes set on ``span`` so far (an SDK span's; none for a non-recording one)."""
    attributes = getattr(span, "attributes", None)
    return attributes if attributes is not None else {}
