"""One user's switch to the target model, and back: each one transaction.

Switch: every embedded row of the user takes its target vector from
`memory_embeddings`, and its previous vector takes that place (abort restores it,
finish drops it). Rows the walk has not embedded (written after the cursor passed
them by a writer that did not dual-write) are embedded first, in the same
transaction. A user big enough for an ANN index gets the target's index before the
switch, so their searches never fall back to a full scan after it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from memwell.embeddings import Embedder
from memwell.pipeline.user_lock import lock_users
from memwell.retrieval.ann import build_user_index
from memwell.retrieval.search import vector_literal

_MISSING = text(
    """
    SELECT m.id, m.content FROM memories m
    WHERE m.tenant = :t AND m.user_id = :u AND m.embedding IS NOT NULL
      AND m.embedding_model IS DISTINCT FROM :target
      AND NOT EXISTS (SELECT 1 FROM memory_embeddings e
                      WHERE e.memory_id = m.id AND e.model = :target)
    """
)

_INSERT_SIDE = text(
    """
    INSERT INTO memory_embeddings (memory_id, model, tenant, user_id, embedding)
    SELECT id, :model, :t, :u, vec
    FROM unnest(CAST(:ids AS uuid[]), CAST(:vecs AS vector[])) AS x(id, vec)
    ON CONFLICT (memory_id, model) DO UPDATE SET embedding = EXCLUDED.embedding
    """
)

# The previous vectors move aside (keyed by their model), then the target's take
# their place, then the target's copies go: three statements, one transaction.
_KEEP_OLD = text(
    """
    INSERT INTO memory_embeddings (memory_id, model, tenant, user_id, embedding)
    SELECT m.id, coalesce(m.embedding_model, 'unknown'), m.tenant, m.user_id, m.embedding
    FROM memories m JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = :target
    WHERE m.tenant = :t AND m.user_id = :u AND m.embedding IS NOT NULL
      AND m.embedding_model IS DISTINCT FROM :target
    ON CONFLICT (memory_id, model) DO UPDATE SET embedding = EXCLUDED.embedding
    """
)
_TAKE_TARGET = text(
    """
    UPDATE memories m SET embedding = e.embedding, embedding_model = :target
    FROM memory_embeddings e
    WHERE e.memory_id = m.id AND e.model = :target
      AND m.tenant = :t AND m.user_id = :u AND m.embedding IS NOT NULL
      AND m.embedding_model IS DISTINCT FROM :target
    """
)
_DROP_TARGET_COPIES = text(
    "DELETE FROM memory_embeddings WHERE tenant = :t AND user_id = :u AND model = :target"
)

# Abort: the previous vector (any model but the target's) comes back.
_RESTORE = text(
    """
    UPDATE memories m SET embedding = e.embedding, embedding_model = e.model
    FROM memory_embeddings e
    WHERE e.memory_id = m.id AND e.model <> :target
      AND m.tenant = :t AND m.user_id = :u AND m.embedding_model = :target
    """
)
_DROP_USER_SIDE = text("DELETE FROM memory_embeddings WHERE tenant = :t AND user_id = :u")

_USER_ROWS = text(
    "SELECT count(*) FROM memories WHERE tenant = :t AND user_id = :u "
    "AND embedding IS NOT NULL AND deleted_at IS NULL"
)


def embed_missing(
    session: Session, embedder: Embedder, *, tenant: str, user_id: str, batch: int = 256
) -> int:
    """Give every embedded row of the user a target vector; returns how many it made."""
    params = {"t": tenant, "u": user_id, "target": embedder.model_name}
    rows = session.execute(_MISSING, params).all()
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        vectors = embedder.embed([r.content for r in chunk])
        store_side(session, embedder.model_name, tenant, user_id, [r.id for r in chunk], vectors)
    return len(rows)


def store_side(
    session: Session, model: str, tenant: str, user_id: str, ids: list[Any], vectors: Any
) -> None:
    session.execute(
        _INSERT_SIDE,
        {
            "model": model,
            "t": tenant,
            "u": user_id,
            "ids": ids,
            "vecs": [vector_literal(v) for v in vectors],
        },
    )


def ensure_target_index(
    engine: Engine, *, tenant: str, user_id: str, model: str, dims: int, threshold: int
) -> bool:
    """Build the target's per-user ANN index first when the user is that big."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        rows = int(conn.execute(_USER_ROWS, {"t": tenant, "u": user_id}).scalar_one())
        if rows < threshold:
            return False
        build_user_index(conn, tenant=tenant, user_id=user_id, model=model, dims=dims, rows=rows)
        return True


def switch_user(session: Session, embedder: Embedder, *, tenant: str, user_id: str) -> int:
    """Move the user to the target model; returns rows switched (0: already were)."""
    lock_users(session, {(tenant, user_id)})
    embed_missing(session, embedder, tenant=tenant, user_id=user_id)
    params = {"t": tenant, "u": user_id, "target": embedder.model_name}
    session.execute(_KEEP_OLD, params)
    switched = session.execute(_TAKE_TARGET, params).rowcount  # type: ignore[attr-defined]
    session.execute(_DROP_TARGET_COPIES, params)
    return int(switched)


def switch_back_user(session: Session, *, target: str, tenant: str, user_id: str) -> int:
    """Restore the user's previous vectors and drop every side vector of theirs."""
    lock_users(session, {(tenant, user_id)})
    params = {"t": tenant, "u": user_id, "target": target}
    restored = session.execute(_RESTORE, params).rowcount  # type: ignore[attr-defined]
    session.execute(_DROP_USER_SIDE, params)
    return int(restored)
