"""pending turns by user: the index a consolidate worker claims a whole user through.

Workers claim every pending turn of a user at once, in arrival order, so no two
workers ever hold the same user (memwell/pipeline/claim.py). That needs two reads:
which users have pending turns (oldest first), and one user's pending turns in seq
order. A partial index holds only pending rows, so it stays as small as the backlog.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_turns_pending_by_user "
        "ON turns (tenant, user_id, seq) WHERE status = 'pending'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_turns_pending_by_user")
