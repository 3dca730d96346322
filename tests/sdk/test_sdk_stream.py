"""`chat_stream` of the sync and async SDK clients against the real API over real HTTP
(uvicorn), including a client that stops early; and its error mapping and retry policy
on scripted transports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.core.settings import Settings
from memwell.db.models import Turn
from memwell.llm.recall import LABEL
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.sdk import ChatStreamEvent, UnavailableError
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.live_api import serve_api


@pytest.fixture(scope="module")
def api_key(auth_headers: dict[str, str]) -> str:
    return auth_headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


@pytest.fixture(scope="module")
def llm_url(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[str]:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="test-key",
        chat_model="scripted-model", embedding_provider="local", llm_timeout_s=5,
        pipeline_mode="local",
    )  # fmt: skip
    with serve_api(settings) as url:
        yield url


def _check_whole(events: list[ChatStreamEvent]) -> str:
    """The events' order and shape; returns the reply they carried."""
    assert [e.event for e in events][:1] == ["memories"]
    assert {e.event for e in events[1:-1]} == {"token"} and events[-1].event == "done"
    done = events[-1]
    assert done.model == "memwell-local-recall" and len(done.turn_ids) == 2
    assert {"retrieve", "model", "total"} <= done.timings_ms.keys()
    return "".join(e.delta for e in events[1:-1])


def test_sync_client_streams_a_chat(
    api_url: str, api_key: str, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    with memwell.MemoryClient(api_url, api_key=api_key) as mw:
        said = mw.chat(
            user_id=ids["user"], session_id="s1", message="My sister Maren lives in Tromsø."
        )
        mw.wait_for_turns(said.turn_ids, timeout=60)

        events = list(
            mw.chat_stream(
                user_id=ids["user"], session_id="s2", message="Where does my sister live?"
            )
        )

        reply = _check_whole(events)
        assert reply.startswith(LABEL) and "Tromsø" in reply
        assert any("Tromsø" in m.content for m in events[0].memories)
        mw.wait_for_turns(events[-1].turn_ids, timeout=60)
        buffer = mw.get_session("s2", user_id=ids["user"]).model_dump()["buffer"]
        assert [t["content"] for t in buffer["turns"]] == ["Where does my sister live?", reply]


def test_async_client_streams_a_chat(
    api_url: str, api_key: str, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    async def scenario() -> list[ChatStreamEvent]:
        async with memwell.AsyncMemoryClient(api_url, api_key=api_key) as mw:
            stream = mw.chat_stream(user_id=ids["user"], session_id="s", message="Hello")
            return [event async for event in stream]

    events = asyncio.run(scenario())
    assert _check_whole(events).startswith(LABEL)
    assert events[0].memories == []


def test_stopping_early_keeps_what_was_produced(
    llm_url: str,
    api_key: str,
    fake_openai: FakeOpenAI,
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    story = " ".join(f"part{i}" for i in range(40))
    fake_openai.reset()
    fake_openai.script_chat([Reply(story)])
    fake_openai.stream_chunk_delay = 0.2  # the whole reply would take seconds
    try:
        with memwell.MemoryClient(llm_url, api_key=api_key) as mw:
            for event in mw.chat_stream(user_id=ids["user"], session_id="s", message="A story?"):
                if event.event == "token":
                    first = event.delta
                    break
    finally:
        fake_openai.stream_chunk_delay = 0.0

    def assistant_turns() -> list[Turn]:
        with db() as s:
            return list(
                s.scalars(
                    select(Turn).where(Turn.tenant == "default", Turn.user_id == ids["user"],
                                       Turn.role == "assistant")
                )
            )  # fmt: skip

    stored = wait_for(assistant_turns, timeout=60, what="the truncated reply stored")
    assert len(stored) == 1 and stored[0].metadata_ == {"truncated": True}
    assert stored[0].content.startswith(first) and stored[0].content != story


def _scripted(responses: list[httpx.Response], seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    return httpx.Client(base_url="http://sdk.test", transport=httpx.MockTransport(handler))


def test_an_error_event_raises_the_mapped_error_after_the_events_before_it() -> None:
    problem = {
        "type": "https://memwell.dev/problems/unavailable", "title": "ServiceUnavailable",
        "status": 503, "detail": "model endpoint answered 500", "turn_ids": ["a", "b"],
    }  # fmt: skip
    wire = (
        "event: memories\ndata: []\n\n: a comment\n\n"
        'event: token\ndata: {"delta": "Hel"}\n\n'
        f"event: error\ndata: {json.dumps(problem)}\n\n"
    )
    seen: list[httpx.Request] = []
    response = httpx.Response(200, text=wire, headers={"content-type": "text/event-stream"})
    mw = memwell.MemoryClient(http_client=_scripted([response], seen))
    events: list[ChatStreamEvent] = []
    with pytest.raises(UnavailableError) as raised:
        for event in mw.chat_stream(user_id="u", session_id="s", message="hi"):
            events.append(event)
    assert [(e.event, e.delta) for e in events] == [("memories", ""), ("token", "Hel")]
    assert raised.value.body["turn_ids"] == ["a", "b"]
    assert json.loads(seen[0].content)["stream"] is True
    assert seen[0].headers["Accept"] == "text/event-stream"


def test_chat_stream_is_not_retried_once_sent() -> None:
    seen: list[httpx.Request] = []
    body = {"type": "https://memwell.dev/problems/unavailable", "title": "u", "status": 503}
    http = _scripted([httpx.Response(503, json=body), httpx.Response(503, json=body)], seen)
    mw = memwell.MemoryClient(http_client=http, max_retries=3)
    with pytest.raises(UnavailableError):
        list(mw.chat_stream(user_id="u", session_id="s", message="hi"))
    assert len(seen) == 1
