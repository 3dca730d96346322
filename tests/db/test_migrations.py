"""Alembic is the only way the schema changes: it goes up and down, and it agrees
with the ORM models."""

from __future__ import annotations

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from pgvector.sqlalchemy import Vector
from sqlalchemy import create_engine, inspect, pool

from memwell.db import migrate
from memwell.db.driver import libpq_url
from memwell.db.models import Base
from memwell.local.session_services import PostgresService

TABLES = {
    "turns",
    "memories",
    "memory_events",
    "sessions",
    "dead_letters",
    "llm_usage",
    "memory_ann_indexes",
    "api_keys",
    "user_erasures",
    "memory_embeddings",
    "embedding_migrations",
    "entities",
    "entity_aliases",
    "memory_entities",
    "entity_relations",
    "dropped_turns",
    "dead_letters_not_kept",
}
# Tables of the operator, not of a tenant: nothing in them is a tenant's.
RLS_TABLES = TABLES - {"api_keys", "dead_letters_not_kept"}


def _rls_tables(url: str) -> set[str]:
    """Tables with row-level security on and a policy for the app role."""
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_policy p ON p.polrelid = c.oid "
            "WHERE c.relrowsecurity AND p.polname = 'tenant_isolation'"
        ).fetchall()
    return {r[0] for r in rows}


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _has_vector_extension(url: str) -> bool:
    with psycopg.connect(libpq_url(url)) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
            is not None
        )


def test_upgrade_downgrade_upgrade(postgres: PostgresService, database_url: str) -> None:
    url = postgres.create_database("memwell_migrations_updown")
    migrate.upgrade(url)
    assert _tables(url) == TABLES
    assert _rls_tables(url) == RLS_TABLES
    assert _has_vector_extension(url)
    # The role is cluster-wide and the test database still uses it: the downgrade
    # must neither fail nor drop it from under that database.
    migrate.downgrade(url, "0001")
    assert _rls_tables(url) == set()
    assert _tables(url) == TABLES - {
        "api_keys",
        "user_erasures",
        "llm_usage",
        "memory_ann_indexes",
        "memory_embeddings",
        "embedding_migrations",
        "entities",
        "entity_aliases",
        "memory_entities",
        "entity_relations",
        "dropped_turns",
        "dead_letters_not_kept",
    }
    with psycopg.connect(libpq_url(url)) as conn:
        assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'memwell_app'").fetchone()
    migrate.upgrade(url)
    assert _rls_tables(url) == RLS_TABLES
    migrate.downgrade(url, "base")
    assert _tables(url) == set()
    assert not _has_vector_extension(url)
    migrate.upgrade(url)
    assert _tables(url) == TABLES


def test_models_match_migrations(postgres: PostgresService) -> None:
    url = postgres.create_database("memwell_migrations_diff")
    migrate.upgrade(url)
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        conn.dialect.ischema_names["vector"] = Vector
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"


def test_no_global_ann_index_on_memories(database_url: str) -> None:
    engine = create_engine(database_url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        indexes = inspect(conn).get_indexes("memories")
    engine.dispose()
    assert all("embedding" not in (ix.get("column_names") or []) for ix in indexes)
    assert any(ix["column_names"][:2] == ["tenant", "user_id"] for ix in indexes)
