"""retrieval: registry of per-user ANN indexes.

The indexes themselves (partial HNSW on embedding::vector(d) for one tenant, user and
model) are created and dropped at run time by the ANN maintenance job; this table
tells the query path which users have one. Downgrade drops any such index first.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_ann_indexes",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("embedding_model", sa.String(length=128), nullable=False),
        sa.Column("index_name", sa.String(length=63), nullable=False),
        sa.Column("dims", sa.Integer(), nullable=False),
        sa.Column("rows_at_build", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint(
            "tenant", "user_id", "embedding_model", name=op.f("pk_memory_ann_indexes")
        ),
        sa.UniqueConstraint("index_name", name=op.f("uq_memory_ann_indexes_index_name")),
    )


def downgrade() -> None:
    conn = op.get_bind()
    names = conn.execute(sa.text("SELECT index_name FROM memory_ann_indexes")).scalars().all()
    for name in names:
        op.execute(sa.text(f'DROP INDEX IF EXISTS "{name}"'))
    op.drop_table("memory_ann_indexes")
