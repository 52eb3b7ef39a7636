"""The facts row model (static/facts-view.js, run in Node): the required-slot triad comes only from
``required_slots_in_state`` — a slot the user volunteered is never shown as filled or missing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
MODULE = Path(__file__).resolve().parents[2] / "viewer" / "static" / "facts-view.js"

TRIAD = """
import { pathToFileURL } from "node:url";
const { slotTriad, verdictText } = await import(pathToFileURL(process.argv[1]).href);
const turn = JSON.parse(process.argv[2]);
process.stdout.write(JSON.stringify({ triad: slotTriad(turn), verdict: verdictText(turn.verdict) }));
"""


def model(turn: dict) -> dict:
    result = subprocess.run([NODE, "--input-type=module", "-e", TRIAD, str(MODULE), json.dumps(turn)],
                            capture_output=True, text=True, timeout=300, check=True)
    return json.loads(result.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed: the facts view model test did NOT run")
def test_triad_is_built_only_from_the_required_slots_in_state():
    turn = {
        "required_slots_in_state": ["date", "party_size"],
        "missing_required_slots": ["date", "phone"],  # "phone" is not required in this state
        "slot_writes": [{"slot": "party_size", "source": "nlu"}, {"slot": "name", "source": "nlu"}],  # "name" volunteered
        "unattributed_diffs": [{"slot": "notes"}],
        "verdict": {"from": "ask_date", "to": "ask_date", "reason": "date missing"},
    }
    answer = model(turn)
    assert answer["triad"] == {"filled": ["party_size"], "written": ["party_size"], "missing": ["date"]}
    assert answer["verdict"] == "ask_date → ask_date: date missing"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_triad_of_an_unfinished_turn_does_not_guess_what_is_missing():
    turn = {"required_slots_in_state": ["date"], "missing_required_slots": None, "slot_writes": [{"slot": "date"}]}
    assert model(turn)["triad"] == {"filled": None, "written": ["date"], "missing": None}
