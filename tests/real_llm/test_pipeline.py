"""Consolidation in LLM mode against the real model: turns become memories through the
model's extraction, and an overflowing session gets a running summary from it. The
model's calls are read from the stack's usage accounting (llm_usage, by model)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from memwell.local.waiting import wait_for
from tests.real_llm.conftest import (
    CONSOLIDATION_TIMEOUT_S,
    LlmStack,
    elapsed,
    extractor,
    new_user,
    wait_processed,
)

# A real model on a small CPU: minutes, not the default run's 300 s per test.
pytestmark = [pytest.mark.real_llm, pytest.mark.timeout(1800)]

FACTS = [
    "I moved to Porto in March and I work as a marine biologist.",
    "My sister Ines is a pianist; she plays at the Casa da Musica.",
    "I'm allergic to peanuts, so I always check labels.",
    "On weekends I restore old sailing boats with my neighbour Rui.",
]


def _calls(stack: LlmStack, *, summary: bool) -> int:
    """The model's calls so far for consolidation (summary=False) or summaries."""
    op = "LIKE" if summary else "NOT LIKE"
    rows = stack.query(
        f"SELECT coalesce(sum(calls), 0) FROM llm_usage WHERE model = %s "
        f"AND stage {op} 'summar%%' AND stage <> 'chat'",
        stack.alias,
    )
    return int(rows[0][0])


@pytest.fixture(scope="module")
def extracted(llm_stack: LlmStack) -> Iterator[tuple[str, int]]:
    """A user whose four turns were consolidated; the model calls that took."""
    user = new_user()
    before = _calls(llm_stack, summary=False)
    turns = [{"user_id": user, "session_id": "facts", "content": c} for c in FACTS]
    started = time.monotonic()
    accepted = httpx.post(f"{llm_stack.api_url}/v1/turns", json={"turns": turns}, timeout=60)
    assert accepted.status_code == 202, accepted.text
    statuses = wait_processed(llm_stack.api_url, accepted.json()["turn_ids"],
                              CONSOLIDATION_TIMEOUT_S)  # fmt: skip
    print(f"4 turns consolidated in {elapsed(started)}")
    assert set(statuses.values()) == {"processed"}, statuses
    yield user, _calls(llm_stack, summary=False) - before


def _memories(stack: LlmStack, user: str) -> list[dict[str, object]]:
    answer = httpx.get(f"{stack.api_url}/v1/memories", params={"user_id": user}, timeout=30)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, object]] = answer.json()["memories"]
    return items


def test_turns_become_memories_through_the_model(
    llm_stack: LlmStack, extracted: tuple[str, int]
) -> None:
    user, calls = extracted
    assert calls >= 1  # the model was asked
    contents = " ".join(str(m["content"]) for m in _memories(llm_stack, user))
    assert any(word in contents for word in ("Porto", "biologist", "Ines", "peanut", "boat"))


def test_the_memories_say_the_model_wrote_them(
    llm_stack: LlmStack, extracted: tuple[str, int]
) -> None:
    user, _ = extracted
    memories = _memories(llm_stack, user)
    assert memories
    by_model = [m for m in memories if extractor(dict(m["metadata"])) == "llm"]  # type: ignore[call-overload]
    assert by_model, [(m["content"], m["metadata"]) for m in memories]


def test_an_overflowing_session_is_summarized_by_the_model(llm_stack: LlmStack) -> None:
    """The stack's buffer holds 60 tokens: a few exchanges push turns out, and the
    running summary of what left is asked of the model."""
    user, session = new_user(), "long-talk"
    before = _calls(llm_stack, summary=True)
    with httpx.Client(base_url=llm_stack.api_url, timeout=300) as client:
        for message in FACTS[:3]:
            reply = client.post(
                "/v1/chat", json={"user_id": user, "session_id": session, "message": message}
            )
            assert reply.status_code == 200, reply.text

        def summarized() -> str | None:
            detail = client.get(f"/v1/sessions/{session}", params={"user_id": user}).json()
            return detail.get("summary") if _calls(llm_stack, summary=True) > before else None

        summary = wait_for(summarized, timeout=CONSOLIDATION_TIMEOUT_S, interval=1.0,
                           what="a summary by the model")  # fmt: skip
    assert summary.strip()
