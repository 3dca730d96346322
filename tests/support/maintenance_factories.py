"""Factories for the maintenance tests: rows with exactly the fields a job reads,
in an isolated database so a job's table-wide walk never touches other tests' rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.text import content_hash
from memwell.db import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.models import Memory
from memwell.local.session_services import PostgresService


@contextmanager
def isolated_database(postgres: PostgresService, name: str) -> Iterator[sessionmaker[Session]]:
    url = postgres.create_database(name)
    migrate.upgrade(url)
    engine = make_engine(url, pool_size=4)
    try:
        yield make_sessionmaker(engine)
    finally:
        engine.dispose()


def add_memory(
    sessions: sessionmaker[Session],
    *,
    tenant: str,
    user_id: str = "u",
    content: str | None = None,
    at: datetime,
    **fields: Any,
) -> uuid.UUID:
    """One memory stored at `at` (created, updated and seen then), with overrides."""
    text = content or f"memory {uuid.uuid4().hex}"
    values: dict[str, Any] = {
        "tenant": tenant,
        "user_id": user_id,
        "kind": "fact",
        "content": text,
        "content_hash": content_hash(text),
        "importance": 0.5,
        "created_at": at,
        "updated_at": at,
        "last_seen_at": at,
        **fields,
    }
    with sessions.begin() as session:
        memory_id: uuid.UUID = session.execute(
            insert(Memory).values(values).returning(Memory.id)
        ).scalar_one()
    return memory_id
