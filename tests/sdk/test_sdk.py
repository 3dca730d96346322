"""The Python SDK against the real API over real HTTP (uvicorn), plus its retry and
error-mapping policy on scripted transports.

Every call runs once against the real app: chat, add_turns/add_turn, turn_status,
wait_for_turns, ready, search, context, get/delete/history of memories, erase_user,
and the error mapping.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

import memwell
from memwell.local.worker_process import WorkerProcess
from memwell.sdk import (
    ChatReply,
    InvalidInputError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
)
from tests.support.live_api import serve_api


@pytest.fixture(scope="module")
def api_key(auth_headers: dict[str, str]) -> str:
    return auth_headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


def test_sync_client_adds_turns_waits_and_chats(
    api_url: str, api_key: str, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    with memwell.MemoryClient(api_url, api_key=api_key, timeout=30) as mw:
        assert mw.ready() is True
        accepted = mw.add_turns(
            [
                {"user_id": ids["user"], "session_id": "s1", "content": "My cat is called Miso."},
                {"user_id": ids["user"], "session_id": "s1", "content": "I live in Porto."},
            ]
        )
        assert accepted.accepted == 2 and len(set(accepted.turn_ids)) == 2
        statuses = mw.wait_for_turns(accepted.turn_ids, timeout=60)
        assert {s.status for s in statuses} == {"processed"}

        reply = mw.chat(user_id=ids["user"], session_id="s2", message="What is my cat called?")
        assert isinstance(reply, ChatReply)
        assert any("Miso" in m.content for m in reply.memories)
        assert {"buffer", "retrieve", "model"} <= set(reply.timings_ms)
        assert mw.turn_status("never-sent").status == "unknown"
        slashed = mw.add_turn(user_id=ids["user"], session_id="s1", content="Hi", turn_id="a/b")
        assert mw.turn_status(slashed).id == "a/b"


def test_async_client_mirrors_the_sync_one(
    api_url: str, api_key: str, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    async def scenario() -> tuple[str, str]:
        async with memwell.AsyncMemoryClient(api_url, api_key=api_key) as mw:
            turn_id = await mw.add_turn(
                user_id=ids["user"], session_id="s1", content="I play the cello.", turn_id="c-1"
            )
            await mw.wait_for_turns([turn_id], timeout=60)
            status = await mw.turn_status(turn_id)
            reply = await mw.chat(user_id=ids["user"], session_id="s2", message="What do I play?")
            return status.status, " ".join(m.content for m in reply.memories)

    status, recalled = asyncio.run(scenario())
    assert status == "processed"
    assert "cello" in recalled


def test_problem_json_maps_to_exception_classes(api_url: str, api_key: str) -> None:
    with memwell.MemoryClient(api_url, api_key=api_key) as mw:
        with pytest.raises(InvalidInputError) as invalid:
            mw.add_turns([{"user_id": "u", "session_id": "s", "content": "   "}])
        assert invalid.value.status == 422
        assert invalid.value.errors and invalid.value.errors[0]["loc"][-1] == "content"
        assert invalid.value.request_id  # the server echoed the SDK's request id
        with pytest.raises(NotFoundError):
            mw._run(memwell.sdk._ops.Call("GET", "/v1/no-such-route", lambda raw: raw))


def _scripted(responses: list[httpx.Response], seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    return httpx.Client(base_url="http://sdk.test", transport=httpx.MockTransport(handler))


def _problem(status: int, code: str) -> httpx.Response:
    body = {"type": f"https://memwell.dev/problems/{code}", "title": code, "status": status}
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", "Retry-After": "0"}
    )


def test_idempotent_turns_are_retried_with_the_same_ids_and_request_id() -> None:
    seen: list[httpx.Request] = []
    ok = httpx.Response(202, json={"accepted": 1, "turn_ids": ["x"]})
    http = _scripted([_problem(503, "unavailable"), _problem(503, "unavailable"), ok], seen)
    mw = memwell.MemoryClient(api_key="mw_secret", http_client=http, max_retries=3)
    mw.add_turns([{"user_id": "u", "session_id": "s", "content": "hello"}])
    assert len(seen) == 3
    bodies = [json.loads(r.content) for r in seen]
    assert bodies[0] == bodies[1] == bodies[2]  # a client-made turn id, kept across retries
    assert bodies[0]["turns"][0]["id"]
    assert len({r.headers["X-Request-ID"] for r in seen}) == 1
    assert all(r.headers["Authorization"] == "Bearer mw_secret" for r in seen)


def test_chat_is_not_retried_once_sent() -> None:
    seen: list[httpx.Request] = []
    http = _scripted([_problem(503, "unavailable"), _problem(503, "unavailable")], seen)
    mw = memwell.MemoryClient(http_client=http, max_retries=3)
    with pytest.raises(UnavailableError):
        mw.chat(user_id="u", session_id="s", message="hi")
    assert len(seen) == 1


def test_chat_is_retried_when_the_api_refused_it_before_any_work() -> None:
    seen: list[httpx.Request] = []
    reply = {"reply": "hello", "model": "local", "memories": [], "turn_ids": ["a", "b"]}
    refusals = [_problem(503, "overloaded"), _problem(429, "rate-limited")]
    http = _scripted([*refusals, httpx.Response(200, json=reply)], seen)
    mw = memwell.MemoryClient(http_client=http, max_retries=3)
    assert mw.chat(user_id="u", session_id="s", message="hi").reply == "hello"
    assert len(seen) == 3
    assert len({r.headers["X-Request-ID"] for r in seen}) == 1


def test_retries_stop_after_max_and_raise_the_mapped_error() -> None:
    seen: list[httpx.Request] = []
    http = _scripted([_problem(429, "rate-limited")] * 3, seen)
    mw = memwell.MemoryClient(http_client=http, max_retries=2)
    with pytest.raises(RateLimitedError):
        mw.turn_status("t")
    assert len(seen) == 3
    assert "Authorization" not in seen[0].headers  # no key configured, none sent


def test_memory_calls_against_the_real_api(
    api_url: str, api_key: str, worker: WorkerProcess, ids: dict[str, str]
) -> None:
    user = ids["user"] + "/memories"  # a slash must survive the path (erase_user)
    with memwell.MemoryClient(api_url, api_key=api_key, timeout=30) as mw:
        accepted = mw.add_turns(
            [{"user_id": user, "session_id": "s1", "content": "My sister Ana lives in Lisbon."}]
        )
        mw.wait_for_turns(accepted.turn_ids, timeout=60)

        found = mw.search(user_id=user, query="Where does my sister live?", k=5)
        assert found.hits, "the consolidated memory is found"
        hit = found.hits[0]
        assert "Lisbon" in hit.content and accepted.turn_ids[0] in hit.source_turn_ids
        assert hit.score > 0 and hit.relevance > 0

        context = mw.context(user_id=user, session_id="s1", query="Where does Ana live?")
        assert hit.id in {m.id for m in context.memories}
        assert context.messages, "ready-to-use messages for the app's own model"

        memory = mw.get_memory(hit.id)
        assert (memory.id, memory.user_id) == (hit.id, user)
        history = mw.memory_history(hit.id)
        assert history and history[0].event == "add"

        tombstone = mw.delete_memory(hit.id)
        assert tombstone.deleted_at is not None and "Lisbon" not in tombstone.content
        assert mw.get_memory(hit.id).deleted_at == tombstone.deleted_at
        assert hit.id not in {h.id for h in mw.search(user_id=user, query="sister").hits}

        erased = mw.erase_user(user)
        assert erased.user_id == user and erased.counts.get("turns", 0) >= 1
        assert mw.search(user_id=user, query="sister").hits == []


def test_memory_calls_build_the_documented_requests() -> None:
    seen: list[httpx.Request] = []
    hit = {"id": "m1", "kind": "fact", "content": "Lives in Porto", "score": 0.9}
    http = _scripted(
        [
            httpx.Response(200, json={"hits": [hit]}),
            httpx.Response(200, json={**hit, "deleted_at": "2026-01-01T00:00:00Z"}),
            httpx.Response(200, json={"user_id": "u/1", "counts": {"turns": 3}}),
        ],
        seen,
    )
    mw = memwell.MemoryClient(http_client=http)
    assert mw.search(user_id="u", query="where", k=5).hits[0].score == 0.9
    assert mw.delete_memory("m1").deleted_at is not None
    assert mw.erase_user("u/1").counts == {"turns": 3}
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("POST", "/v1/memories/search"),
        ("DELETE", "/v1/memories/m1"),
        ("DELETE", "/v1/users/u%2F1"),
    ]
    assert json.loads(seen[0].content) == {"user_id": "u", "query": "where", "k": 5}


def test_async_client_retries_idempotent_calls_and_maps_errors() -> None:
    seen: list[httpx.Request] = []
    responses = [
        _problem(503, "unavailable"),
        httpx.Response(200, json={"id": "t", "status": "processed"}),
        _problem(404, "not-found"),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    async def scenario() -> str:
        http = httpx.AsyncClient(base_url="http://sdk.test", transport=httpx.MockTransport(handler))
        async with memwell.AsyncMemoryClient(api_key="k", http_client=http) as mw:
            status = await mw.turn_status("t")
            with pytest.raises(NotFoundError):
                await mw.get_memory("missing")
        await http.aclose()
        return status.status

    assert asyncio.run(scenario()) == "processed"
    assert len(seen) == 3 and seen[0].headers["Authorization"] == "Bearer k"
