"""`ingest_turns` retries a transient failure and never dead-letters it: its payload
exists nowhere but in the broker. Among them, the broker refusing the consolidate
dispatch, which Celery's producer raises as Kombu's OperationalError (not a Redis
ConnectionError): it used to leave a dead letter during a Redis outage.

The task runs in this process (Celery's eager `apply`), on the session's Postgres;
the failing dependency is replaced by one that raises what the outage raises, and
the retry is recorded instead of re-run (an eager retry runs at once, forever)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import kombu.exceptions
import pytest
import redis.exceptions
import sqlalchemy.exc
from celery.exceptions import Retry
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import DeadLetter, Turn
from memwell.intake.turns import IngestPayload, TurnIn


def _refusing(exc: BaseException) -> Callable[..., Any]:
    def fail(*_: Any, **__: Any) -> Any:
        raise exc

    return fail


OUTAGES = {
    "broker refuses the dispatch": (
        "send_consolidate",
        kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:1. Refused."),
    ),
    "redis connection lost": (
        "send_consolidate",
        redis.exceptions.ConnectionError("Connection closed by server."),
    ),
    "postgres away": (
        "persist_turns",
        sqlalchemy.exc.OperationalError("INSERT", {}, Exception("server closed the connection")),
    ),
}


def _count(db: sessionmaker[Session], model: type[Any], tenant: str) -> int:
    with db() as session:
        return int(
            session.scalar(select(func.count()).select_from(model).where(model.tenant == tenant))
            or 0
        )


@pytest.mark.parametrize("outage", sorted(OUTAGES))
def test_ingest_retries_a_transient_error_instead_of_dead_lettering(
    outage: str,
    stack_env: dict[str, str],
    db: sessionmaker[Session],
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker import tasks

    target, exc = OUTAGES[outage]
    monkeypatch.setattr(tasks, target, _refusing(exc))
    retried: list[BaseException | None] = []

    def record_retry(exc: BaseException | None = None, **_: Any) -> Retry:
        retried.append(exc)
        return Retry(exc=exc, when=0)

    monkeypatch.setattr(tasks.ingest_turns, "retry", record_retry)
    turn = TurnIn(
        user_id=ids["user"],
        session_id=ids["session"],
        role="user",
        content="I water the plants on Sundays.",
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
    )
    payload = IngestPayload(tenant=ids["tenant"], turns=[turn]).model_dump(mode="json")

    result = tasks.ingest_turns.apply(kwargs={"payload": payload})

    assert result.state == "RETRY", result.traceback
    assert retried == [exc]
    assert _count(db, DeadLetter, ids["tenant"]) == 0
    # Persisted before the dispatch failed, or not at all when Postgres was away.
    assert _count(db, Turn, ids["tenant"]) == (0 if target == "persist_turns" else 1)
