"""Hand-made memories with chosen embeddings, inserted straight into Postgres.

`unit(cos)` builds a vector whose cosine with `QUERY` is exactly `cos`, so a test can
state the similarity it expects instead of trusting an embedding model.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import insert
from sqlalchemy.orm import Session

from memwell.core.settings import Settings
from memwell.core.text import content_hash
from memwell.db.models import Memory
from memwell.retrieval.search import SearchParams, params_from_settings

DIMS = 8
MODEL = "test-8d"
QUERY = np.eye(DIMS, dtype=np.float32)[0]
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def unit(cos: float, axis: int = 1) -> np.ndarray:
    """A unit vector at cosine `cos` from QUERY, turned towards `axis`."""
    v = np.zeros(DIMS, dtype=np.float32)
    v[0] = cos
    v[axis] = math.sqrt(max(0.0, 1.0 - cos * cos))
    return v


def add_memory(
    session: Session,
    *,
    tenant: str,
    user_id: str,
    content: str,
    embedding: np.ndarray,
    created_at: datetime = NOW,
    importance: float = 0.5,
    kind: str = "fact",
    model: str = MODEL,
    **columns: Any,
) -> uuid.UUID:
    """Insert one memory row and return its id (the caller's transaction commits)."""
    values: dict[str, Any] = {
        "tenant": tenant,
        "user_id": user_id,
        "kind": kind,
        "content": content,
        "content_hash": content_hash(content),
        "embedding": embedding,
        "embedding_model": model,
        "importance": importance,
        "created_at": created_at,
        "updated_at": created_at,
        "source_turn_ids": columns.pop("source_turn_ids", [f"turn-{uuid.uuid4().hex[:8]}"]),
        **columns,
    }
    memory_id: uuid.UUID = session.execute(
        insert(Memory).values(**values).returning(Memory.id)
    ).scalar_one()
    return memory_id


def search_params(*, tenant: str, user_id: str, **fields: Any) -> SearchParams:
    """A search as the service builds it from the shipped settings, on QUERY and MODEL
    at NOW, with `fields` set as given."""
    base = params_from_settings(
        Settings(),
        tenant=tenant,
        user_id=user_id,
        query_vector=fields.pop("query_vector", QUERY),
        embedding_model=fields.pop("embedding_model", MODEL),
    )
    return replace(base, now=fields.pop("now", NOW), **fields)
