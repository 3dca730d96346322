"""consolidation: llm_usage (tokens per tenant, day, stage, model) and
sessions.summarized_turn_ids (idempotent incremental summaries).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 01:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "llm_usage",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("stage", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("calls", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "completion_tokens", sa.BigInteger(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("failures", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("fallbacks", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "day", "stage", "model", name=op.f("pk_llm_usage")),
    )
    op.add_column(
        "sessions",
        sa.Column(
            "summarized_turn_ids",
            postgresql.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("sessions", "summarized_turn_ids")
    op.drop_table("llm_usage")
