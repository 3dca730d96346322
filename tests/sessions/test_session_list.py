"""GET /v1/sessions: newest activity first, keyset pages that neither repeat nor skip
while sessions start between them, cursors bound to their user and tenant, bounded
page sizes."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import ChatSession
from tests.support.problems import assert_problem

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _add_sessions(
    db: sessionmaker[Session], tenant: str, user: str, active: dict[str, datetime]
) -> None:
    rows = [
        {"tenant": tenant, "user_id": user, "id": sid, "turn_count": 2,
         "created_at": at - timedelta(minutes=5), "last_activity_at": at}
        for sid, at in active.items()
    ]  # fmt: skip
    with db.begin() as session:
        session.execute(insert(ChatSession), rows)


def _page(
    api: TestClient, headers: dict[str, str], user: str, cursor: str | None, limit: int = 3
) -> dict[str, object]:
    params: dict[str, str | int] = {"user_id": user, "limit": limit}
    if cursor is not None:
        params["cursor"] = cursor
    response = api.get("/v1/sessions", params=params, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_pages_neither_repeat_nor_skip_while_sessions_start(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    key = make_key(tenant, ("read",))
    # Three sessions share one instant: the id breaks the tie, so no page boundary
    # can fall inside a tie and lose a row.
    first = {f"s{n}": T0 - timedelta(minutes=n) for n in range(5)}
    first |= {f"tie-{c}": T0 - timedelta(minutes=10) for c in "abc"}
    _add_sessions(db, tenant, user, first)

    seen: list[str] = []
    body = _page(api, key, user, None)
    while True:
        sessions = body["sessions"]
        assert isinstance(sessions, list)
        seen += [s["id"] for s in sessions]
        # Between pages: newer sessions start, and one older than all of them.
        n = len(seen)
        _add_sessions(db, tenant, user, {f"new-{n}": T0 + timedelta(minutes=n)})
        _add_sessions(db, tenant, user, {f"old-{n}": T0 - timedelta(days=n)})
        if body["next_cursor"] is None:
            break
        body = _page(api, key, user, str(body["next_cursor"]))

    assert len(seen) == len(set(seen)), seen
    original = [s for s in seen if s in first]
    expected = sorted(first, key=lambda s: (first[s], s), reverse=True)
    assert original == expected  # every one, newest activity first, none skipped
    assert not [s for s in seen if s.startswith("new-")]  # started above the cursor
    assert [s for s in seen if s.startswith("old-")]  # below it: they come in turn


def test_items_carry_status_counts_and_a_summary_excerpt(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    _add_sessions(db, tenant, user, {"long": T0, "short": T0 - timedelta(hours=1)})
    with db.begin() as session:
        session.query(ChatSession).filter_by(tenant=tenant, id="long").update(
            {"summary": "x" * 500, "status": "closed", "closed_at": T0}
        )
        session.query(ChatSession).filter_by(tenant=tenant, id="short").update({"summary": "hi"})
    body = _page(api, make_key(tenant, ("read",)), user, None, limit=50)
    long, short = body["sessions"]  # type: ignore[misc]
    assert long["status"] == "closed" and long["closed_at"] and long["turn_count"] == 2
    assert len(long["summary_excerpt"]) == 200 and long["summary_excerpt"].endswith("…")
    assert short["status"] == "open" and short["summary_excerpt"] == "hi"
    assert body["next_cursor"] is None


def test_a_cursor_only_serves_its_own_user_and_tenant(
    api: TestClient,
    db: sessionmaker[Session],
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    tenant, user = ids["tenant"], ids["user"]
    _add_sessions(db, tenant, user, {f"s{n}": T0 - timedelta(minutes=n) for n in range(3)})
    key = make_key(tenant, ("read",))
    cursor = _page(api, key, user, None, limit=1)["next_cursor"]
    assert isinstance(cursor, str)

    other_user = api.get(
        "/v1/sessions", params={"user_id": user + "-2", "cursor": cursor}, headers=key
    )
    assert_problem(other_user, 400, "invalid-cursor")
    other_tenant = api.get(
        "/v1/sessions",
        params={"user_id": user, "cursor": cursor},
        headers=make_key(tenant + "-2", ("read",)),
    )
    assert_problem(other_tenant, 400, "invalid-cursor")
    nested = base64.urlsafe_b64encode(b"[" * 3000).decode()  # deeper than json recurses
    for garbage in ("not a cursor", cursor[:-3], "e30", nested):  # "e30" is base64 of "{}"
        response = api.get("/v1/sessions", params={"user_id": user, "cursor": garbage}, headers=key)
        assert_problem(response, 400, "invalid-cursor")


def test_page_size_is_bounded(api: TestClient, ids: dict[str, str]) -> None:
    for limit in (0, 501):
        response = api.get("/v1/sessions", params={"user_id": ids["user"], "limit": limit})
        body = assert_problem(response, 422, "invalid-input")
        assert [e["loc"] for e in body["errors"]] == [["query", "limit"]]
    response = api.get("/v1/sessions", params={"user_id": ids["user"], "limit": 500})
    assert response.json() == {"sessions": [], "next_cursor": None}
    assert_problem(api.get("/v1/sessions"), 422, "invalid-input")  # user_id is required
    # An unknown parameter is refused, not ignored: a typo must not widen the answer.
    unknown = api.get("/v1/sessions", params={"user_id": ids["user"], "limt": 5})
    body = assert_problem(unknown, 422, "invalid-input")
    assert [e["loc"] for e in body["errors"]] == [["query", "limt"]]
