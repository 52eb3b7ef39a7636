"""A small deterministic OpenAI-compatible LLM server for demos and tests (loopback only).

Usage::

    with MockLLMServer(port=0) as server:          # or: python -m otel_session.demo.mock_llm --port 8099
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")

``POST /v1/chat/completions`` answers streaming (Server-Sent Events chunks, ``data: [DONE]``) and
non-streaming requests, ``POST /v1/responses`` the same for the Responses API
(``otel_session.demo.mock_responses``), ``POST /v1/messages`` for the Anthropic Messages API
(``otel_session.demo.mock_messages``; ``anthropic.Anthropic(base_url=server.root_url)``), and
``GET /v1/models`` lists the one model. Replies come from a
*responder* (``request dict → Reply``); the default, :func:`canned_reply`, is deterministic:

* tools offered and no tool result since the last user message → one tool call to the first
  tool, arguments ``{"query": <last user text>}``;
* a tool result present → ``"<tool name> says: <result>"``;
* otherwise → ``"You said: <last user text>"``.

Ids and timestamps derive from the request, so the same request always gets the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from otel_session.demo import mock_messages, mock_responses
from otel_session.demo.mock_reply import Reply, Responder, ToolCall

__all__ = ["MODEL", "MockLLMServer", "Reply", "ToolCall", "canned_reply", "main"]

MODEL = "mock-gpt"
_CREATED = 1_764_000_000  # a fixed epoch second: replies are byte-for-byte reproducible


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def canned_reply(request: dict[str, Any]) -> Reply:
    """The default deterministic responder (see the module docstring)."""
    messages = [message for message in request.get("messages") or () if isinstance(message, dict)]
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    user_text = _text_of(last_user)
    since_user = messages[messages.index(last_user) + 1 :] if last_user else messages
    tool_results = [m for m in since_user if m.get("role") == "tool"]
    prompt_tokens = sum(len(_text_of(m).split()) for m in messages)
    tools = [tool for tool in request.get("tools") or () if isinstance(tool, dict)]
    if tools and not tool_results:
        name = str((tools[0].get("function") or {}).get("name", "tool"))
        call = ToolCall(f"call_{_digest(messages)[:24]}", name, orjson.dumps({"query": user_text}).decode())
        return Reply(None, (call,), "tool_calls", prompt_tokens, 1 + len(user_text.split()))
    if tool_results:
        calls = {
            call.get("id"): (call.get("function") or {}).get("name")
            for message in since_user
            for call in message.get("tool_calls") or ()
            if isinstance(call, dict)
        }
        result = tool_results[-1]
        text = f"{calls.get(result.get('tool_call_id')) or 'the tool'} says: {_text_of(result)}"
    else:
        text = f"You said: {user_text}"
    return Reply(text, (), "stop", prompt_tokens, len(text.split()))


def _completion(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{_digest(request)[:24]}",
        "object": "chat.completion",
        "created": _CREATED,
        "model": request.get("model") or MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
        "usage": _usage(reply),
    }


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _chunks(request: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{_digest(request)[:24]}",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": request.get("model") or MODEL,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.content:
        words = reply.content.split(" ")
        for position, word in enumerate(words):
            yield chunk({"content": word if position == len(words) - 1 else word + " "})
    for index, call in enumerate(reply.tool_calls):
        yield chunk(
            {"tool_calls": [{"index": index, "id": call.id, "type": "function",
                             "function": {"name": call.name, "arguments": ""}}]}
        )
        middle = len(call.arguments) // 2
        for piece in (call.arguments[:middle], call.arguments[middle:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(reply)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-session-mock-llm"
    responder: Responder

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            self._json(HTTPStatus.OK, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "otel-session"}]})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/v1/responses":
            self._responses(body)
            return
        if self.path.rstrip("/") == "/v1/messages":
            self._messages(body)
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(HTTPStatus.NOT_FOUND, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            request = orjson.loads(body)
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("a JSON object with a 'messages' list is required")
        except ValueError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        reply = self.responder(request)
        if not request.get("stream"):
            self._json(HTTPStatus.OK, _completion(request, reply))
            return
        self._event_stream(b"data: " + orjson.dumps(item) + b"\n\n" for item in _chunks(request, reply))

    def _responses(self, body: bytes) -> None:
        try:
            request = orjson.loads(body)
            if not isinstance(request, dict) or not isinstance(request.get("input"), (str, list)):
                raise ValueError("a JSON object with an 'input' string or list is required")
        except ValueError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        reply = self.responder(mock_responses.chat_request(request))
        if not request.get("stream"):
            self._json(HTTPStatus.OK, mock_responses.response(request, reply))
            return
        self._event_stream(
            b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
            for event in mock_responses.stream_events(request, reply)
        )

    def _messages(self, body: bytes) -> None:
        try:
            request = orjson.loads(body)
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("a JSON object with a 'messages' list is required")
        except ValueError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}})
            return
        reply = self.responder(mock_messages.chat_request(request))
        if not request.get("stream"):
            self._json(HTTPStatus.OK, mock_messages.message(request, reply))
            return
        self._event_stream(
            (b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
             for event in mock_messages.stream_events(request, reply)), done=False)

    def _event_stream(self, events: Iterator[bytes], *, done: bool = True) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._chunk(event)
        if done:  # OpenAI's end; Anthropic's is the message_stop event
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: HTTPStatus, value: dict[str, Any]) -> None:
        body = orjson.dumps(value)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class MockLLMServer:
    """The mock LLM on ``127.0.0.1:port`` (``port=0`` picks a free one), served from a thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, responder: Responder = canned_reply) -> None:
        handler = type("MockLLMHandler", (_Handler,), {"responder": staticmethod(responder)})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="mock-llm", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        """What to pass as ``anthropic.Anthropic(base_url=...)``."""
        return f"http://{self._server.server_address[0]}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as ``openai.OpenAI(base_url=...)``."""
        return f"{self.root_url}/v1"

    def start(self) -> MockLLMServer:
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the command-line entry point)."""
        try:
            self._server.serve_forever()
        finally:
            self._server.server_close()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MockLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(
    argv: list[str] | None = None,
    *,
    responder: Responder = canned_reply,
    name: str = "mock LLM",
    default_port: int = 8099,
    prog: str = "python -m otel_session.demo.mock_llm",
) -> None:
    """Serve on ``--host``/``--port`` until Ctrl-C (``responder``: see :class:`MockLLMServer`)."""
    parser = argparse.ArgumentParser(prog=prog, description=f"Serve the {name} (OpenAI-compatible) on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    args = parser.parse_args(argv)
    server = MockLLMServer(args.host, args.port, responder=responder)
    print(f"{name} at {server.base_url} (model {MODEL})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
