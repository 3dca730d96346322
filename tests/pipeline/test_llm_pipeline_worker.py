"""LLM mode through a real worker: a worker configured with a (fake) OpenAI-compatible
endpoint consolidates on the `llm` queue with rubric importance and structured
extraction, falls back to local mode on bad output, and records token usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import LlmUsage, Memory, Turn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI, Handler


def _answer(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    turn = body["messages"][1]["content"]  # the quoted turn, also on a retry
    if "how useful a chat message is" in system:
        return json.dumps({"score": 2 if "thanks" in turn.lower() else 9})
    if "extract long-term memories" in system:
        if "garbled" in turn:
            return "not json at all"
        return json.dumps(
            {"memories": [{"kind": "fact", "content": "Caroline works as a counselor."}]}
        )
    return json.dumps({"action": "add", "target": None})


@pytest.fixture(scope="module")
def llm_worker(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[dict[str, str]]:
    fake_openai.default_chat = Handler(_answer)
    # Its own broker database: the local-mode session worker never sees these tasks.
    env = dict(stack_env)
    env["REDIS_URL"] = urlsplit(stack_env["REDIS_URL"])._replace(path="/5").geturl()
    env |= {"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "k", "MEMWELL_LLM_RPM": "0"}
    process = WorkerProcess(env, name="llm")
    process.start()
    yield env
    process.stop()


def test_llm_mode_consolidation_through_a_worker(
    llm_worker: dict[str, str],
    fake_openai: FakeOpenAI,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    turn_ids = memwell.enqueue_turns(
        [
            {"user_id": ids["user"], "session_id": "s", "content": "I'm a counselor now.",
             "metadata": {"speaker": "Caroline"}},
            {"user_id": ids["user"], "session_id": "s", "content": "ok thanks"},
            {"user_id": ids["user"], "session_id": "s",
             "content": "garbled: I adopted a puppy named Biscuit yesterday.",
             "metadata": {"speaker": "Caroline"}},
        ],
        tenant=tenant,
        broker_url=llm_worker["REDIS_URL"],
    )  # fmt: skip

    def processed() -> bool:
        with db() as session:
            statuses = session.scalars(
                select(Turn.status).where(Turn.tenant == tenant, Turn.id.in_(turn_ids))
            ).all()
        return sorted(statuses) == ["processed"] * 3

    wait_for(processed, timeout=120, what="LLM-mode consolidation")
    with db() as session:
        memories = {
            m.content: m for m in session.scalars(select(Memory).where(Memory.tenant == tenant))
        }
        importance = dict(
            session.execute(
                select(Turn.content, Turn.importance).where(Turn.tenant == tenant)
            ).all()
        )
        usage = {
            u.stage: u for u in session.scalars(select(LlmUsage).where(LlmUsage.tenant == tenant))
        }
    assert memories["Caroline works as a counselor."].metadata_["extractor"] == "llm"
    # Bad JSON twice: that turn fell back to local extraction, and was not lost.
    assert "Caroline adopted a puppy named Biscuit on" in " ".join(memories)
    assert importance["I'm a counselor now."] == pytest.approx(8 / 9, abs=1e-3)
    assert importance["ok thanks"] == pytest.approx(1 / 9, abs=1e-3)
    assert usage["importance"].calls == 3 and usage["importance"].prompt_tokens > 0
    assert usage["extract"].fallbacks == 1
