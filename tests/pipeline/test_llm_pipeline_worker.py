"""LLM mode through a real worker: a worker configured with a (fake) OpenAI-compatible
endpoint consolidates on the `llm` queue with one analysis call per window of a
session's messages, asks for the answer's JSON schema, says who wrote each memory,
counts every fallback by step and reason (in /metrics on the worker's port and in
llm_usage), loses no turn when the model is down, and keeps a slow model inside the
task's time budget: slow progress, no dead letter."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import DeadLetter, LlmUsage, Memory, Turn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_analysis import is_analysis, pipeline_answer
from tests.support.fake_openai import FakeOpenAI, Handler, Status
from tests.support.live_api import free_port

START = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)
USER_LINES = [
    "Hi!",
    "My name is Caroline and I work as a counselor.",
    "I moved to Boston from Sweden four years ago.",
    "I adopted a puppy named Biscuit last week.",
    "I go to a pottery class every Tuesday.",
    "My sister Ana is visiting next month.",
    "I'm training for a half marathon in October.",
    "garbled: I keep a journal every evening.",
    "Thanks, that helps!",
    "I prefer tea over coffee in the mornings.",
    "My favourite book is Becoming by Michelle Obama.",
    "I volunteer at the LGBTQ support center on weekends.",
]


def _conversation(
    user: str, session: str, offset: int = 0, *, garbled: bool = True
) -> list[dict[str, Any]]:
    """A realistic exchange: each user message and the assistant's reply. A "garbled"
    message makes the fake model's answer for its window unparseable."""
    turns: list[dict[str, Any]] = []
    for i, line in enumerate(USER_LINES):
        line = line if garbled else line.replace("garbled: ", "")
        at = START + timedelta(days=offset, minutes=2 * i)
        turns.append(
            {
                "user_id": user,
                "session_id": session,
                "content": line,
                "metadata": {"speaker": "Caroline"},
                "created_at": at.isoformat(),
            }
        )
        turns.append({"user_id": user, "session_id": session, "role": "assistant",
                      "content": "That sounds lovely. How can I assist you today?",
                      "created_at": (at + timedelta(minutes=1)).isoformat()})  # fmt: skip
    return turns


def _worker_env(stack_env: dict[str, str], fake: FakeOpenAI, db_index: int) -> dict[str, str]:
    # Its own broker database: the local-mode session worker never sees these tasks.
    env = dict(stack_env)
    env["REDIS_URL"] = urlsplit(stack_env["REDIS_URL"])._replace(path=f"/{db_index}").geturl()
    return env | {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "k",
        "MEMWELL_LLM_RPM": "0",
        # LLM mode itself: with an endpoint, auto would be hybrid (local memories too)
        "MEMWELL_PIPELINE_MODE": "llm",
    }


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def llm_worker(
    stack_env: dict[str, str],
    fake_openai: FakeOpenAI,
    metrics_port: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    fake_openai.default_chat = Handler(pipeline_answer)
    env = _worker_env(stack_env, fake_openai, 5) | {
        "MEMWELL_WORKER_METRICS_PORT": str(metrics_port),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path_factory.mktemp("metrics-llm")),
    }
    process = WorkerProcess(env, name="llm")
    process.start()
    yield env
    process.stop()


def _enqueue(env: dict[str, str], tenant: str, turns: list[dict[str, Any]]) -> list[str]:
    return memwell.enqueue_turns(turns, tenant=tenant, broker_url=env["REDIS_URL"])


def _wait_processed(db: sessionmaker[Session], tenant: str, n: int, timeout: float) -> None:
    def processed() -> bool:
        with db() as session:
            done = session.scalar(
                select(func.count()).where(Turn.tenant == tenant, Turn.status == "processed")
            )
            letters = session.scalars(select(DeadLetter.error).where(DeadLetter.tenant == tenant))
            assert not letters.all(), "a consolidate task became a dead letter"
        return done == n

    wait_for(processed, timeout=timeout, interval=0.2, what=f"{n} turns consolidated")


def _memories(db: sessionmaker[Session], tenant: str) -> list[Memory]:
    with db() as session:
        return list(session.scalars(select(Memory).where(Memory.tenant == tenant)))


def _usage(db: sessionmaker[Session], tenant: str) -> dict[str, LlmUsage]:
    with db() as session:
        return {
            u.stage: u for u in session.scalars(select(LlmUsage).where(LlmUsage.tenant == tenant))
        }


def test_a_conversation_costs_few_calls_per_stored_turn(
    llm_worker: dict[str, str],
    fake_openai: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    fake_openai.reset()
    fake_openai.default_chat = Handler(pipeline_answer)
    turns = _conversation(ids["user"], "s1") + _conversation(
        ids["user"], "s2", offset=1, garbled=False
    )
    _enqueue(llm_worker, tenant, turns)
    _wait_processed(db, tenant, len(turns), timeout=120)
    calls = len(fake_openai.chat_requests)
    # 48 stored turns (24 user messages, 24 replies); windows of up to 12 user messages
    # per session: 2 windows, the garbled one asked twice.
    assert calls / len(turns) <= 0.5, f"{calls} calls for {len(turns)} turns"
    assert all(r.json["response_format"]["type"] == "json_schema" for r in
               fake_openai.chat_requests)  # fmt: skip
    memories = {m.content: m for m in _memories(db, tenant)}
    model = memories[
        "Caroline said: Caroline adopted a puppy named Biscuit in the week before 9 May 2023."
    ]
    assert model.metadata_["extractor"] == "llm"
    # The garbled window fell back to local mode: written locally, and it says why.
    journal = next(m for c, m in memories.items() if "journal every evening" in c)
    assert journal.metadata_["extractor"] == "local"
    assert journal.metadata_["fallback"] == "invalid_output"
    # No greeting and no assistant line became a memory.
    assert not any(c.startswith(("Hi", "Thanks")) or "assist you" in c for c in memories)
    usage = _usage(db, tenant)["analyze"]
    assert usage.calls == calls and usage.fallback_reasons == {"invalid_output": 12}


def test_memory_provenance_is_visible_through_the_api(
    llm_worker: dict[str, str],
    fake_openai: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    from fastapi.testclient import TestClient

    from api.main import create_app
    from memwell.core.settings import Settings

    tenant = "default"
    fake_openai.reset()
    fake_openai.default_chat = Handler(pipeline_answer)
    user = ids["user"]
    _enqueue(llm_worker, tenant, [{"user_id": user, "session_id": "s",
                                   "content": "I live in Lisbon now."}])  # fmt: skip

    settings = Settings(
        database_url=llm_worker["DATABASE_URL"],
        redis_url=llm_worker["REDIS_URL"],
        embedding_provider="openai",
        openai_base_url=fake_openai.base_url,
        openai_api_key="k",
        auth_disabled=True,
    )
    with TestClient(create_app(settings)) as api:

        def listed() -> list[dict[str, Any]] | None:
            body = api.get("/v1/memories", params={"user_id": user}).json()
            return body["memories"] or None

        [memory] = wait_for(listed, timeout=60, interval=0.2, what="the memory listed")
        sdk = memwell.MemoryClient(http_client=api)
        page = sdk.list_memories(user_id=user, metadata={"extractor": "llm"})
    assert memory["content"] == "The user said: the user lives in Lisbon now."
    assert memory["metadata"]["extractor"] == "llm"
    assert [m.metadata["extractor"] for m in page.memories] == ["llm"]


def test_endpoint_down_loses_no_turn_and_counts_each_fallback(
    llm_worker: dict[str, str],
    fake_openai: FakeOpenAI,
    db: sessionmaker[Session],
    metrics_port: int,
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    fake_openai.reset()
    fake_openai.default_chat = Status(503)
    turns = _conversation(ids["user"], "s1")
    try:
        _enqueue(llm_worker, tenant, turns)
        _wait_processed(db, tenant, len(turns), timeout=120)
    finally:
        fake_openai.default_chat = Handler(pipeline_answer)
    memories = _memories(db, tenant)
    assert memories and all(
        m.metadata_["extractor"] == "local" and m.metadata_["fallback"] == "endpoint_error"
        for m in memories
    )
    assert len(memories) >= 6  # the user's facts, written locally
    assert _usage(db, tenant)["analyze"].fallback_reasons == {"endpoint_error": 12}

    def counted() -> float | None:
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "memwell_llm_fallbacks_total" and sample.labels == {
                    "stage": "analyze",
                    "reason": "endpoint_error",
                }:
                    return sample.value if sample.value >= 12 else None
        return None

    wait_for(counted, timeout=30, interval=0.3, what="fallbacks in the worker's /metrics")


@pytest.fixture(scope="module")
def slow_model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.default_chat = Handler(pipeline_answer)
        yield server


@pytest.fixture(scope="module")
def slow_worker(stack_env: dict[str, str], slow_model: FakeOpenAI) -> Iterator[dict[str, str]]:
    env = _worker_env(stack_env, slow_model, 7) | {
        "MEMWELL_CONSOLIDATE_SOFT_LIMIT_S": "10",  # model work stops after 5 s
        "MEMWELL_LLM_WINDOW_TURNS": "2",
    }
    process = WorkerProcess(env, name="slow-llm", concurrency=1)
    process.start()
    yield env
    process.stop()


def test_a_slow_model_makes_progress_within_the_time_limit(
    slow_worker: dict[str, str],
    slow_model: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    slow_model.chat_delay = 2.0
    turns = _conversation(ids["user"], "s1")
    # 12 user messages in windows of 2: 7 calls (the garbled window asks twice) of 2 s,
    # 14 s of model work: past the task's soft limit of 10 s, and its model budget of
    # 5 s. The rest of the work goes to new tasks.
    _enqueue(slow_worker, tenant, turns)
    _wait_processed(db, tenant, len(turns), timeout=180)  # and no dead letter on the way
    analysed = [r for r in slow_model.chat_requests if is_analysis(r.json)]
    assert len(analysed) >= 6  # every window was analysed by the model...
    memories = _memories(db, tenant)
    # ... within its budget: no window had to fall back (the garbled one aside).
    assert sum(m.metadata_.get("fallback") == "timeout" for m in memories) == 0
