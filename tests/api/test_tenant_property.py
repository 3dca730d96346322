"""Tenant isolation as a property (Hypothesis): random tenants, users, memories and
API calls; no call ever returns or changes another tenant's data.

Each generated case is one API call against a prepared dataset: three tenants that
share user ids and turn ids (the hardest case for a forgotten filter), with seeded
memories and turns. Checks per case: statuses of turns of other tenants read as
unknown, recalled memories all carry the caller's tenant marker, sessions and users
listed or read are the caller's own, erasure and writes touch only the caller's
tenant. At the end, every seeded row of every tenant
is checked against what that tenant itself did.

The default run is MEMWELL_PROPERTY_EXAMPLES=200 cases; the issue's 10,000:
    MEMWELL_PROPERTY_EXAMPLES=10000 pytest tests/api/test_tenant_property.py
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.core.text import content_hash
from memwell.db.models import Memory, Turn
from memwell.embeddings import build_embedder
from memwell.local.waiting import broker_idle, wait_for
from memwell.local.worker_process import WorkerProcess

EXAMPLES = int(os.environ.get("MEMWELL_PROPERTY_EXAMPLES", "200"))
MARKERS = ("TENANTALPHA", "TENANTBRAVO", "TENANTCHARLIE")
USERS = ("alice", "bob", "carol")
VICTIMS = ("victim-1", "victim-2")
TOPICS = ("green tea", "chess openings", "sailing", "sourdough bread", "jazz piano")
SHARED_TURNS = tuple(f"turn-{n}" for n in range(4))


@dataclass
class World:
    tenants: list[str]
    headers: list[dict[str, str]]
    # tenant -> turn id -> owner user id
    turns: dict[str, dict[str, str]]
    # tenant -> turn id -> user, for turns the tenant itself wrote during the run
    written: dict[str, dict[str, str]] = field(default_factory=dict)
    erased: set[tuple[str, str]] = field(default_factory=set)
    cases: int = 0
    #: for ownership checks of returned memories (extraction may rewrite a marker away)
    db: sessionmaker[Session] | None = None


def _seed(db: sessionmaker[Session], tenants: list[str]) -> dict[str, dict[str, str]]:
    embedder = build_embedder(get_settings())
    turns: dict[str, dict[str, str]] = {}
    rows: list[Memory] = []
    texts: list[tuple[str, str, str]] = []
    for t, marker in zip(tenants, MARKERS, strict=True):
        for user in USERS + VICTIMS:
            for topic in TOPICS[:3]:
                texts.append((t, user, f"{marker} note: {user} loves {topic}."))
    vectors = embedder.embed([c for _, _, c in texts])
    for (t, user, content), vector in zip(texts, vectors, strict=True):
        rows.append(
            Memory(tenant=t, user_id=user, kind="fact", content=content,
                   content_hash=content_hash(content), embedding=vector,
                   embedding_model=embedder.model_name, importance=0.5)
        )  # fmt: skip
    with db.begin() as session:
        session.add_all(rows)
        for i, t in enumerate(tenants):
            owners = {tid: USERS[(i + n) % len(USERS)] for n, tid in enumerate(SHARED_TURNS)}
            owners[f"only-{i}"] = USERS[i]
            session.add_all(_turn(t, tid, user, MARKERS[i]) for tid, user in owners.items())
            turns[t] = owners
    return turns


def _turn(tenant: str, tid: str, user: str, marker: str) -> Turn:
    from datetime import UTC, datetime

    return Turn(
        tenant=tenant, id=tid, user_id=user, session_id="seed", role="user",
        content=f"{marker} seeded turn {tid}", token_count=4,
        created_at=datetime(2024, 1, 1, tzinfo=UTC), status="processed",
    )  # fmt: skip


@pytest.fixture(scope="module")
def world(
    db: sessionmaker[Session], make_key: Callable[..., dict[str, str]], worker: WorkerProcess
) -> World:
    tag = uuid.uuid4().hex[:6]
    tenants = [f"prop-{tag}-{i}" for i in range(len(MARKERS))]
    turns = _seed(db, tenants)
    headers = [make_key(t, ("admin",)) for t in tenants]
    return World(tenants=tenants, headers=headers, turns=turns)


ALL_TURN_IDS = SHARED_TURNS + tuple(f"only-{i}" for i in range(len(MARKERS))) + ("absent",)
# Text every door takes: no control characters, surrogates or bidirectional controls.
safe_text = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cc", "Cs"),
        exclude_characters="".join(map(chr, (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))),
    ),
    max_size=40,
)  # fmt: skip
status = st.tuples(st.just("status"), st.sampled_from(ALL_TURN_IDS))
SESSION_IDS = ("seed", "w", *(f"prop-{i}" for i in range(len(MARKERS))))
# Weighted by cost: a chat embeds and calls the model, a status read is one query.
actions = st.one_of(
    status,
    status,
    st.tuples(st.just("sessions"), st.sampled_from(USERS + VICTIMS)),
    st.tuples(st.just("session"), st.sampled_from(USERS + VICTIMS), st.sampled_from(SESSION_IDS)),
    st.tuples(st.just("users"), st.integers(1, 3)),
    st.tuples(st.just("user"), st.sampled_from(USERS + VICTIMS)),
    st.tuples(st.just("chat"), st.sampled_from(USERS), st.sampled_from(TOPICS), safe_text),
    st.tuples(st.just("write"), st.sampled_from(ALL_TURN_IDS), st.sampled_from(USERS), safe_text),
    st.tuples(st.just("erase"), st.sampled_from(VICTIMS)),
    st.tuples(st.just("list"), st.sampled_from(USERS + VICTIMS)),
    st.tuples(st.just("patch"), st.integers(0, len(MARKERS) - 1), st.sampled_from(USERS)),
    st.tuples(
        st.just("transcript"), st.sampled_from(USERS + VICTIMS), st.sampled_from(SESSION_IDS)
    ),
)


def _check_status(api: TestClient, w: World, me: int, turn_id: str) -> None:
    tenant = w.tenants[me]
    body = api.get(f"/v1/turns/{turn_id}", headers=w.headers[me]).json()
    owner = w.turns[tenant].get(turn_id)
    mine = w.written.setdefault(tenant, {}).get(turn_id)
    if owner is None and mine is None:
        # Another tenant's turn with this id, or nobody's: either way, unknown.
        assert body == {"id": turn_id, "status": "unknown", "user_id": None,
                        "session_id": None, "processed_at": None, "reason": None}, body  # fmt: skip
    elif owner is None:
        # Our own write: unknown until a worker persisted it, then ours.
        assert body["status"] == "unknown" or body["user_id"] == mine, body
    else:
        assert body["user_id"] == owner and body["status"] == "processed", body


def _check_chat(api: TestClient, w: World, me: int, user: str, topic: str, noise: str) -> None:
    message = f"{MARKERS[me]} asks: what about {topic}? {noise}".strip()
    response = api.post(
        "/v1/chat",
        json={"user_id": user, "session_id": f"prop-{me}", "message": message},
        headers=w.headers[me],
    )
    assert response.status_code == 200, response.text
    memories = response.json()["memories"]
    if memories and w.db is not None:
        with w.db() as session:
            owners = session.execute(
                select(Memory.tenant, Memory.user_id).where(
                    Memory.id.in_([m["id"] for m in memories])
                )
            ).all()
        assert set(owners) == {(w.tenants[me], user)}, (w.tenants[me], user, owners)
    for memory in memories:
        for other in set(MARKERS) - {MARKERS[me]}:
            assert other not in memory["content"]


def _check_write(api: TestClient, w: World, me: int, turn_id: str, user: str, text: str) -> None:
    turn = {"id": turn_id, "user_id": user, "session_id": "w", "content": f"{MARKERS[me]} {text}x"}
    response = api.post("/v1/turns", json={"turns": [turn]}, headers=w.headers[me])
    assert response.status_code == 202, response.text
    if turn_id not in w.turns[w.tenants[me]]:
        # Ids are idempotency keys: the first write of an id is the one that stays.
        w.written.setdefault(w.tenants[me], {}).setdefault(turn_id, user)


def _check_erase(api: TestClient, w: World, me: int, victim: str) -> None:
    response = api.delete(f"/v1/users/{victim}", headers=w.headers[me])
    assert response.status_code == 200, response.text
    assert response.json()["tenant"] == w.tenants[me]
    w.erased.add((w.tenants[me], victim))


def _own_sessions(me: int) -> set[str]:
    """The sessions tenant `me` can have: its chats' and its writes' (seeded turns have
    no session row)."""
    return {f"prop-{me}", "w"}


def _check_sessions(api: TestClient, w: World, me: int, user: str) -> None:
    response = api.get("/v1/sessions", params={"user_id": user}, headers=w.headers[me])
    assert response.status_code == 200, response.text
    assert {s["id"] for s in response.json()["sessions"]} <= _own_sessions(me)


def _check_session(api: TestClient, w: World, me: int, user: str, session_id: str) -> None:
    tenant = w.tenants[me]
    response = api.get(
        f"/v1/sessions/{session_id}", params={"user_id": user}, headers=w.headers[me]
    )
    if session_id == "seed":
        # Seeded turns never change: exactly this tenant's turns of this user.
        seeded = {tid for tid, owner in w.turns[tenant].items() if owner == user}
        if not seeded:
            assert response.status_code == 404, response.text
        else:
            assert set(response.json()["turn_ids"]) == seeded, response.text
    elif session_id not in _own_sessions(me):
        # Another tenant's chat session with this very id: not ours to see.
        assert response.status_code == 404, response.text
    elif response.status_code == 200:
        body = response.json()
        if session_id == "w":
            mine = {tid for tid, u in w.written.get(tenant, {}).items() if u == user}
            assert set(body["turn_ids"]) <= mine, (body, mine)
        for turn in body["buffer"]["turns"]:
            assert not [m for m in MARKERS if m != MARKERS[me] and m in turn["content"]]
    else:
        assert response.status_code == 404, response.text


def _check_transcript(api: TestClient, w: World, me: int, user: str, session_id: str) -> None:
    response = api.get(
        "/v1/turns", params={"user_id": user, "session_id": session_id}, headers=w.headers[me]
    )
    assert response.status_code == 200, response.text
    turns = response.json()["turns"]
    for turn in turns:
        assert not [m for m in MARKERS if m != MARKERS[me] and m in turn["content"]]
    if session_id == "seed":
        seeded = {tid for tid, owner in w.turns[w.tenants[me]].items() if owner == user}
        assert {t["turn_id"] for t in turns} == seeded, turns


def _check_users(api: TestClient, w: World, me: int, limit: int) -> None:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        response = api.get("/v1/users", params=params, headers=w.headers[me])
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [u["user_id"] for u in page["users"]]
        assert all(u["session_count"] <= len(_own_sessions(me)) for u in page["users"])
        if (cursor := page["next_cursor"]) is None:
            break
    assert len(seen) == len(set(seen))
    # An erased victim is gone here, though other tenants still hold a user of that id.
    assert set(seen) <= set(USERS + VICTIMS) - {v for t, v in w.erased if t == w.tenants[me]}


def _check_user(api: TestClient, w: World, me: int, user: str) -> None:
    response = api.get(f"/v1/users/{user}", headers=w.headers[me])
    if (w.tenants[me], user) in w.erased:
        assert response.status_code == 404, response.text
    else:
        assert response.status_code == 200, response.text
        assert response.json()["session_count"] <= len(_own_sessions(me))


def _check_list(api: TestClient, w: World, me: int, user: str) -> None:
    response = api.get(
        "/v1/memories",
        params={"user_id": user, "include": ["deleted", "superseded"], "limit": 500},
        headers=w.headers[me],
    )
    assert response.status_code == 200, response.text
    listed = response.json()["memories"]
    assert response.json()["total"] == len(listed)
    if listed and w.db is not None:
        with w.db() as session:
            owners = session.execute(
                select(Memory.tenant, Memory.user_id).where(
                    Memory.id.in_([m["id"] for m in listed])
                )
            ).all()
        assert set(owners) == {(w.tenants[me], user)}, owners


def _check_patch(api: TestClient, w: World, me: int, owner: int, user: str) -> None:
    """Edit a memory of tenant `owner` as tenant `me`: only the owner may."""
    assert w.db is not None
    with w.db() as session:
        target = session.scalar(
            select(Memory.id).where(
                Memory.tenant == w.tenants[owner], Memory.user_id == user,
                Memory.deleted_at.is_(None),
            ).limit(1)
        )  # fmt: skip
    if target is None:
        return
    response = api.patch(f"/v1/memories/{target}", json={"importance": 0.42},
                         headers=w.headers[me])  # fmt: skip
    assert response.status_code == (200 if owner == me else 404), response.text


def _verify_rows(db: sessionmaker[Session], w: World) -> None:
    """Every seeded row of every tenant is as that tenant's own calls left it."""
    with db() as session:
        for i, tenant in enumerate(w.tenants):
            for tid, owner in w.turns[tenant].items():
                row = session.get(Turn, (tenant, tid))
                assert row is not None and row.user_id == owner
                assert row.content == f"{MARKERS[i]} seeded turn {tid}"
            for user in USERS + VICTIMS:
                contents = session.scalars(
                    select(Memory.content).where(Memory.tenant == tenant, Memory.user_id == user)
                ).all()
                if (tenant, user) in w.erased:
                    assert contents == []
                else:
                    # The seeded memories are still there, and no memory of this
                    # tenant carries another tenant's words (chats add memories of their
                    # own, whose text extraction may cut away this tenant's marker).
                    others = set(MARKERS) - {MARKERS[i]}
                    assert sum(MARKERS[i] in c for c in contents) >= 3
                    assert not [c for c in contents if any(o in c for o in others)]
            for tid, user in w.written.get(tenant, {}).items():
                row = session.get(Turn, (tenant, tid))
                assert row is not None and row.user_id == user and MARKERS[i] in row.content


def test_no_call_reaches_another_tenant(
    api: TestClient, world: World, db: sessionmaker[Session], stack_env: dict[str, str]
) -> None:
    world.db = db

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(me=st.integers(0, len(MARKERS) - 1), action=actions)
    def case(me: int, action: tuple[Any, ...]) -> None:
        world.cases += 1
        if EXAMPLES >= 1000 and world.cases % 500 == 0:
            print(f"  {world.cases}/{EXAMPLES} cases", flush=True)
        kind, *args = action
        {
            "status": _check_status,
            "chat": _check_chat,
            "write": _check_write,
            "erase": _check_erase,
            "transcript": _check_transcript,
            "sessions": _check_sessions,
            "session": _check_session,
            "users": _check_users,
            "user": _check_user,
            "list": _check_list,
            "patch": _check_patch,
        }[kind](api, world, me, *args)

    case()
    print(f"\ntenant isolation property: {world.cases} generated cases run")
    assert world.cases >= EXAMPLES * 0.9  # Hypothesis may stop early on a tiny space
    wait_for(lambda: broker_idle(stack_env["REDIS_URL"]), timeout=120, what="queues to drain")
    _verify_rows(db, world)
