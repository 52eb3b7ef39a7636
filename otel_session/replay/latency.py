"""Voice latency facts: per-turn latency, the slow flag, and p50/p95 per run or session.

Contract::

    threshold = slow_turn_threshold_ms(explicit=None)    # explicit, else $OTEL_SESSION_SLOW_TURN_MS, else 1500
    latency = turn_latency(turn_finished_payload)         # {"user_to_agent_ms", ...} or None
    slow = is_slow(latency, threshold)                    # user_to_agent_ms over the threshold
    summary = latency_summary(turns, threshold)           # {"user_to_agent_ms": {count,p50,p95}|None,
                                                          #  "slow_threshold_ms", "slow_turns": [...]}

``turn_finished.payload.latency`` is written by the voice mappings (``normalize.voice``); only its
known keys, as non-negative numbers, are read. Percentiles are nearest-rank over the turns that
have a ``user_to_agent_ms``; ``slow_turns`` lists those turns over the threshold, in turn order,
each with its ``turn_index`` (and ``run_id`` when the turns carry one: session-wide facts).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_SLOW_TURN_MS", "ENV_SLOW_TURN_MS", "is_slow", "latency_summary", "slow_turn_threshold_ms",
           "turn_latency"]

ENV_SLOW_TURN_MS = "OTEL_SESSION_SLOW_TURN_MS"
DEFAULT_SLOW_TURN_MS = 1500.0
_KEYS = ("user_to_agent_ms", "endpointing_ms", "stt_ms", "llm_ttft_ms", "tts_ttfb_ms")


def slow_turn_threshold_ms(explicit: float | None = None) -> float:
    """The slow-turn threshold: ``explicit``, else ``$OTEL_SESSION_SLOW_TURN_MS``, else 1.5 s."""
    if explicit is not None:
        return float(explicit)
    raw = os.environ.get(ENV_SLOW_TURN_MS, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{ENV_SLOW_TURN_MS}={raw!r} is not a number of milliseconds") from None
        if value >= 0 and math.isfinite(value):
            return value
        raise ValueError(f"{ENV_SLOW_TURN_MS}={raw!r} is not a non-negative number of milliseconds")
    return DEFAULT_SLOW_TURN_MS


def turn_latency(finished_payload: Mapping[str, Any]) -> dict[str, float] | None:
    latency = finished_payload.get("latency")
    if not isinstance(latency, Mapping):
        return None
    known = {key: float(latency[key]) for key in _KEYS if _number(latency.get(key))}
    return known or None


def is_slow(latency: Mapping[str, float] | None, threshold_ms: float) -> bool:
    return latency is not None and latency.get("user_to_agent_ms", -1.0) > threshold_ms


def latency_summary(turns: Iterable[Mapping[str, Any]], threshold_ms: float) -> dict[str, Any]:
    values: list[float] = []
    slow: list[dict[str, Any]] = []
    for turn in turns:
        latency = turn.get("latency")
        value = latency.get("user_to_agent_ms") if isinstance(latency, Mapping) else None
        if value is None:
            continue
        values.append(value)
        if value > threshold_ms:
            entry = {"turn_index": turn["turn_index"], "user_to_agent_ms": value}
            if "run_id" in turn:
                entry = {"run_id": turn["run_id"], **entry}
            slow.append(entry)
    values.sort()
    stats = {"count": len(values), "p50": _rank(values, 0.50), "p95": _rank(values, 0.95)} if values else None
    return {"user_to_agent_ms": stats, "slow_threshold_ms": threshold_ms, "slow_turns": slow}


def _rank(ordered: list[float], quantile: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def _number(value: Any) -> bool:
    return type(value) in (int, float) and value >= 0 and math.isfinite(value)
