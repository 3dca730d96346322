"""Memories for re-embed tests, written through the one write path, and the store's
state a re-embed must leave alone or move (per tenant)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.db.tenancy import tenant_transaction
from memwell.embeddings import Embedder, build_embedder
from memwell.pipeline.candidate import Candidate
from memwell.pipeline.reconcile import lock_users
from memwell.pipeline.writes import write_memories
from memwell.reembed.specs import TargetSpec, build_target_embedder, parse_spec

TARGET_DIMS = 768
TARGET = "openai:fake-embed-768"
LOCAL = "all-MiniLM-L6-v2"
ANN_THRESHOLD = 1000  # the smallest the settings allow: one user of the tests reaches it
WORDS = ("tea", "chess", "lisbon", "violin", "kayak", "ramen", "jazz", "hiking", "tulips")


def fact(user_id: str, i: int) -> str:
    return f"{user_id} note {i}: enjoys {WORDS[i % len(WORDS)]} and {WORDS[(i * 7 + 3) % 9]}"


def write(
    tenant_sessions: sessionmaker[Session],
    *,
    tenant: str,
    user_id: str,
    contents: list[str],
    vectors: np.ndarray,
    model: str,
) -> None:
    now = datetime.now(UTC)
    candidates = [
        Candidate(
            tenant=tenant,
            user_id=user_id,
            session_id="s",
            kind="fact",
            content=c,
            importance=0.5,
            event_time=now,
            source_turn_ids=[],
        )
        for c in contents
    ]
    with tenant_transaction(tenant_sessions, tenant) as session:
        lock_users(session, {(tenant, user_id)})
        write_memories(session, candidates, vectors, model)


def random_unit(n: int, dims: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def snapshot(sessions: sessionmaker[Session], tenant: str) -> dict[Any, tuple[Any, ...]]:
    """id -> (user, content, model, vector as text): what abort must give back."""
    with sessions() as session:
        rows = session.execute(
            text(
                "SELECT id, user_id, content, embedding_model, embedding::text FROM memories "
                "WHERE tenant = :t"
            ),
            {"t": tenant},
        ).all()
    return {r[0]: tuple(r[1:]) for r in rows}


def side_rows(sessions: sessionmaker[Session], tenant: str) -> int:
    with sessions() as session:
        return int(
            session.execute(
                text("SELECT count(*) FROM memory_embeddings WHERE tenant = :t"), {"t": tenant}
            ).scalar_one()
        )


def models_of(sessions: sessionmaker[Session], tenant: str) -> dict[tuple[str, int], int]:
    """(model, dims) -> rows, over the tenant's memories."""
    with sessions() as session:
        rows = session.execute(
            text(
                "SELECT embedding_model, vector_dims(embedding), count(*) FROM memories "
                "WHERE tenant = :t GROUP BY 1, 2"
            ),
            {"t": tenant},
        ).all()
    return {(r[0], r[1]): r[2] for r in rows}


def seed(tenant_sessions: sessionmaker[Session], tenant: str, users: dict[str, int]) -> None:
    """`users[u]` memories for each user u, with the local model's vectors (random ones
    for a user big enough for an ANN index: their vectors need not be MiniLM's)."""
    local = build_embedder(get_settings())
    for user_id, n in users.items():
        contents = [fact(user_id, i) for i in range(n)]
        if n >= ANN_THRESHOLD:
            vectors = random_unit(n, local.dimensions, seed=n)
        else:
            vectors = local.embed(contents)
        write(tenant_sessions, tenant=tenant, user_id=user_id, contents=contents,
              vectors=vectors, model=local.model_name)  # fmt: skip


def fake_target(base_url: str) -> tuple[TargetSpec, Embedder]:
    """The tests' second model: the fake endpoint's 768-d embeddings."""
    spec = parse_spec(TARGET, base_url=base_url)
    return spec, build_target_embedder(get_settings(), spec)
