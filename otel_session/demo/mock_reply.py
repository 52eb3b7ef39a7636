"""What the mock LLM server answers with, whichever API asked: a ``Reply`` (text or tool calls,
finish reason, token counts) made by a *responder* (``request dict -> Reply``). The Chat
Completions, Responses and Messages encoders (``mock_llm``, ``mock_responses``,
``mock_messages``) each turn one into their API's bytes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reply", "Responder", "ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON document, as OpenAI sends it


@dataclass(frozen=True)
class Reply:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = field(default=0)


Responder = Callable[[dict[str, Any]], Reply]
