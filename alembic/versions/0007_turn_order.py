"""turn order: turns.seq, the order turns were stored in.

Event times tie within a session (a chat exchange, or an import that dates every turn
by its session), so extraction cannot tell which turn a reply answers from
created_at alone. An identity column breaks the tie in arrival order.

Revision ID: 0007
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "turns",
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("turns", "seq")
