"""A user's second-model vectors go with the user: `memory_embeddings` rows cascade
from their memory; a re-embed scoped to the user is deleted by the erasure."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from tests.support.reembed_factories import seed, side_rows


def test_erasing_a_user_drops_their_side_vectors(
    api: TestClient,
    make_key: Callable[..., dict[str, str]],
    sessions: sessionmaker[Session],
    tenant_sessions: sessionmaker[Session],
    ids: dict[str, str],
) -> None:
    tenant = ids["tenant"]
    seed(tenant_sessions, tenant, {"ivy": 5, "jon": 3})
    with sessions.begin() as session:  # as a re-embed's walk leaves them
        session.execute(
            text(
                "INSERT INTO memory_embeddings (memory_id, model, tenant, user_id, embedding) "
                "SELECT id, 'other-model', tenant, user_id, embedding FROM memories "
                "WHERE tenant = :t"
            ),
            {"t": tenant},
        )
        # A finished re-embed scoped to ivy names her; it goes too.
        session.execute(
            text(
                "INSERT INTO embedding_migrations (tenant, user_id, target_spec, target_model, "
                "target_dims, state, step_token, batch_size, rate_per_s) VALUES "
                "(:t, 'ivy', 'openai:m', 'm', 768, 'finished', 'x', 64, 100)"
            ),
            {"t": tenant},
        )
    assert side_rows(sessions, tenant) == 8

    erased = api.delete("/v1/users/ivy", headers=make_key(tenant, ("admin",)))
    assert erased.status_code == 200, erased.text
    assert side_rows(sessions, tenant) == 3  # jon's stay
    assert erased.json()["counts"]["reembed_runs"] == 1
    with sessions.begin() as session:
        left = session.execute(
            text("SELECT count(*) FROM embedding_migrations WHERE user_id = 'ivy' AND tenant = :t"),
            {"t": tenant},
        ).scalar_one()
    assert left == 0
