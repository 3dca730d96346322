"""The API's outbox: a 202 means the turns are in Postgres; a dispatch the broker never
got is recovered by the sweeper and consolidated once; with Postgres down the API
answers 503 and acknowledges nothing. Real API, worker, Postgres and Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.main import create_app
from memwell.core.errors import ServiceUnavailable
from memwell.core.settings import Settings, get_settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import Memory, Turn
from memwell.intake.postgres_outbox import accept_turns
from memwell.intake.turns import IngestPayload, TurnIn
from memwell.local.waiting import wait_for
from memwell.local.worker_process import WorkerProcess
from memwell.maintenance.jobs import run_sweep

DEAD_BROKER = "redis://127.0.0.1:1/0"


def _statuses(db: sessionmaker[Session], tenant: str) -> dict[str, str]:
    with db() as s:
        return dict(s.execute(select(Turn.id, Turn.status).where(Turn.tenant == tenant)).all())


def test_accepted_turns_are_in_postgres_when_the_api_answers(
    api: TestClient, worker: WorkerProcess, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    tenant = get_settings().default_tenant
    turns = [{"id": f"{ids['user']}-{i}", "user_id": ids["user"], "session_id": "s",
              "content": f"I own {i} bikes."} for i in range(3)]  # fmt: skip
    response = api.post("/v1/turns", json={"turns": turns})
    assert response.status_code == 202
    with db() as s:
        stored = s.scalars(
            select(Turn.id).where(Turn.tenant == tenant, Turn.user_id == ids["user"])
        ).all()
    assert sorted(stored) == sorted(t["id"] for t in turns)  # before any worker reply
    wait_for(
        lambda: all(api.get(f"/v1/turns/{t['id']}").json()["status"] == "processed" for t in turns),
        timeout=60,
    )


def test_lost_dispatch_is_recovered_by_the_sweeper_exactly_once(
    stack_env: dict[str, str],
    worker: WorkerProcess,
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    turns = [
        TurnIn(user_id=ids["user"], session_id="s", content=f"My locker is number {i}.")
        for i in range(5)
    ]
    # The broker is unreachable: the turns are acknowledged (persisted), the send fails.
    accept_turns(db, IngestPayload(tenant=tenant, turns=turns), broker_url=DEAD_BROKER)
    assert set(_statuses(db, tenant).values()) == {"pending"}

    settings = get_settings()
    client = redis.Redis.from_url(stack_env["REDIS_URL"])
    later = datetime.now(UTC) + timedelta(seconds=settings.sweep_after_s + 1)
    report = run_sweep(db, settings, client, broker_url=stack_env["REDIS_URL"], now=later)
    client.close()
    assert report.counts["redispatched"] >= len(turns)

    wait_for(lambda: set(_statuses(db, tenant).values()) == {"processed"}, timeout=60)
    with db() as s:
        memories = s.execute(
            select(Memory.content, Memory.source_turn_ids).where(Memory.tenant == tenant)
        ).all()
    # One memory per turn (extraction rewrites the text; provenance names the turn).
    sources = sorted(i for _, ids in memories for i in ids)
    assert sources == sorted(t.id for t in turns)
    assert len({c for c, _ in memories}) == len(memories) == len(turns)


def test_postgres_down_means_not_acknowledged() -> None:
    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", pool_size=1)
    turn = TurnIn(user_id="u", session_id="s", content="hello")
    with pytest.raises(ServiceUnavailable):
        accept_turns(
            make_sessionmaker(engine),
            IngestPayload(tenant="t", turns=[turn]),
            broker_url=DEAD_BROKER,
        )
    engine.dispose()


def test_chat_turns_are_in_postgres_when_the_chat_answers(
    stack_env: dict[str, str],
    auth_headers: dict[str, str],
    db: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    settings = Settings(
        database_url=stack_env["DATABASE_URL"],
        redis_url=stack_env["REDIS_URL"],
        chat_durability="outbox",
    )
    with TestClient(create_app(settings), headers=auth_headers) as api:
        response = api.post(
            "/v1/chat",
            json={"user_id": ids["user"], "session_id": "s", "message": "I row on Sundays."},
        )
    assert response.status_code == 200, response.text
    turn_ids = response.json()["turn_ids"]
    with db() as s:
        stored = s.scalars(select(Turn.id).where(Turn.id.in_(turn_ids))).all()
    assert sorted(stored) == sorted(turn_ids)
