"""Fixtures for the voice tests: the loopback OpenAI-compatible mock and a conversation runner."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_session.demo.mock_llm import MockLLMServer

APP = Path(__file__).with_name("pipecat_app.py")

# The caller of every conversation below: the bot's reply lasts 2 s of (silent) speech, so the caller
# speaking again 3.6 s after their first utterance finds it finished (turn 0 ends cleanly), 1.2 s
# after the second finds it mid-sentence (turn 1 is interrupted), and the call ends 1.0 s after the
# third (Pipecat ends that turn with the pipeline, marking it interrupted).
UTTERANCES = ("what is the weather:3.6", "and tomorrow:1.2", "thanks:1.0")
SPEECH_S = "2.0"


@pytest.fixture(scope="module")
def mock_llm() -> Iterator[MockLLMServer]:
    with MockLLMServer(port=0) as server:
        yield server


def run_pipecat(base_url: str, conversation_id: str, *sink: str) -> None:
    """Run ``pipecat_app.py`` (a process of its own: Pipecat traces through the global provider)."""
    done = subprocess.run(
        [sys.executable, str(APP), base_url, conversation_id, *sink, "--speech-s", SPEECH_S, *UTTERANCES],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
