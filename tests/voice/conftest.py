"""Fixtures for the voice tests: the loopback OpenAI-compatible mock and a conversation runner."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_session.demo.mock_llm import MockLLMServer

HERE = Path(__file__).parent

# The caller of every conversation below, speaking on the bot's cues (pipecat_app.py), never on a
# clock: again once the bot's first reply is spoken (turn 0 ends cleanly), over the second reply
# once it starts, its 2 s of (silent) speech (turn 1 is interrupted), and the call ends as the third
# reply starts (Pipecat ends that turn with the pipeline, marking it interrupted). The third carries
# an e-mail address, which the redactor masks like any message text.
CANARY_EMAIL = "canary.jane.doe@example.com"  # said by the caller: it must never reach a bundle as said
UTTERANCES = ("what is the weather:after-reply", "and tomorrow:mid-reply", f"thanks, mail it to {CANARY_EMAIL}:mid-reply")
SPEECH_S = "2.0"


@pytest.fixture(scope="module")
def mock_llm() -> Iterator[MockLLMServer]:
    with MockLLMServer(port=0) as server:
        yield server


def run_app(app: str, *args: str) -> None:
    """Run ``app`` (a process of its own per conversation: each framework sets its tracer provider once)."""
    done = subprocess.run([sys.executable, str(HERE / app), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]


def run_pipecat(base_url: str, conversation_id: str, *sink: str) -> None:
    run_app("pipecat_app.py", base_url, conversation_id, *sink, "--speech-s", SPEECH_S, *UTTERANCES)
