"""Dead letters of unreadable messages, bounded: an index to count the open ones, and
a count of those not kept.

A worker keeps a message it cannot read as a dead letter with its raw bytes. Whole and
unbounded, a 100 MB item became a 140 MB row (and a 200 MB one was too large for
Postgres and lost), and 2,000 items made 2,000 letters. Now a letter keeps the first
MEMWELL_DEAD_LETTER_RAW_MAX_BYTES with the whole size and hash, and past
MEMWELL_DEAD_LETTER_RAW_MAX_OPEN open ones a new item is counted in
`dead_letters_not_kept` instead. The partial index makes that count read an index, not
the letters' payloads. The table has no tenant: it is the operator's, read by the
connecting role, as the raw letters (which name no tenant) are.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAW_OPEN = "replayed_at IS NULL AND payload ? 'unreadable_body_b64'"


def upgrade() -> None:
    op.create_index(
        "ix_dead_letters_raw_open",
        "dead_letters",
        ["id"],
        unique=False,
        postgresql_where=sa.text(RAW_OPEN),
    )
    op.create_table(
        "dead_letters_not_kept",
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column(
            "first_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column(
            "last_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_dead_letters_not_kept")),
    )


def downgrade() -> None:
    op.drop_table("dead_letters_not_kept")
    op.drop_index(
        "ix_dead_letters_raw_open", table_name="dead_letters", postgresql_where=sa.text(RAW_OPEN)
    )
