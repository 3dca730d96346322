"""Long-term retrieval in one SQL statement.

Candidates come from an exact cosine scan over one user's live rows (found by the
(tenant, user_id) btree), re-ranked in the same query by

    score = w_rel * relevance + w_imp * importance + w_rec * recency
    recency = 2 ^ -(hours since last access, or since creation) / half_life

and cut by a similarity floor. Each hit carries its score parts, so a caller can see
why it came back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

_SEARCH = text(
    """
    SELECT m.id, m.kind, m.content, m.importance, m.created_at, m.session_id,
           m.source_turn_ids, s.relevance, s.recency,
           :w_rel * s.relevance + :w_imp * m.importance + :w_rec * s.recency AS score
    FROM memories m
    CROSS JOIN LATERAL (
        SELECT 1 - (m.embedding <=> CAST(:query AS vector)) AS relevance,
               power(2.0, -greatest(0, extract(epoch FROM
                   (CAST(:now AS timestamptz) - coalesce(m.last_accessed_at, m.created_at))))
                   / 3600.0 / :half_life_h) AS recency
    ) s
    WHERE m.tenant = :tenant
      AND m.user_id = :user_id
      AND m.deleted_at IS NULL
      AND m.superseded_by IS NULL
      AND m.embedding_model = :model
      AND m.created_at <= CAST(:now AS timestamptz)
      AND s.relevance >= :floor
    ORDER BY score DESC
    LIMIT :k
    """
)


@dataclass(frozen=True)
class SearchParams:
    tenant: str
    user_id: str
    query_vector: np.ndarray
    embedding_model: str
    k: int = 8
    similarity_floor: float = 0.2
    w_relevance: float = 1.0
    w_importance: float = 0.15
    w_recency: float = 0.15
    half_life_h: float = 336.0
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class MemoryHit:
    id: uuid.UUID
    kind: str
    content: str
    score: float
    relevance: float
    importance: float
    recency: float
    created_at: datetime
    session_id: str | None
    source_turn_ids: list[str]


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; exact for float32 and cheaper to build than a binary adapter."""
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _bind(params: SearchParams) -> tuple[TextClause, dict[str, Any]]:
    return _SEARCH, {
        "query": vector_literal(params.query_vector),
        "tenant": params.tenant,
        "user_id": params.user_id,
        "model": params.embedding_model,
        "k": params.k,
        "floor": params.similarity_floor,
        "w_rel": params.w_relevance,
        "w_imp": params.w_importance,
        "w_rec": params.w_recency,
        "half_life_h": params.half_life_h,
        "now": params.now,
    }


def _hit(row: Any) -> MemoryHit:
    return MemoryHit(
        id=row.id,
        kind=row.kind,
        content=row.content,
        score=float(row.score),
        relevance=float(row.relevance),
        importance=float(row.importance),
        recency=float(row.recency),
        created_at=row.created_at,
        session_id=row.session_id,
        source_turn_ids=list(row.source_turn_ids),
    )


async def search(session: AsyncSession, params: SearchParams) -> list[MemoryHit]:
    """Top-k memories for the query, best first (async; the chat path)."""
    stmt, binds = _bind(params)
    result = await session.execute(stmt, binds)
    return [_hit(r) for r in result]


def search_sync(session: Session, params: SearchParams) -> list[MemoryHit]:
    """Same query for workers, the CLI and benchmarks."""
    stmt, binds = _bind(params)
    return [_hit(r) for r in session.execute(stmt, binds)]
