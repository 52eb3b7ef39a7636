"""The span tree's nesting (static/spans-view.js, run in Node): span records that name each other
as parents (a hostile or buggy sender) never hide a span or its records — every group is shown once."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
MODULE = Path(__file__).resolve().parents[2] / "viewer" / "static" / "spans-view.js"

TREE = """
import { pathToFileURL } from "node:url";
const { SpanTree } = await import(pathToFileURL(process.argv[1]).href);
const tree = new SpanTree(null, null);
for (const record of JSON.parse(process.argv[2])) tree.add(record);
const shown = [];
const walk = (nodes, parent) => { for (const node of nodes) { shown.push([node.key, parent]); walk(node.children, node.key); } };
walk(tree.tree(), null);
process.stdout.write(JSON.stringify(shown));
"""

AT = "2026-01-01T00:00:00Z"


def shown(records: list[dict]) -> list[list]:
    """Every node of the tree as [its group's key, its parent's key (None for a root)], depth first."""
    result = subprocess.run([NODE, "--input-type=module", "-e", TREE, str(MODULE), json.dumps(records)],
                            capture_output=True, text=True, timeout=300, check=True)
    return json.loads(result.stdout)


def _span(seq: int, span_id: str, parent: str | None, name: str) -> dict:
    return {"seq": seq, "at": AT, "type": "span", "trace_id": "t", "span_id": span_id,
            "payload": {"name": name, "parent_span_id": parent, "started_at": AT, "ended_at": AT}}


def _record(seq: int, event_type: str, span_id: str, **fields) -> dict:
    return {"seq": seq, "at": AT, "type": event_type, "trace_id": "t", "span_id": span_id, "payload": {}, **fields}


@pytest.mark.skipif(NODE is None, reason="node is not installed: the span tree model test did NOT run")
def test_spans_on_a_parent_cycle_nest_as_the_run_does_and_each_is_shown_once():
    records = [
        _record(1, "run_started", "run"), _span(2, "run", None, "invoke_agent"),
        _record(3, "turn_started", "turn", turn_index=0), _span(4, "turn", "run", "turn 0"),
        _record(5, "message_started", "a", turn_index=0, message_id="m1"), _span(6, "a", "b", "a"),  # a and b: each the other's parent
        _record(7, "message_started", "b", turn_index=0, message_id="m2"), _span(8, "b", "a", "b"),
        _record(9, "tool_execution_started", "self", turn_index=0), _span(10, "self", "self", "its own parent"),
        _record(11, "message_started", "x", turn_index=0, message_id="m3"), _span(12, "x", "y", "x"),  # x and y on a cycle,
        _span(13, "y", "x", "y"),
        _span(14, "z", "x", "under x"),  # z under x: not on the cycle, kept there
        _record(15, "run_finished", "run"),
    ]
    nodes = shown(records)
    keys = [key for key, _ in nodes]
    assert sorted(keys) == sorted({f"s:t/{span}" for span in ("run", "turn", "a", "b", "self", "x", "y", "z")})  # each once
    parents = dict(nodes)
    assert parents["s:t/run"] is None and parents["s:t/turn"] == "s:t/run"
    for span in ("a", "b", "self", "x"):  # a span on a cycle nests under its turn, as one without a span record
        assert parents[f"s:t/{span}"] == "s:t/turn", span
    assert parents["s:t/y"] == "s:t/run"  # no turn index: under the run
    assert parents["s:t/z"] == "s:t/x"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_cycle_made_by_falling_back_is_broken_too():
    """The turn's span names y as parent, y names m, and m (on a cycle with w) falls back to the turn."""
    records = [
        _record(1, "run_started", "run"), _span(2, "run", None, "invoke_agent"),
        _record(3, "turn_started", "turn", turn_index=0), _span(4, "turn", "y", "turn 0"),
        _span(5, "y", "m", "y"),
        _record(6, "message_started", "m", turn_index=0, message_id="m1"), _span(7, "m", "w", "m"),
        _span(8, "w", "m", "w"),
    ]
    nodes = shown(records)
    assert sorted(key for key, _ in nodes) == sorted(f"s:t/{span}" for span in ("run", "turn", "y", "m", "w"))
