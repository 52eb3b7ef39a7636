"""What the app labelled a run with, and the scores it gave: carried on the run's own records.

Contract::

    payload.update(run_labels(span_attributes, resource_attributes))   # run_started: {"tags"?, "metadata"?}
    payload.update(span_scores(span_attributes))                        # run_/turn_finished: {"scores"?: {...}}

The convention (docs/conventions.md, "Tags and metadata"):

* ``otel_session.tags``: a string array (or one string) on the run's root span or on the resource;
  both are joined, each tag once, sorted; at most ``MAX_TAGS`` of ``MAX_TEXT`` characters.
* ``otel_session.metadata.<key>``: a string, number or boolean on the root span or the resource;
  the key is ``<key>``, the value kept as text.
* the resource's ``service.version``, ``deployment.environment`` and ``deployment.environment.name``:
  metadata under their own names.

Evaluation scores the app set: ``otel_session.score.<name>`` (a finite number, a boolean, or a
category of at most 100 characters) on the run's or a turn's span, read when it ends:
``span_scores`` gives the ``scores`` of its ``run_finished`` / ``turn_finished``.

The root span's entries win over the resource's. At most ``MAX_METADATA`` entries. Values are
the app's: the record's redaction (``redact.records``: PII detectors over every string) applies to
them as to the rest of ``run_started``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from otel_session.core import semconv as sc

__all__ = ["MAX_METADATA", "MAX_TAGS", "MAX_TEXT", "run_labels", "span_scores"]

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


def _score_value(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    return value if isinstance(value, str) and 0 < len(value) <= 100 else None


def span_scores(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``{"scores": {name: value}}`` of a run's or turn's span (empty when it has none)."""
    scores = {}
    for name, value in attributes.items():
        if name.startswith(sc.SCORE_PREFIX) and 0 < len(name) - len(sc.SCORE_PREFIX) <= 64:
            kept = _score_value(value)
            if kept is not None:
                scores[name[len(sc.SCORE_PREFIX):]] = kept
    return {"scores": dict(sorted(scores.items())[:MAX_METADATA])} if scores else {}
