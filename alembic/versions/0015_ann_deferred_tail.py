"""A huge user's new memories wait outside their HNSW index, in a small exact tail.

Inserting a row into a per-user HNSW index searches the graph and rewrites its
neighbours' links; for a 50,000-row user that was most of a reconcile batch's time,
and it grew with the store. Reconcile now writes such a user's new rows with
`ann_deferred` set. Per-user indexes built from now on exclude those rows (their
predicate says `NOT ann_deferred`), searches read them exactly through the small
partial btree below, and a beat job clears the flag in the background, which is when
the index takes them (memwell/retrieval/ann.py).

`memory_ann_indexes.defers_new_rows` tells reconcile whether a user's index excludes
the tail; indexes built before this revision do not, and the maintenance job rebuilds
them under a new name.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: no table rewrite, existing rows read as false.
    op.add_column(
        "memories",
        sa.Column("ann_deferred", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_memories_ann_tail "
        "ON memories (tenant, user_id, embedding_model) WHERE ann_deferred"
    )
    op.add_column(
        "memory_ann_indexes",
        sa.Column(
            "defers_new_rows", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
    )


def downgrade() -> None:
    conn = op.get_bind()
    # Indexes whose predicate names the column go with it; unregister them first so
    # the older code's maintenance job builds them again its own way.
    names = conn.execute(
        sa.text("DELETE FROM memory_ann_indexes WHERE defers_new_rows RETURNING index_name")
    ).scalars().all()  # fmt: skip
    for name in names:
        op.execute(sa.text(f'DROP INDEX IF EXISTS "{name}"'))
    op.drop_column("memory_ann_indexes", "defers_new_rows")
    op.execute("DROP INDEX IF EXISTS ix_memories_ann_tail")
    op.drop_column("memories", "ann_deferred")
