"""The OpenAI door validates first: what it would store is checked before retrieval or
the model call, refusals come in OpenAI's shape with 400 or 413, and what it cannot
store is said in the stream and kept as a dead letter, not dropped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.exceptions
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from api.state import _dead_letter_writer
from memwell.buffer.session_buffer import SessionBuffer
from memwell.chat.completions import Caller, CompletionsDeps, _relay
from memwell.core.redis_clients import async_client
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import DeadLetter, Turn
from memwell.intake.dead_letters import replay_dead_letters
from memwell.intake.dispatch import send_by_name
from memwell.intake.turns import MAX_CONTENT_CHARS, IngestPayload
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI, Reply


def _post(door: str, key: str, body: dict[str, Any] | bytes, **headers: str) -> httpx.Response:
    sent = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **headers}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{door}/v1/chat/completions", content=content, headers=sent, timeout=30)


def _turn_count(db: sessionmaker[Session], tenant: str) -> int:
    with db() as s:
        return int(s.scalar(select(func.count()).select_from(Turn).where(Turn.tenant == tenant)))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("x" * (MAX_CONTENT_CHARS + 1), "at most 32000 characters"),
        ("a NUL \u0000 here", "NUL"),
        ("a bell \u0007 here", "control characters"),
        ("an escape \u001b[31m here", "control characters"),
        ("a price \u202e001$ here", "bidirectional control"),
    ],
)
def test_a_message_it_cannot_store_is_refused_before_the_model_runs(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], content: str, why: str,
) -> None:  # fmt: skip
    fake_openai.reset()
    body = {"model": "m", "user": ids["user"], "messages": [{"role": "user", "content": content}]}
    for stream in (False, True):
        response = _post(door, tenant_key, body | {"stream": stream})
        assert response.status_code == 400, response.text
        assert why in response.json()["error"]["message"]
    assert fake_openai.requests_to("/v1/chat/completions") == []
    assert _turn_count(db, ids["tenant"]) == 0


def test_a_lone_surrogate_and_a_loose_boolean_are_refused(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str]
) -> None:
    fake_openai.reset()
    # JSON can carry a lone surrogate as an escape; no Python client would encode one.
    text = json.dumps({"model": "m", "user": ids["user"],
                       "messages": [{"role": "user", "content": "hi SURROGATE"}]})  # fmt: skip
    surrogate = text.replace("SURROGATE", "\\ud800").encode()
    refused = _post(door, tenant_key, surrogate)
    assert refused.status_code == 400, refused.text
    assert "surrogate" in refused.json()["error"]["message"]
    loose = {"model": "m", "user": ids["user"], "stream": "yes",
             "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    refused = _post(door, tenant_key, loose)
    assert refused.status_code == 400, refused.text
    assert "stream" in refused.json()["error"]["message"]
    assert fake_openai.requests_to("/v1/chat/completions") == []


def test_a_body_far_over_the_stored_limit_is_refused_from_its_headers(
    door: str, tenant_key: str, ids: dict[str, str]
) -> None:
    huge = {"model": "m", "user": ids["user"],
            "messages": [{"role": "user", "content": "x" * 7_000_000}]}  # fmt: skip
    response = _post(door, tenant_key, huge)
    assert response.status_code == 413, response.text[:300]
    assert "error" in response.json()


def test_an_over_long_streamed_reply_is_stored_cut_and_marked(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess,
) -> None:  # fmt: skip
    fake_openai.reset()
    reply = "word " * 9_000  # 45,000 characters
    fake_openai.script_chat([Reply(reply.strip())])
    body = {"model": "m", "user": ids["user"], "stream": True,
            "messages": [{"role": "user", "content": "Say a lot."}]}  # fmt: skip
    with httpx.stream(
        "POST", f"{door}/v1/chat/completions", json=body, timeout=60,
        headers={"Authorization": f"Bearer {tenant_key}", "X-Memwell-Session": "long"},
    ) as response:  # fmt: skip
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert not any('"error"' in line for line in lines)

    def stored() -> Turn | None:
        with db() as s:
            return s.scalar(
                select(Turn).where(Turn.tenant == ids["tenant"], Turn.role == "assistant")
            )

    wait_for(lambda: stored() is not None, timeout=60, what="the assistant turn")
    turn = stored()
    assert turn is not None
    assert len(turn.content) == MAX_CONTENT_CHARS
    assert turn.metadata_["cut_from_chars"] == len(reply.strip())


def test_an_exchange_that_cannot_be_sent_says_so_and_is_replayed_from_its_dead_letter(
    stack_env: dict[str, str], db: sessionmaker[Session], worker: WorkerProcess,
    ids: dict[str, str],
) -> None:  # fmt: skip
    tenant, user = ids["tenant"], ids["user"]

    async def broker_gone(payload: IngestPayload) -> None:
        raise redis.exceptions.ConnectionError("the broker is gone")

    async def one_chunk() -> AsyncIterator[dict[str, Any]]:
        yield {"choices": [{"delta": {"content": " and the rest."}}]}

    async def scenario() -> list[bytes]:
        client = async_client(stack_env["REDIS_URL"])
        engine = make_engine(stack_env["DATABASE_URL"], pool_size=1)
        deps = CompletionsDeps(
            retrieval=None, upstream=None, summarize=None, context_budget=1000,  # type: ignore[arg-type]
            buffer=SessionBuffer(client, token_budget=2000, ttl_s=60), redis=client,
            send=broker_gone, dead_letter=_dead_letter_writer(make_sessionmaker(engine)),
        )  # fmt: skip
        first = {"choices": [{"delta": {"content": "A reply"}}]}
        relay = _relay(deps, Caller(tenant, user, "s"), "Remember me.", first, one_chunk())
        frames = [frame async for frame in relay]
        await client.aclose()
        engine.dispose()
        return frames

    frames = asyncio.run(scenario())
    assert frames[-1] == b"data: [DONE]\n\n"
    assert json.loads(frames[-2].removeprefix(b"data: "))["error"]["code"] == "not-remembered"
    with db() as s:
        letter = s.scalar(select(DeadLetter).where(DeadLetter.tenant == tenant))
    assert letter is not None and letter.task_name == "memwell.ingest_turns"
    with db.begin() as s:
        assert replay_dead_letters(s, send_by_name, ids=[letter.id], tenant=tenant)

    def stored() -> list[str]:
        with db() as s:
            return sorted(s.scalars(select(Turn.content).where(Turn.tenant == tenant)).all())

    wait_for(lambda: len(stored()) == 2, timeout=60, what="the replayed exchange")
    assert stored() == ["A reply and the rest.", "Remember me."]
