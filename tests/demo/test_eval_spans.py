"""Every span of an eval run says so, so a collector files the run under evals/ from its first span.

Spans reach a collector when they end — children before the root span that names the run's kind —
so the session processor stamps ``otel_session.run.kind`` and ``otel_session.eval.id`` on each.
"""

from __future__ import annotations

import otel_session
from otel_session.testing import capture_bundle


def test_children_of_an_eval_run_carry_its_kind_and_eval_id():
    with capture_bundle() as captured:
        with otel_session.session("s-eval"), otel_session.run("booking", kind="eval", eval_id="regression-7"):
            with otel_session.turn(0, state="greet"):
                with otel_session.message("user") as said:
                    said.text("hi")
    assert len(captured.spans) == 3
    for span in captured.spans:
        assert span.attributes["otel_session.run.kind"] == "eval", span.name
        assert span.attributes["otel_session.eval.id"] == "regression-7", span.name


def test_live_runs_are_not_stamped_with_a_kind_on_their_children():
    with capture_bundle() as captured:
        with otel_session.session("s-live"), otel_session.run("booking"):
            with otel_session.turn(0, state="greet"):
                pass
    [turn] = [span for span in captured.spans if span.name == "turn 0"]
    assert "otel_session.eval.id" not in turn.attributes
