"""A session's transcript (GET/DELETE /v1/turns) and the memory list's metadata filter,
through the SDK against the real API over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import memwell
from memwell.sdk import InvalidInputError
from tests.support.live_api import serve_api


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


def _client(api_url: str, headers: dict[str, str]) -> memwell.MemoryClient:
    return memwell.MemoryClient(api_url, api_key=headers["Authorization"].removeprefix("Bearer "))


def test_transcript_lists_trims_and_clears_a_session(
    api_url: str, make_key: Callable[..., dict[str, str]], ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    with _client(api_url, make_key(ids["tenant"], ("read", "write"))) as mw:
        assert mw.transcript(user_id=user, session_id=sid).turns == []
        said = ["Hi, I am Ada.", "Hello Ada!", "I like jazz."]
        roles = ["user", "assistant", "user"]
        mw.add_turns(
            [
                {"user_id": user, "session_id": sid, "role": r, "content": c, "id": f"t{i}",
                 "metadata": {"n": i}}
                for i, (r, c) in enumerate(zip(roles, said, strict=True))
            ]
        )  # fmt: skip
        turns = mw.transcript(user_id=user, session_id=sid).turns
        assert [(t.role, t.content) for t in turns] == list(zip(roles, said, strict=True))
        assert all(t.stored for t in turns) and turns[2].metadata == {"n": 2}
        assert [t.content for t in mw.transcript(user_id=user, session_id=sid, limit=2).turns] == (
            said[1:]
        )

        popped = mw.clear_transcript(user_id=user, session_id=sid, turn_ids=["t2"])
        assert popped.counts["turns"] == 1
        assert [t.turn_id for t in mw.transcript(user_id=user, session_id=sid).turns] == [
            "t0",
            "t1",
        ]
        cleared = mw.clear_transcript(user_id=user, session_id=sid)
        assert cleared.counts["turns"] == 2
        assert mw.transcript(user_id=user, session_id=sid).turns == []


def test_transcript_is_the_tenants_own(
    api_url: str, make_key: Callable[..., dict[str, str]], ids: dict[str, str]
) -> None:
    user, sid = ids["user"], ids["session"]
    with (
        _client(api_url, make_key(ids["tenant"], ("read", "write"))) as mine,
        _client(api_url, make_key(ids["tenant"] + "-other", ("read", "write"))) as theirs,
    ):
        mine.add_turn(user_id=user, session_id=sid, content="My secret is 42.")
        assert theirs.transcript(user_id=user, session_id=sid).turns == []
        assert theirs.clear_transcript(user_id=user, session_id=sid).counts["turns"] == 0
        assert len(mine.transcript(user_id=user, session_id=sid).turns) == 1


def test_memory_list_filters_by_metadata(
    api_url: str, make_key: Callable[..., dict[str, str]], ids: dict[str, str]
) -> None:
    user = ids["user"]
    with _client(api_url, make_key(ids["tenant"], ("read", "write"))) as mw:
        mw.add_memories(
            user_id=user,
            memories=[
                {"content": "Ada likes jazz.", "metadata": {"topic": "music", "n": 1}},
                {"content": "Ada eats no nuts.", "metadata": {"topic": "food"}},
            ],
        )
        music = mw.list_memories(user_id=user, metadata={"topic": "music"})
        assert [m.content for m in music.memories] == ["Ada likes jazz."] and music.total == 1
        assert mw.list_memories(user_id=user, metadata={"topic": "sport"}).total == 0
        assert mw.list_memories(user_id=user).total == 2


@pytest.mark.parametrize("bad", ["[1]", "{not json", '{"a": NaN}'])
def test_memory_list_refuses_a_metadata_filter_that_is_not_a_json_object(
    api_url: str, make_key: Callable[..., dict[str, str]], ids: dict[str, str], bad: str
) -> None:
    import httpx

    headers = make_key(ids["tenant"], ("read",))
    response = httpx.get(
        f"{api_url}/v1/memories", params={"user_id": ids["user"], "metadata": bad}, headers=headers
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    with _client(api_url, headers) as mw, pytest.raises(InvalidInputError):
        mw.transcript(user_id=ids["user"], session_id="s", limit=0)
