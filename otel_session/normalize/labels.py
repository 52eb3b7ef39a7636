"""A run's tags and metadata: what the app labelled it with, carried on its ``run_started`` record.

Contract::

    payload.update(run_labels(span_attributes, resource_attributes))   # {"tags"?: [...], "metadata"?: {...}}

The convention (docs/conventions.md, "Tags and metadata"):

* ``otel_session.tags``: a string array (or one string) on the run's root span or on the resource;
  both are joined, each tag once, sorted; at most ``MAX_TAGS`` of ``MAX_TEXT`` characters.
* ``otel_session.metadata.<key>``: a string, number or boolean on the root span or the resource;
  the key is ``<key>``, the value kept as text.
* the resource's ``service.version``, ``deployment.environment`` and ``deployment.environment.name``:
  metadata under their own names.

The root span's entries win over the resource's. At most ``MAX_METADATA`` entries. Values are
the app's: the record's redaction (``redact.records``: PII detectors over every string) applies to
them as to the rest of ``run_started``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_session.core import semconv as sc

__all__ = ["MAX_METADATA", "MAX_TAGS", "MAX_TEXT", "run_labels"]

MAX_TAGS = 32
MAX_METADATA = 32
MAX_TEXT = 200


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        text = str(value)
        return text[:MAX_TEXT] if text else None
    return None


def _tags(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
    return [text for text in map(_text, items) if text is not None]


def _metadata(attributes: Mapping[str, Any], into: dict[str, str]) -> None:
    for name in sc.RESOURCE_METADATA:
        text = _text(attributes.get(name))
        if text is not None:
            into[name] = text
    for name, value in attributes.items():
        if name.startswith(sc.RUN_METADATA_PREFIX) and len(name) > len(sc.RUN_METADATA_PREFIX):
            text = _text(value)
            if text is not None:
                into[name[len(sc.RUN_METADATA_PREFIX):][:MAX_TEXT]] = text


def run_labels(attributes: Mapping[str, Any], resource_attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``tags`` and ``metadata`` of a run's ``run_started`` payload, each only when there are some."""
    resource = resource_attributes or {}
    tags = sorted(set(_tags(resource.get(sc.RUN_TAGS)) + _tags(attributes.get(sc.RUN_TAGS))))[:MAX_TAGS]
    metadata: dict[str, str] = {}
    _metadata(resource, metadata)
    _metadata(attributes, metadata)  # the span's win
    labels: dict[str, Any] = {}
    if tags:
        labels["tags"] = tags
    if metadata:
        labels["metadata"] = dict(sorted(metadata.items())[:MAX_METADATA])
    return labels
