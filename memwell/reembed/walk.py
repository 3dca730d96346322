"""The walk: one batch of the keyset cursor, and the users it completes.

A batch reads the next rows after the cursor in (tenant, user_id, created_at, id)
order (the per-user btree's), embeds those without a target vector, and stores the
vectors and the new cursor in one transaction that also holds the migration's row
lock: a killed worker's batch is redone whole, and two deliveries of a step cannot
interleave. Users the cursor has moved past are then switched, each in its own
transaction (memwell/reembed/switch.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from memwell.db.models import EmbeddingMigration
from memwell.embeddings import Embedder
from memwell.reembed.scope import scope_sql
from memwell.retrieval.search import vector_literal

User = tuple[str, str]

_NEXT = """
    SELECT m.id, m.tenant, m.user_id, m.created_at, m.content,
           (m.embedding_model = :target OR EXISTS (
              SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id AND e.model = :target
           )) AS has_target
    FROM memories m
    WHERE m.embedding IS NOT NULL{scope}{after}
    ORDER BY m.tenant, m.user_id, m.created_at, m.id
    LIMIT :n
"""
_AFTER = " AND (m.tenant, m.user_id, m.created_at, m.id) > (:ct, :cu, :cc, :ci)"

_STORE = text(
    """
    INSERT INTO memory_embeddings (memory_id, model, tenant, user_id, embedding)
    SELECT id, :model, t, u, vec
    FROM unnest(CAST(:ids AS uuid[]), CAST(:tenants AS text[]), CAST(:users AS text[]),
                CAST(:vecs AS vector[])) AS x(id, t, u, vec)
    ON CONFLICT (memory_id, model) DO UPDATE SET embedding = EXCLUDED.embedding
    """
)


@dataclass
class BatchResult:
    rows: int = 0
    embedded: int = 0
    #: users the cursor has passed: every row of theirs has a target vector
    completed: list[User] = field(default_factory=list)


def lock_migration(session: Session, migration_id: int) -> EmbeddingMigration | None:
    return session.execute(
        select(EmbeddingMigration).where(EmbeddingMigration.id == migration_id).with_for_update()
    ).scalar_one_or_none()


def walk_batch(session: Session, m: EmbeddingMigration, embedder: Embedder) -> BatchResult:
    """One batch, inside the caller's transaction (which holds `m` locked)."""
    scope, params = scope_sql(m)
    after = ""
    if m.cursor_tenant is not None:
        after = _AFTER
        params |= {
            "ct": m.cursor_tenant,
            "cu": m.cursor_user,
            "cc": m.cursor_created_at,
            "ci": m.cursor_id,
        }
    params |= {"target": m.target_model, "n": m.batch_size}
    rows = session.execute(text(_NEXT.format(scope=scope, after=after)), params).all()
    result = BatchResult(rows=len(rows))
    previous = (m.cursor_tenant, m.cursor_user) if m.cursor_tenant is not None else None
    if not rows:
        m.walked = True
        if previous is not None:
            result.completed.append((previous[0], str(previous[1])))
        return result
    need = [r for r in rows if not r.has_target]
    if need:
        vectors = embedder.embed([r.content for r in need])
        session.execute(
            _STORE,
            {
                "model": m.target_model,
                "ids": [r.id for r in need],
                "tenants": [r.tenant for r in need],
                "users": [r.user_id for r in need],
                "vecs": [vector_literal(v) for v in vectors],
            },
        )
    last = rows[-1]
    m.cursor_tenant, m.cursor_user = last.tenant, last.user_id
    m.cursor_created_at, m.cursor_id = last.created_at, last.id
    m.embedded += len(rows)
    m.updated_at = func.now()
    m.error = None
    result.embedded = len(need)
    result.completed = _completed(previous, [(r.tenant, r.user_id) for r in rows])
    return result


def _completed(previous: Any, users: list[User]) -> list[User]:
    """Users before the batch's last: the cursor will not see them again."""
    seen: list[User] = []
    if previous is not None and tuple(previous) != users[0]:
        seen.append((previous[0], previous[1]))
    for u in users:
        if not seen or seen[-1] != u:
            seen.append(u)
    return [u for u in seen if u != users[-1]]


def stragglers(
    sessions: sessionmaker[Session], m: EmbeddingMigration, *, limit: int = 50
) -> list[User]:
    """Users in scope with rows still on another model (written after the cursor
    passed them without a target vector, or completed by a batch whose switch a kill
    interrupted)."""
    scope, params = scope_sql(m)
    with sessions() as session:
        rows = session.execute(
            text(
                "SELECT DISTINCT m.tenant, m.user_id FROM memories m "
                "WHERE m.embedding IS NOT NULL AND m.embedding_model IS DISTINCT FROM :target"
                f"{scope} LIMIT :limit"
            ),
            params | {"target": m.target_model, "limit": limit},
        ).all()
    return [(r[0], r[1]) for r in rows]


def switched_back_pending(
    sessions: sessionmaker[Session], m: EmbeddingMigration, *, limit: int = 50
) -> list[User]:
    """Abort: users in scope with rows on the target model."""
    scope, params = scope_sql(m)
    with sessions() as session:
        rows = session.execute(
            text(
                "SELECT DISTINCT m.tenant, m.user_id FROM memories m "
                f"WHERE m.embedding_model = :target{scope} LIMIT :limit"
            ),
            params | {"target": m.target_model, "limit": limit},
        ).all()
    return [(r[0], r[1]) for r in rows]
