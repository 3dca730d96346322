"""dropped_turns: an index on dropped_at, for prune's retention of the records.

Prune deletes the records of dropped turns older than MEMWELL_DROPPED_TURNS_RETENTION_DAYS,
oldest first and in batches; without the index every batch would scan the table.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_dropped_turns_dropped_at", "dropped_turns", ["dropped_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_dropped_turns_dropped_at", table_name="dropped_turns")
