"""The anthropic stream tap on an older SDK (``Stream._iterator`` made in ``__init__``), in a venv of
its own: the test extras need a newer anthropic. See ``anthropic_legacy_agent.py``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from otel_session.replay.reduce import replay_state

from .conftest import CANARY_CARD, all_bytes, sealed_bundles
from .test_openai_streams import conversation, deltas_of
from .thirdparty_venv import OWN_DEPENDENCIES, cached_venv

pytestmark = pytest.mark.slow

AGENT = Path(__file__).with_name("anthropic_legacy_agent.py")
VERSION = "0.125.0"  # the last 0.x; 1.14 and later make the iterator on first use (test_anthropic_streams)
REQUIREMENTS = (
    f"anthropic=={VERSION}",
    "opentelemetry-sdk==1.45.1",
    "opentelemetry-exporter-otlp==1.45.1",
    "opentelemetry-instrumentation==0.66b1",
    *OWN_DEPENDENCIES,
)


def test_an_older_sdks_streams_are_deltas_in_process(tmp_path):
    python = cached_venv("OTEL_SESSION_ANTHROPIC0_VENV", ".venv-anthropic0", REQUIREMENTS, f"anthropic {VERSION}")
    greeting = f"my card is {CANARY_CARD}"
    done = subprocess.run([str(python), str(AGENT), str(tmp_path / "bundles"), greeting],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == VERSION
    (bundle,) = sealed_bundles(tmp_path / "bundles")
    texts: dict[str, str] = {}
    for message_id, _, kind, delta in deltas_of(bundle):
        assert kind == "text"
        texts[message_id] = texts.get(message_id, "") + delta
    finals = [content[0]["text"] for role, content in conversation(bundle) if role == "assistant"]
    assert len(finals) == 3 and finals[1:] == ["You said: helper", "You said: async"]
    assert list(texts.values()) == finals  # sync, helper, async: each reply streamed, in order
    assert not [d for d in replay_state(bundle.events)["diagnostics"] if d["code"] == "reconcile_mismatch"]
    assert CANARY_CARD.encode() not in all_bytes(tmp_path / "bundles")
