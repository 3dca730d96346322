"""GET /v1/users and /v1/users/{id}: every owner of sessions, turns or memories of the
tenant, in id order, keyset-paged, with live memory counts, sessions, pending turns and
last consolidation; nothing of another tenant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import ChatSession, Turn
from tests.support.memory_factory import add_memory, unit
from tests.support.problems import assert_problem

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _turn(tenant: str, user: str, n: int, **columns: Any) -> dict[str, Any]:
    return {"tenant": tenant, "id": f"{user}-t{n}", "user_id": user, "session_id": "s",
            "role": "user", "content": "hello", "created_at": T0, "token_count": 1,
            **columns}  # fmt: skip


def _seed(db: sessionmaker[Session], tenant: str) -> None:
    """ann: memories of every sort; bob: two sessions and turns; cy: turns only;
    dee: only a tombstoned memory."""
    memory = {"tenant": tenant, "embedding": unit(0.5)}
    with db.begin() as s:
        for n, kind in enumerate(("fact", "fact", "preference", "event")):
            add_memory(s, **memory, user_id="ann", content=f"ann {n}", kind=kind)
        add_memory(s, **memory, user_id="ann", content="gone", deleted_at=T0)
        add_memory(s, **memory, user_id="ann", content="expired", expires_at=T0)
        add_memory(s, **memory, user_id="dee", content="gone", deleted_at=T0)
        s.execute(
            insert(ChatSession),
            [{"tenant": tenant, "user_id": "bob", "id": sid, "last_activity_at": at}
             for sid, at in (("s1", T0), ("s2", T0 + timedelta(hours=1)))],
        )  # fmt: skip
        s.execute(
            insert(Turn),
            [
                _turn(tenant, "bob", 1, status="processed", processed_at=T0),
                _turn(tenant, "bob", 2, status="processed", processed_at=T0 + timedelta(hours=2)),
                _turn(tenant, "bob", 3),
                _turn(tenant, "cy", 1),
            ],
        )
        # The same user ids in another tenant must not count.
        add_memory(s, **{**memory, "tenant": tenant + "-other"}, user_id="ann", content="x")
        s.execute(insert(Turn), [_turn(tenant + "-other", "bob", 9)])


@pytest.fixture
def tenant(db: sessionmaker[Session], ids: dict[str, str]) -> str:
    _seed(db, ids["tenant"])
    return ids["tenant"]


def test_the_list_pages_through_every_owner_with_counts(
    api: TestClient, tenant: str, make_key: Callable[..., dict[str, str]]
) -> None:
    key = make_key(tenant, ("read",))
    users: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(3):
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response = api.get("/v1/users", params=params, headers=key)
        assert response.status_code == 200, response.text
        users += response.json()["users"]
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    assert cursor is None
    assert users == [
        {"user_id": "ann", "memory_count": 4, "session_count": 0, "last_activity_at": None},
        {"user_id": "bob", "memory_count": 0, "session_count": 2,
         "last_activity_at": "2026-03-01T13:00:00Z"},
        {"user_id": "cy", "memory_count": 0, "session_count": 0, "last_activity_at": None},
        {"user_id": "dee", "memory_count": 0, "session_count": 0, "last_activity_at": None},
    ]  # fmt: skip


def test_one_user_shows_kinds_pending_turns_and_last_consolidation(
    api: TestClient, tenant: str, make_key: Callable[..., dict[str, str]]
) -> None:
    key = make_key(tenant, ("read",))
    ann = api.get("/v1/users/ann", headers=key).json()
    assert ann["memory_count"] == 4
    assert ann["memories_by_kind"] == {
        "fact": 2, "preference": 1, "event": 1, "summary": 0, "episode": 0
    }  # fmt: skip
    bob = api.get("/v1/users/bob", headers=key).json()
    assert bob == {
        "user_id": "bob", "memory_count": 0, "session_count": 2, "pending_turns": 1,
        "memories_by_kind": {"fact": 0, "preference": 0, "event": 0, "summary": 0, "episode": 0},
        "last_consolidated_at": "2026-03-01T14:00:00Z",
        "last_activity_at": "2026-03-01T13:00:00Z",
    }  # fmt: skip
    assert api.get("/v1/users/dee", headers=key).status_code == 200  # history remains
    assert_problem(api.get("/v1/users/nobody", headers=key), 404, "not-found")
    # The other tenant sees its own ann and bob, not these.
    other = make_key(tenant + "-other", ("read",))
    assert api.get("/v1/users/ann", headers=other).json()["memory_count"] == 1
    assert_problem(api.get("/v1/users/cy", headers=other), 404, "not-found")


def test_a_cursor_only_serves_its_own_tenant_and_pages_are_bounded(
    api: TestClient, tenant: str, make_key: Callable[..., dict[str, str]]
) -> None:
    key = make_key(tenant, ("read",))
    cursor = api.get("/v1/users", params={"limit": 1}, headers=key).json()["next_cursor"]
    other = make_key(tenant + "-other", ("read",))
    response = api.get("/v1/users", params={"cursor": cursor}, headers=other)
    assert_problem(response, 400, "invalid-cursor")
    for limit in (0, 501):
        body = assert_problem(
            api.get("/v1/users", params={"limit": limit}, headers=key), 422, "invalid-input"
        )
        assert [e["loc"] for e in body["errors"]] == [["query", "limit"]]
    assert len(api.get("/v1/users", params={"limit": 500}, headers=key).json()["users"]) == 4
