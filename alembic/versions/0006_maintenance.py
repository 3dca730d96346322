"""maintenance: turns.dispatched_at for the sweeper's claim; a tombstone index for prune.

Revision ID: 0006
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_memories_tombstones",
        "memories",
        ["deleted_at", "id"],
        unique=False,
        postgresql_where=sa.text("deleted_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_memories_tombstones",
        table_name="memories",
        postgresql_where=sa.text("deleted_at IS NOT NULL"),
    )
    op.drop_column("turns", "dispatched_at")
