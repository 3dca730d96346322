"""A model that is merely slow keeps its work: a window its call cannot finish in time
is sent again later, in smaller windows, and the model writes those turns' memories;
local mode takes over only from a model that cannot answer even one message in time.
Through a real worker on the llm queue, against a fake endpoint whose answers take
longer the more messages a window holds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import DeadLetter, LlmUsage, Memory, Turn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_analysis import analysis_answer, is_analysis, window_messages
from tests.support.fake_openai import FakeOpenAI, Handler

#: The fake model's time per message of a window, and the call's time: a window of
#: twelve messages (6 s) runs out of it, one of six (3 s) fits.
SECONDS_PER_MESSAGE = 0.5
CALL_TIMEOUT_S = 5.0
LINES = [
    "My name is Ines and I teach chemistry at a high school.",
    "I moved to Porto from Lyon two years ago.",
    "I adopted a cat named Pixel last month.",
    "I play the cello in a community orchestra.",
    "My brother Tomas is getting married in June.",
    "I'm saving up for a trip to Japan next spring.",
    "I run five kilometres every Saturday morning.",
    "I prefer green tea to coffee.",
    "My favourite novel is The Remains of the Day.",
    "I volunteer at the food bank on Sundays.",
    "I'm learning to bake sourdough bread.",
    "I grew up on a farm near Clermont-Ferrand.",
]


#: A message that stalls the fake model past any call's time.
STALL = "stall"


def _slow(body: dict[str, Any]) -> str:
    """The answer, after the time a slow model would take for the window."""
    if is_analysis(body):
        messages = window_messages(body)
        stalled = any(STALL in text for _, _, text in messages)
        time.sleep(3 * CALL_TIMEOUT_S if stalled else SECONDS_PER_MESSAGE * len(messages))
        return analysis_answer(body)
    return '{"summary": "A summary."}'


@pytest.fixture(scope="module")
def slow_endpoint() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.default_chat = Handler(_slow)
        yield server


@pytest.fixture(scope="module")
def slow_model_worker(
    stack_env: dict[str, str], slow_endpoint: FakeOpenAI
) -> Iterator[dict[str, str]]:
    # Its own broker database: no other worker of the run takes these tasks.
    redis_url = urlsplit(stack_env["REDIS_URL"])._replace(path="/9").geturl()
    env = stack_env | {
        "REDIS_URL": redis_url,
        "OPENAI_BASE_URL": slow_endpoint.base_url,
        "OPENAI_API_KEY": "k",
        "MEMWELL_LLM_RPM": "0",
        "MEMWELL_PIPELINE_MODE": "llm",
        "MEMWELL_LLM_TIMEOUT_S": str(CALL_TIMEOUT_S),
        "MEMWELL_LLM_WINDOW_TURNS": "12",
    }
    process = WorkerProcess(env, name="slow-model", concurrency=1)
    process.start()
    yield env
    process.stop()


def _enqueue(env: dict[str, str], tenant: str, user: str, lines: list[str]) -> None:
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    turns = [
        {"user_id": user, "session_id": "s1", "content": line,
         "metadata": {"speaker": "Ines"}, "created_at": (start + timedelta(minutes=i)).isoformat()}
        for i, line in enumerate(lines)
    ]  # fmt: skip
    memwell.enqueue_turns(turns, tenant=tenant, broker_url=env["REDIS_URL"])


def _settle(
    db: sessionmaker[Session], tenant: str, turns: int
) -> tuple[list[Memory], LlmUsage | None]:
    """Wait until the `turns` turns of `tenant` are processed (no dead letter on the
    way); its memories and its analysis usage."""

    def settled() -> bool:
        with db() as session:
            processed = session.scalar(
                select(func.count()).where(Turn.tenant == tenant, Turn.status == "processed")
            )
            assert not session.scalar(select(func.count()).where(DeadLetter.tenant == tenant))
        return processed == turns

    wait_for(settled, timeout=120, interval=0.2, what="every turn consolidated")
    with db() as session:
        memories = list(session.scalars(select(Memory).where(Memory.tenant == tenant)))
        usage = session.scalar(
            select(LlmUsage).where(LlmUsage.tenant == tenant, LlmUsage.stage == "analyze")
        )
    return memories, usage


def test_a_slow_models_windows_are_finished_by_the_model(
    slow_model_worker: dict[str, str],
    slow_endpoint: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    slow_endpoint.reset()
    slow_endpoint.default_chat = Handler(_slow)
    _enqueue(slow_model_worker, ids["tenant"], ids["user"], LINES)
    memories, usage = _settle(db, ids["tenant"], len(LINES))
    # Every memory was written by the model: none by a local fallback.
    assert len(memories) == len(LINES)
    assert {m.metadata_["extractor"] for m in memories} == {"llm"}
    assert usage is not None and usage.fallbacks == 0 and usage.fallback_reasons == {}
    # The first window (12 messages, 6 s) ran out of its 5 s and was sent again in halves.
    assert usage.deferrals == len(LINES)
    sizes = [len(window_messages(r.json)) for r in slow_endpoint.chat_requests]
    assert sizes == [12, 6, 6]


def test_a_model_that_cannot_answer_one_message_in_time_falls_back(
    slow_model_worker: dict[str, str],
    slow_endpoint: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    slow_endpoint.reset()
    slow_endpoint.default_chat = Handler(_slow)
    lines = [
        f"I {STALL} my bicycle in the garage of my sister Lea in Nantes.",
        f"My colleagues {STALL} the quarterly budget review until the audit ends in May.",
    ]
    _enqueue(slow_model_worker, ids["tenant"], ids["user"], lines)
    memories, usage = _settle(db, ids["tenant"], len(lines))
    # Halved down to one message, which still ran out of time: the model is down, and
    # local mode wrote both, saying why.
    assert len(memories) == 2
    assert {(m.metadata_["extractor"], m.metadata_["fallback"]) for m in memories} == {
        ("local", "timeout")
    }
    assert usage is not None and usage.fallback_reasons == {"timeout": 2}
    assert usage.deferrals == 2
