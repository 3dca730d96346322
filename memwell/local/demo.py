"""`memwell demo`: prove cross-session recall against a running stack.

Session 1 states facts; the demo waits until the workers have consolidated them;
session 2, a new session with an empty buffer, asks about them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from memwell.core.errors import ServiceUnavailable

FACTS = [
    "Hi! My name is Ada Okafor.",
    "I prefer Rust for systems programming, and I use it at work every day.",
    "I'm building a project called Lighthouse, a tide forecasting app for sailors.",
]
#: one request's limit, above the API's own for a model call with its retries
REQUEST_TIMEOUT_S = 300.0
QUESTIONS = [
    ("What is my name?", "Ada Okafor"),
    ("Which programming language do I like?", "Rust"),
    ("What project am I working on?", "Lighthouse"),
]


@dataclass(frozen=True)
class RecallCheck:
    question: str
    expected: str
    found: bool


def wait_ready(client: httpx.Client, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError as exc:
            last_error = str(exc)
        time.sleep(0.5)
    raise ServiceUnavailable(
        f"API at {client.base_url} not ready after {timeout_s:.0f} s {last_error}"
    )


def wait_consolidated(
    client: httpx.Client, turn_ids: list[str], *, timeout_s: float, say: Callable[[str], None]
) -> float:
    """Poll turn statuses until all are processed; returns seconds waited."""
    started = time.monotonic()
    last = -1
    while True:
        done = sum(
            client.get(f"/v1/turns/{tid}").json()["status"] == "processed" for tid in turn_ids
        )
        if done != last:
            say(f"  consolidated {done}/{len(turn_ids)} turns")
            last = done
        if done == len(turn_ids):
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise ServiceUnavailable(
                f"only {done}/{len(turn_ids)} turns consolidated in {timeout_s:.0f} s"
            )
        time.sleep(0.25)


def _chat(client: httpx.Client, user_id: str, session_id: str, message: str) -> dict[str, Any]:
    response = client.post(
        "/v1/chat", json={"user_id": user_id, "session_id": session_id, "message": message}
    )
    body: dict[str, Any] = response.raise_for_status().json()
    return body


def _state_facts(client: httpx.Client, user_id: str, say: Callable[[str], None]) -> list[str]:
    say(f"\n== Session 1 (user {user_id}): stating facts")
    turn_ids: list[str] = []
    for message in FACTS:
        body = _chat(client, user_id, "session-1", message)
        turn_ids += body["turn_ids"]
        say(f"  > {message}")
        took = body["timings_ms"]["total"]
        say(f"    enqueued turns {', '.join(body['turn_ids'])}  ({took:.1f} ms)")
    return turn_ids


def _ask(client: httpx.Client, user_id: str, say: Callable[[str], None]) -> list[RecallCheck]:
    say("\n== Session 2: a new session, empty buffer, asking about session 1")
    checks: list[RecallCheck] = []
    for question, expected in QUESTIONS:
        memories = _chat(client, user_id, "session-2", question)["memories"]
        say(f"  > {question}")
        for m in memories[:3]:
            parts = f"score={m['score']:.3f} (relevance {m['relevance']:.3f})"
            say(f"    recalled  {parts}  {m['content']}")
        top = memories[0]["content"] if memories else ""
        checks.append(RecallCheck(question, expected, expected.lower() in top.lower()))
    return checks


def run_demo(
    api_url: str,
    *,
    say: Callable[[str], None] = print,
    timeout_s: float = 180,
    api_key: str | None = None,
) -> list[RecallCheck]:
    """Run both sessions and report, per question, whether the top memory held the fact."""
    user_id = f"demo-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # A chat waits on the model: a local one on a small CPU takes tens of seconds.
    with httpx.Client(base_url=api_url, timeout=REQUEST_TIMEOUT_S, headers=headers) as client:
        say(f"Waiting for the API at {api_url} ...")
        wait_ready(client, timeout_s=timeout_s)
        turn_ids = _state_facts(client, user_id, say)
        say("\n== Consolidation by the workers")
        waited = wait_consolidated(client, turn_ids, timeout_s=timeout_s, say=say)
        say(f"  done in {waited:.1f} s")
        checks = _ask(client, user_id, say)
    say("\n== Result")
    for c in checks:
        verdict = "ok" if c.found else "MISSING"
        say(f"  [{verdict}] {c.question} -> top memory mentions '{c.expected}'")
    return checks
