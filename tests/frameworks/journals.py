"""Journals of recorded framework spans: a fixture through the collector's own path, read back.

Contract::

    runs = recorded_runs(fixture, root)   # fixtures/frameworks/<fixture> imported into bundles
                                          # under ``root`` (decode → normalize → redact → write, as
                                          # ``otel-session import`` does); each run's records in order
    messages(events)                      # [(role, text of its text blocks)] of finished messages
    tool_calls(events) / executions(events)

The fixtures are OTLP JSON lines the real frameworks emitted (``agent_<framework>.py`` records
them in the framework's venv); reading them needs only this project's venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from otel_session.collector.importer import import_files
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import bundles

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"


def recorded_runs(fixture: str, root: Path) -> list[list[dict[str, Any]]]:
    report = import_files([FIXTURES / fixture], root, redactor=Redactor(RedactionPolicy(), key=b"frameworks"))
    assert report.ok, (report.errors, report.rejected)
    return runs_of(root)


def runs_of(root: Path) -> list[list[dict[str, Any]]]:
    """Each run's records under ``root``, runs in the order they started."""
    found = sorted(bundles(root), key=lambda read: (read.events[0]["at"] if read.events else "", read.run_id or ""))
    return [read.events for read in found]


def _texts(payload: dict[str, Any], kind: str) -> list[str]:
    return [block["text"] for block in payload.get("content") or () if block["kind"] == kind]


def messages(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, joined text blocks) of every finished message, in journal order."""
    roles = {e["message_id"]: e["payload"]["role"] for e in events if e["type"] == "message_started"}
    return [(roles[e["message_id"]], "".join(_texts(e["payload"], "text")))
            for e in events if e["type"] == "message_finished"]


def replies(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The payloads of finished assistant messages."""
    roles = {e["message_id"]: e["payload"]["role"] for e in events if e["type"] == "message_started"}
    return [e["payload"] for e in events if e["type"] == "message_finished" and roles[e["message_id"]] == "assistant"]


def tool_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls the model asked for (``{"id", "name", "arguments"}``), in journal order."""
    return [json.loads(text) for e in events if e["type"] == "message_finished"
            for text in _texts(e["payload"], "tool_call")]


def executions(events: list[dict[str, Any]]) -> list[tuple[str, str, Any, Any]]:
    """(tool_call_id, name, arguments, result) of every tool execution, in journal order."""
    finished = {e["tool_call_id"]: e["payload"] for e in events if e["type"] == "tool_execution_finished"}
    return [(e["tool_call_id"], e["payload"]["name"], e["payload"]["arguments"],
             finished.get(e["tool_call_id"], {}).get("result"))
            for e in events if e["type"] == "tool_execution_started"]
