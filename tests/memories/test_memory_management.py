"""Memory management over REST on the real stack: list with keyset paging, direct add
(reconciled or as given), and content edits with re-embedding and history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.support.problems import assert_problem


def _add(
    api: TestClient,
    user: str,
    memories: list[dict[str, Any]],
    *,
    reconcile: bool = True,
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    response = api.post(
        "/v1/memories",
        json={"user_id": user, "memories": memories, "reconcile": reconcile},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def _page(api: TestClient, **params: Any) -> dict[str, Any]:
    response = api.get("/v1/memories", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_paging_is_stable_while_memories_are_added(api: TestClient, ids: dict[str, str]) -> None:
    user = ids["user"]
    first = _add(api, user, [{"content": f"Note {i}: water the plants."} for i in range(23)],
                 reconcile=False)  # fmt: skip
    expected = {r["memory_id"] for r in first}
    seen: list[str] = []
    cursor = None
    for page_no in range(10):
        params: dict[str, Any] = {"user_id": user, "limit": 5}
        if cursor:
            params["cursor"] = cursor
        page = _page(api, **params)
        assert page["total"] >= 23
        seen += [m["id"] for m in page["memories"]]
        # Concurrent writers: newer memories land before the cursor, never in a later page.
        _add(api, user, [{"content": f"Later note {page_no}: buy stamps."}], reconcile=False)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))  # no memory twice
    assert expected <= set(seen)  # none skipped
    dates = [m["created_at"] for m in _page(api, user_id=user, limit=500)["memories"]]
    assert dates == sorted(dates, reverse=True)


def test_list_filters_sorts_and_refuses_bad_paging(
    api: TestClient, ids: dict[str, str], make_key: Callable[..., dict[str, str]]
) -> None:
    user = ids["user"]
    _add(api, user, [
        {"content": "I prefer window seats.", "kind": "preference", "importance": 0.9,
         "pinned": True},
        {"content": "I flew to Oslo in May.", "kind": "event", "importance": 0.2},
        {"content": "My dentist is Dr. Ruiz.", "kind": "fact", "importance": 0.6},
    ], reconcile=False)  # fmt: skip
    by_importance = _page(api, user_id=user, sort="importance")["memories"]
    assert [m["importance"] for m in by_importance] == [0.9, 0.6, 0.2]
    assert [m["kind"] for m in _page(api, user_id=user, kind=["event"])["memories"]] == ["event"]
    pinned = _page(api, user_id=user, pinned=True)
    assert pinned["total"] == 1 and pinned["memories"][0]["pinned"] is True

    page = _page(api, user_id=user, limit=1)
    assert page["next_cursor"] and page["total"] == 3
    other = api.get("/v1/memories", params={"user_id": user + "-x", "cursor": page["next_cursor"]})
    assert_problem(other, 400, "invalid-cursor")
    assert_problem(api.get("/v1/memories", params={"user_id": user, "cursor": "%%%"}),
                   400, "invalid-cursor")  # fmt: skip
    unknown = api.get("/v1/memories", params={"user_id": user, "kinds": "event"})
    assert "kinds" in str(assert_problem(unknown, 422, "invalid-input")["errors"])
    too_big = api.get("/v1/memories", params={"user_id": user, "limit": 501})
    assert "limit" in str(assert_problem(too_big, 422, "invalid-input")["errors"])
    # Another tenant's key sees none of these memories.
    foreign = make_key(ids["tenant"], ("read",))
    listed = api.get("/v1/memories", params={"user_id": user}, headers=foreign).json()
    assert listed["total"] == 0


def test_direct_add_reconciles_and_is_searchable_at_once(
    api: TestClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    [added] = _add(api, user, [{"content": "Ada lives in Berlin.", "source": "crm-import"}])
    assert added["action"] == "added"
    again = _add(api, user, [{"content": "Ada lives in Berlin."}])
    assert again[0] == {**added, "action": "reinforced"}
    [moved] = _add(api, user, [{"content": "Ada moved to Lisbon."}])
    assert moved["action"] == "superseded"
    assert moved["related_memory_id"] == added["memory_id"]

    hits = api.post("/v1/memories/search", json={"user_id": user, "query": "Where does Ada live?"})
    assert hits.json()["hits"][0]["id"] == moved["memory_id"]
    old = api.get(f"/v1/memories/{added['memory_id']}").json()
    assert old["superseded_by"] == moved["memory_id"]
    history = api.get(f"/v1/memories/{added['memory_id']}/history").json()["events"]
    assert history[0]["event"] == "add" and "crm-import" in history[0]["reason"]
    assert old["metadata"] == {"source": "crm-import"}


def test_add_as_given_skips_reconciliation_and_validates(
    api: TestClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    _add(api, user, [{"content": "Ada lives in Berlin."}], reconcile=False)
    [kept] = _add(api, user, [{"content": "Ada moved to Lisbon."}], reconcile=False)
    assert kept["action"] == "added"  # no supersession when stored as given
    assert _page(api, user_id=user)["total"] == 2

    bad = api.post("/v1/memories", json={"user_id": user, "memories": [{"content": ""}]})
    assert "content" in str(assert_problem(bad, 422, "invalid-input")["errors"])
    many = [{"content": f"x{i}"} for i in range(501)]
    assert_problem(api.post("/v1/memories", json={"user_id": user, "memories": many}),
                   422, "invalid-input")  # fmt: skip
    backwards = {"content": "a", "valid_from": "2024-02-01T00:00:00Z",
                 "valid_to": "2024-01-01T00:00:00Z"}  # fmt: skip
    assert_problem(api.post("/v1/memories", json={"user_id": user, "memories": [backwards]}),
                   422, "invalid-input")  # fmt: skip
    assert _page(api, user_id=user)["total"] == 2  # nothing of the bad requests was kept


def test_content_edit_reembeds_reports_collisions_and_keeps_history(
    api: TestClient, ids: dict[str, str]
) -> None:
    user = ids["user"]
    tea, bike = _add(api, user, [
        {"content": "I drink green tea every morning."},
        {"content": "I ride my bike to work."},
    ], reconcile=False)  # fmt: skip
    edited = api.patch(
        f"/v1/memories/{bike['memory_id']}",
        json={"content": "I cycle to the office on my bike.", "importance": 0.8},
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["content"] == "I cycle to the office on my bike."
    hits = api.post("/v1/memories/search", json={"user_id": user, "query": "cycle office"})
    assert hits.json()["hits"][0]["id"] == bike["memory_id"]  # the new text is what matches

    near = api.patch(f"/v1/memories/{bike['memory_id']}",
                     json={"content": "Every morning I drink green tea."})  # fmt: skip
    assert near.status_code == 200, near.text
    collisions = near.json()["collisions"]
    assert [c["memory_id"] for c in collisions] == [tea["memory_id"]]
    assert collisions[0]["relation"] == "paraphrase"
    assert _page(api, user_id=user)["total"] == 2  # reported, not merged

    twin = api.patch(f"/v1/memories/{bike['memory_id']}",
                     json={"content": "I drink green tea every morning."})  # fmt: skip
    assert tea["memory_id"] in assert_problem(twin, 409, "conflict")["detail"]

    events = api.get(f"/v1/memories/{bike['memory_id']}/history").json()["events"]
    updates = [e for e in events if e["event"] == "update"]
    assert updates[0]["old_content"] == "I ride my bike to work."
    assert updates[0]["new_content"] == "I cycle to the office on my bike."
    assert "content" in updates[0]["reason"] and "importance" in updates[0]["reason"]
    assert len(updates) == 2  # the refused edit left no trace
