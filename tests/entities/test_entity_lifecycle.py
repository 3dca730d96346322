"""Entity memory end to end: turns consolidated by a real worker fill the entity tables;
the export carries the user's entities and relations; erasing the user deletes every
entity row and counts them in the receipt."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import memwell
from memwell.db.models import Entity, EntityAlias, EntityRelation, MemoryEntity, Turn
from memwell.local.cli import main
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess

T0 = datetime(2024, 5, 1, 18, 0, tzinfo=UTC)
SAID = [
    "I moved to Berlin for a job at Zalando last spring.",
    "My sister Ana lives in Boston and she loves the Red Sox.",
    "I adopted a puppy named Biscuit two weeks ago.",
    "I moved to Lisbon last month, the light here is amazing.",
]
TABLES: list[Any] = [Entity, EntityAlias, MemoryEntity, EntityRelation]


def _counts(db: sessionmaker[Session], tenant: str, user: str) -> dict[str, int]:
    with db() as session:
        return {
            t.__tablename__: int(
                session.scalar(
                    select(func.count()).select_from(t).where(t.tenant == tenant, t.user_id == user)
                )
                or 0
            )
            for t in TABLES
        }


def test_consolidated_turns_export_and_erase_with_their_entities(
    worker: WorkerProcess,
    api: TestClient,
    stack_env: dict[str, str],
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant, user = "default", ids["user"]
    turn_ids = memwell.enqueue_turns(
        [
            {"user_id": user, "session_id": ids["session"], "content": text,
             "created_at": (T0 + timedelta(days=30 * i)).isoformat(),
             "metadata": {"speaker": "Ada"}}
            for i, text in enumerate(SAID)
        ],
        tenant=tenant,
    )  # fmt: skip

    def processed() -> bool:
        with db() as session:
            statuses = session.scalars(
                select(Turn.status).where(Turn.tenant == tenant, Turn.id.in_(turn_ids))
            ).all()
        return sorted(statuses) == ["processed"] * len(SAID)

    wait_for(processed, timeout=120, what="consolidation")
    with db() as session:
        keys = dict(
            session.execute(
                select(Entity.key, Entity.id).where(Entity.tenant == tenant, Entity.user_id == user)
            ).all()
        )
        lives = session.scalars(
            select(EntityRelation)
            .where(EntityRelation.subject_id == keys["ada"], EntityRelation.relation == "lives_in")
            .order_by(EntityRelation.valid_from)
        ).all()
    assert {"ada", "ana", "boston", "biscuit", "berlin", "lisbon"} <= set(keys)
    assert [(r.object_id, r.superseded_by is None) for r in lives] == [
        (keys["berlin"], False),
        (keys["lisbon"], True),
    ]
    assert lives[0].superseded_by == lives[1].id and lives[0].valid_to == lives[1].valid_from

    result = CliRunner().invoke(main, ["export", "--user", user], env=stack_env)
    assert result.exit_code == 0, result.output
    header, *lines = [json.loads(line) for line in result.stdout.splitlines()]
    entities = {e["key"]: e for e in lines if e.get("record") == "entity"}
    assert header["entities"] == len(entities) == len(keys)
    ada = entities["ada"]
    assert ada["kind"] == "person" and "ada" in ada["aliases"]
    moves = [
        (r["object"], r["valid_to"] is None)
        for r in ada["relations"]
        if r["relation"] == "lives_in"
    ]
    assert moves == [("berlin", False), ("lisbon", True)]  # history included
    assert ("ana", "sibling") in {(r["object"], r["relation"]) for r in ada["relations"]}

    before = _counts(db, tenant, user)
    assert all(before.values()), before
    response = api.delete(f"/v1/users/{user}")
    assert response.status_code == 200, response.text
    receipt = response.json()["counts"]
    assert {table: receipt[table] for table in before} == before
    assert _counts(db, tenant, user) == dict.fromkeys(before, 0)
