"""The demo driver: plays scripted conversations against the booking agent over HTTP, all at once.

Run it (``otel-session demo driver --agent http://127.0.0.1:8780``) after the agent is up. It
prints one line per conversation, or with ``--json`` a JSON document the demo stack reads::

    {"conversations": [{"name", "session_id", "kind", "eval_id", "run_ids", "final_state",
                        "expect"}, …]}

The scripts cover what the demo shows: a smooth booking over two runs of one session, a date
the agent cannot parse (it asks twice), a failing tool, an eval run, and a caller who gives an
e-mail address and a phone number (they must come out redacted).
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import orjson

__all__ = ["CONVERSATIONS", "PII_CANARIES", "Conversation", "ConversationResult", "main", "play", "play_all"]

PII_CANARIES = ("jane.canary@example.com", "+1 415 555 0199")
"""Personal data the driver sends; none of it may appear in a bundle."""


@dataclass(frozen=True)
class Conversation:
    """A scripted caller: each request (a list of utterances) is one run of the session."""

    name: str
    requests: tuple[tuple[str, ...], ...]
    eval_id: str | None = None
    expect: tuple[str, ...] = ()
    """What the demo's checks look for in this conversation's bundles."""


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "smooth-booking",
        (("Hi, I'd like to book a table", "Friday please"), ("4 people", "yes, book it")),
        expect=("final_state:done", "runs:2"),
    ),
    Conversation(
        "unparseable-date",
        (("Hello, a table please", "sometime when the moon is blue", "err, the day after the thing",
          "Saturday", "two", "yes"),),
        expect=("final_state:done", "repeated_ask:date"),
    ),
    Conversation(
        "failing-tool",
        (("Hi", "tomorrow", "10 people"), ("make it 6 people", "yes")),
        expect=("final_state:done", "tool_error:check_availability"),
    ),
    Conversation(
        "eval-smooth-booking",
        (("Hi, I'd like to book a table", "Friday please", "4 people", "yes, book it"),),
        eval_id="booking-regression",
        expect=("final_state:done", "eval"),
    ),
    Conversation(
        "personal-data",
        ((f"Hi, this is Jane, {PII_CANARIES[0]}, call me on {PII_CANARIES[1]}", "December 24", "3 of us", "yes"),),
        expect=("final_state:done", "no_pii"),
    ),
)


@dataclass
class ConversationResult:
    name: str
    session_id: str
    kind: str
    eval_id: str | None
    run_ids: list[str] = field(default_factory=list)
    final_state: str | None = None
    expect: list[str] = field(default_factory=list)
    error: str | None = None


def _post(url: str, session_id: str, utterances: tuple[str, ...], timeout: float) -> dict:
    request = urllib.request.Request(
        url,
        data=orjson.dumps({"utterances": list(utterances)}),
        headers={"Content-Type": "application/json", "X-Session-Id": session_id},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = orjson.loads(response.read())
        body["run_id"] = response.headers.get("X-Run-Id") or body.get("run_id")
        return body


def play(agent_url: str, conversation: Conversation, *, tag: str, timeout: float = 30.0) -> ConversationResult:
    """Play one conversation; a failed request ends it with ``error`` set (never raises)."""
    session_id = f"{conversation.name}-{tag}"
    kind = "eval" if conversation.eval_id else "live"
    result = ConversationResult(conversation.name, session_id, kind, conversation.eval_id, expect=list(conversation.expect))
    path = f"/evals/{conversation.eval_id}/calls" if conversation.eval_id else "/calls"
    for utterances in conversation.requests:
        try:
            body = _post(agent_url.rstrip("/") + path, session_id, utterances, timeout)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            detail = exc.read().decode(errors="replace") if isinstance(exc, urllib.error.HTTPError) else ""
            result.error = f"{type(exc).__name__}: {exc} {detail}".strip()
            return result
        if body.get("run_id"):
            result.run_ids.append(body["run_id"])
        result.final_state = body.get("state")
    return result


def play_all(
    agent_url: str, conversations: tuple[Conversation, ...] = CONVERSATIONS, *, tag: str | None = None
) -> list[ConversationResult]:
    """Play every conversation concurrently; results in script order."""
    tag = tag or uuid.uuid4().hex[:6]
    with ThreadPoolExecutor(max_workers=len(conversations), thread_name_prefix="driver") as pool:
        return list(pool.map(lambda conversation: play(agent_url, conversation, tag=tag), conversations))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="otel-session demo driver", description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="http://127.0.0.1:8780", help="the booking agent's base URL")
    parser.add_argument("--tag", default=None, help="suffix of the session ids (default: random)")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of lines")
    args = parser.parse_args(argv)
    results = play_all(args.agent, tag=args.tag)
    if args.json:
        sys.stdout.write(orjson.dumps({"conversations": [asdict(r) for r in results]}).decode() + "\n")
    else:
        for r in results:
            outcome = f"error: {r.error}" if r.error else f"{len(r.run_ids)} run(s), ended in {r.final_state}"
            print(f"{r.name:<20} {r.session_id:<32} {r.kind:<4} {outcome}")
    sys.exit(1 if any(r.error for r in results) else 0)


if __name__ == "__main__":
    main()
