"""llm_usage counts the items a slow model left for a later call (deferrals), beside
the ones handed to local mode (fallbacks).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: no table rewrite.
    op.add_column(
        "llm_usage",
        sa.Column("deferrals", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("llm_usage", "deferrals")
