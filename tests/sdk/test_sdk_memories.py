"""The SDK's memory management (list, add, edit) and session and user calls, sync and
async, against the real API over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import memwell
from memwell.sdk import NotFoundError, PayloadTooLargeError
from tests.support.live_api import serve_api


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


@pytest.fixture(scope="module")
def api_key(auth_headers: dict[str, str]) -> str:
    return auth_headers["Authorization"].removeprefix("Bearer ")


def test_sync_client_adds_lists_and_edits(api_url: str, api_key: str, ids: dict[str, str]) -> None:
    user = ids["user"]
    with memwell.MemoryClient(api_url, api_key=api_key) as mw:
        added = mw.add_memories(
            user_id=user,
            memories=["Ada lives in Berlin.", {"content": "Ada likes jazz.", "kind": "preference"}],
        )
        assert [r.action for r in added.results] == ["added", "added"]
        moved = mw.add_memory(user_id=user, content="Ada moved to Lisbon.", source="crm")
        assert moved.action == "superseded"
        assert moved.related_memory_id == added.results[0].memory_id

        first = mw.list_memories(user_id=user, limit=1)
        assert first.total == 2 and len(first.memories) == 1 and first.next_cursor
        second = mw.list_memories(user_id=user, limit=1, cursor=first.next_cursor)
        assert {first.memories[0].id, second.memories[0].id} == {
            moved.memory_id,
            added.results[1].memory_id,
        }
        everything = mw.list_memories(user_id=user, include=["superseded"])
        assert everything.total == 3

        edited = mw.update_memory(added.results[1].memory_id, importance=0.95, pinned=True)
        assert edited.importance == 0.95 and edited.pinned is True
        assert mw.get_memory(added.results[1].memory_id).pinned is True
        with pytest.raises(NotFoundError):
            mw.update_memory("00000000-0000-0000-0000-000000000000", importance=0.1)


def test_async_client_adds_lists_and_edits(api_url: str, api_key: str, ids: dict[str, str]) -> None:
    user = ids["user"]

    async def scenario() -> tuple[str, int, str]:
        async with memwell.AsyncMemoryClient(api_url, api_key=api_key) as mw:
            added = await mw.add_memory(user_id=user, content="I train for a marathon.")
            page = await mw.list_memories(user_id=user, kinds=["fact"])
            edited = await mw.update_memory(
                added.memory_id, content="I train for the Berlin marathon."
            )
            return added.action, page.total, edited.content

    action, total, content = asyncio.run(scenario())
    assert (action, total, content) == ("added", 1, "I train for the Berlin marathon.")


def test_a_query_over_the_head_limit_is_payload_too_large(
    api_url: str, api_key: str, ids: dict[str, str]
) -> None:
    """The server refuses a request line over MEMWELL_API_MAX_HEADER_BYTES before any
    route (431, headers-too-large); the SDK names it as it names a body too large."""
    with memwell.MemoryClient(api_url, api_key=api_key) as mw:
        with pytest.raises(PayloadTooLargeError) as refused:
            mw.list_memories(user_id=ids["user"], cursor="A" * 20_000)
        assert refused.value.status == 431
        assert mw.list_memories(user_id=ids["user"]).total >= 0  # the client still works
