"""reembed: vectors of a second embedding model beside the first, and the migration's state.

`memory_embeddings` holds, per memory, the vector of a model other than the one in
`memories.embedding`: the target model's while a re-embed walks the store, the old
model's once the memory's user has switched (kept for abort until finish drops it).
Its rows go with their memory (ON DELETE CASCADE), so erasure and prune need no
change. `embedding_migrations` is one re-embed: scope, target, keyset cursor and
counters; at most one is in flight.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "memwell_app"
POLICY = "tenant_isolation"
ERASURE_POLICY = "tenant_erasure"
TENANT_MATCHES = "tenant = current_setting('memwell.tenant', true)"
IN_FLIGHT = "state IN ('running', 'paused', 'ready', 'aborting')"
STATES = "state IN ('running', 'paused', 'ready', 'aborting', 'finished', 'aborted')"


def upgrade() -> None:
    op.create_table(
        "embedding_migrations",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=True),
        sa.Column("user_id", sa.String(length=200), nullable=True),
        sa.Column("target_spec", sa.String(length=300), nullable=False),
        sa.Column("target_model", sa.String(length=128), nullable=False),
        sa.Column("target_base_url", sa.Text(), nullable=True),
        sa.Column("target_dims", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("step_token", sa.String(length=32), nullable=False),
        sa.Column("cursor_tenant", sa.String(length=128), nullable=True),
        sa.Column("cursor_user", sa.String(length=200), nullable=True),
        sa.Column("cursor_created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cursor_id", sa.UUID(), nullable=True),
        sa.Column("walked", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("total", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("embedded", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("switched_users", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("rate_per_s", sa.Float(), nullable=False),
        sa.Column("grace_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("old_dropped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            STATES,
            name=op.f("ck_embedding_migrations_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embedding_migrations")),
    )
    op.create_index(
        "uq_embedding_migrations_in_flight",
        "embedding_migrations",
        [sa.text("(true)")],
        unique=True,
        postgresql_where=sa.text(IN_FLIGHT),
    )
    op.create_table(
        "memory_embeddings",
        sa.Column("memory_id", sa.UUID(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_memory_embeddings_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("memory_id", "model", name=op.f("pk_memory_embeddings")),
    )
    op.create_index(
        "ix_memory_embeddings_user", "memory_embeddings", ["tenant", "user_id", "model"]
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON memory_embeddings TO {ROLE}")
    op.execute("ALTER TABLE memory_embeddings ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY {POLICY} ON memory_embeddings TO {ROLE} "
        f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
    )
    # Tenants read migrations (to route their searches and writes), only store-wide
    # ones or their own: a scope may name another tenant's user. They delete only
    # their own, when erasing the one user a re-embed was scoped to.
    op.execute(f"GRANT SELECT, DELETE ON embedding_migrations TO {ROLE}")
    op.execute("ALTER TABLE embedding_migrations ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY {POLICY} ON embedding_migrations FOR SELECT TO {ROLE} "
        f"USING (tenant IS NULL OR {TENANT_MATCHES})"
    )
    op.execute(
        f"CREATE POLICY {ERASURE_POLICY} ON embedding_migrations FOR DELETE TO {ROLE} "
        f"USING ({TENANT_MATCHES})"
    )


def downgrade() -> None:
    for table in ("memory_embeddings", "embedding_migrations"):
        op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
        op.execute(f"REVOKE ALL ON {table} FROM {ROLE}")
    op.execute(f"DROP POLICY IF EXISTS {ERASURE_POLICY} ON embedding_migrations")
    op.drop_index("ix_memory_embeddings_user", table_name="memory_embeddings")
    op.drop_table("memory_embeddings")
    op.drop_index("uq_embedding_migrations_in_flight", table_name="embedding_migrations")
    op.drop_table("embedding_migrations")
