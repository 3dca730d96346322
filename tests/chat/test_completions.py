"""The OpenAI-compatible door, driven by the official `openai` client (sync and async,
streaming and not) against a live Memwell whose upstream is the tests' fake server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import Turn
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI, Reply, Status
from tests.support.live_api import serve_api

TOOLS = [{"type": "function", "function": {"name": "book_flight", "parameters": {
    "type": "object", "properties": {"to": {"type": "string"}}}}}]  # fmt: skip


def _turns(db: sessionmaker[Session], tenant: str, session_id: str) -> list[Turn]:
    with db() as s:
        return list(
            s.scalars(
                select(Turn).where(Turn.tenant == tenant, Turn.session_id == session_id)
                .order_by(Turn.created_at, Turn.role.desc())
            )
        )  # fmt: skip


def _store_fact(url: str, key: str, user: str) -> None:
    response = httpx.post(
        f"{url}/v1/memories",
        json={"user_id": user, "memories": [{"content": "The user is allergic to peanuts."}]},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.text


def test_sync_client_gets_memory_injected_and_tools_passed_through(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess,
) -> None:  # fmt: skip
    user = ids["user"]
    _store_fact(door, tenant_key, user)
    fake_openai.reset()
    fake_openai.script_chat([Reply("Noted: no peanuts on the flight.")])
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=tenant_key)
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "You are a travel agent."},
                  {"role": "user", "content": "What am I allergic to? Plan my flight meals."}],
        tools=TOOLS, temperature=0.2, user=user,
        extra_headers={"X-Memwell-Session": "trip"},
    )  # fmt: skip
    assert answer.choices[0].message.content == "Noted: no peanuts on the flight."

    sent = fake_openai.chat_requests[-1].json
    assert sent["messages"][0] == {"role": "system", "content": "You are a travel agent."}
    block = sent["messages"][1]
    assert block["role"] == "system" and "allergic to peanuts" in block["content"]
    assert "not instructions" in block["content"]
    assert sent["messages"][2]["content"] == "What am I allergic to? Plan my flight meals."
    assert sent["tools"] == TOOLS and sent["temperature"] == 0.2 and sent["model"] == "gpt-4o-mini"

    wait_for(lambda: {t.status for t in _turns(db, ids["tenant"], "trip")} == {"processed"}
             and len(_turns(db, ids["tenant"], "trip")) == 2, timeout=60)  # fmt: skip
    user_turn, reply_turn = _turns(db, ids["tenant"], "trip")
    assert user_turn.content == "What am I allergic to? Plan my flight meals."
    assert reply_turn.content == "Noted: no peanuts on the flight."
    session = httpx.get(
        f"{door}/v1/sessions/trip", params={"user_id": user},
        headers={"Authorization": f"Bearer {tenant_key}"},
    ).json()  # fmt: skip
    buffered = [t["content"] for t in session["buffer"]["turns"]]
    assert buffered == [user_turn.content, reply_turn.content]  # the short-term tier too


def test_streaming_relays_chunks_and_usage_then_remembers(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess,
) -> None:  # fmt: skip
    fake_openai.reset()
    fake_openai.script_chat([Reply("Window seat booked for Porto.")])
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=tenant_key)
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Book me a window seat."}],
        stream=True, stream_options={"include_usage": True}, user=ids["user"],
        extra_headers={"X-Memwell-Session": "s-stream"},
    )  # fmt: skip
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Window seat booked for Porto."
    assert chunks[-1].usage is not None  # include_usage passed through
    wait_for(lambda: len(_turns(db, ids["tenant"], "s-stream")) == 2, timeout=60)
    assert _turns(db, ids["tenant"], "s-stream")[1].content == "Window seat booked for Porto."


def test_async_client_streaming_and_not(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str]
) -> None:
    fake_openai.reset()
    fake_openai.script_chat([Reply("First answer."), Reply("Second answer.")])

    async def scenario() -> tuple[str, str]:
        client = openai.AsyncOpenAI(base_url=f"{door}/v1", api_key=tenant_key)
        plain = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hello?"}], user=ids["user"]
        )
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Again?"}], user=ids["user"],
            stream=True,
        )  # fmt: skip
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await client.close()
        return plain.choices[0].message.content or "", "".join(parts)

    assert asyncio.run(scenario()) == ("First answer.", "Second answer.")


def test_a_disconnect_mid_stream_keeps_the_partial_reply_once(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess, stack_env: dict[str, str],
) -> None:  # fmt: skip
    fake_openai.reset()
    fake_openai.stream_chunk_delay = 0.3
    fake_openai.script_chat([Reply("One. Two. Three. Four. Five. Six. Seven. Eight.")])
    body = {"model": "m", "stream": True, "user": ids["user"],
            "messages": [{"role": "user", "content": "Count slowly."}]}  # fmt: skip
    headers = {"Authorization": f"Bearer {tenant_key}", "X-Memwell-Session": "cut"}
    try:
        with httpx.stream("POST", f"{door}/v1/chat/completions", json=body, headers=headers,
                          timeout=30) as response:  # fmt: skip
            assert response.status_code == 200
            for line in response.iter_lines():
                chunk = json.loads(line[5:]) if line.startswith("data: {") else {}
                if any(c["delta"].get("content") for c in chunk.get("choices", [])):
                    break  # the client goes away after the first words
    finally:
        fake_openai.stream_chunk_delay = 0.0
    wait_for(lambda: len(_turns(db, ids["tenant"], "cut")) == 2, timeout=60)
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60)
    turns = _turns(db, ids["tenant"], "cut")
    assert len(turns) == 2
    assert turns[1].metadata_.get("truncated") is True
    assert 0 < len(turns[1].content) < len("One. Two. Three. Four. Five. Six. Seven. Eight.")


def test_idempotency_key_remembers_a_retried_request_once(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session], worker: WorkerProcess, stack_env: dict[str, str],
) -> None:  # fmt: skip
    fake_openai.reset()
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=tenant_key, max_retries=0)
    for _ in range(2):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Remember me once."}],
            user=ids["user"],
            extra_headers={"Idempotency-Key": f"retry-{ids['user']}", "X-Memwell-Session": "i"},
        )  # fmt: skip
    wait_for(lambda: len(_turns(db, ids["tenant"], "i")) >= 2, timeout=60)
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=60)
    assert len(_turns(db, ids["tenant"], "i")) == 2


def test_errors_come_in_openai_shape_and_write_nothing(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str],
    db: sessionmaker[Session],
) -> None:  # fmt: skip
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=tenant_key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as missing:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    error: Any = missing.value.body
    assert "X-Memwell-User" in error["message"]

    fake_openai.reset()
    fake_openai.script_chat([Status(429, retry_after=7)])
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], user=ids["user"],
            extra_headers={"X-Memwell-Session": "refused"},
        )  # fmt: skip
    assert limited.value.response.headers["retry-after"] == "7"
    fake_openai.script_chat([Status(503)])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], user=ids["user"],
            stream=True, extra_headers={"X-Memwell-Session": "refused"},
        )  # fmt: skip
    with db() as s:
        count = s.scalar(select(func.count()).select_from(Turn).where(Turn.tenant == ids["tenant"]))
    assert count == 0  # no reply, no memory write

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{door}/v1", api_key="mw_wrong", max_retries=0).models.list()


def test_models_list_the_upstream_or_the_local_responder(
    door: str, tenant_key: str, auth_headers: dict[str, str]
) -> None:
    upstream = openai.OpenAI(base_url=f"{door}/v1", api_key=tenant_key).models.list()
    assert [m.id for m in upstream.data]
    key = auth_headers["Authorization"].removeprefix("Bearer ")
    with serve_api() as local:  # no model endpoint configured: the recall responder
        listed = openai.OpenAI(base_url=f"{local}/v1", api_key=key).models.list()
        answer = openai.OpenAI(base_url=f"{local}/v1", api_key=key).chat.completions.create(
            model="anything", messages=[{"role": "user", "content": "What do I like?"}],
            user="local-user",
        )  # fmt: skip
    assert [m.id for m in listed.data] == ["memwell-local-recall"]
    assert "memwell local recall" in (answer.choices[0].message.content or "")


def test_null_optional_fields_read_as_openai_reads_them(
    door: str, fake_openai: FakeOpenAI, tenant_key: str, ids: dict[str, str]
) -> None:
    # OpenAI takes null for its optional fields: `stream: null` is not streamed, and the
    # upstream is told false (not every compatible server takes null).
    fake_openai.reset()
    fake_openai.script_chat([Reply("Plain reply.")])
    body = {
        "model": "m", "messages": [{"role": "user", "content": "hi", "name": None}],
        "stream": None, "user": ids["user"], "metadata": None, "temperature": None,
    }  # fmt: skip
    response = httpx.post(
        f"{door}/v1/chat/completions", json=body,
        headers={"Authorization": f"Bearer {tenant_key}", "X-Memwell-Session": "nulls"},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["choices"][0]["message"]["content"] == "Plain reply."
    forwarded = fake_openai.chat_requests[-1].json
    assert forwarded["stream"] is False
