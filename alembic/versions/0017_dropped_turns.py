"""dropped_turns: acknowledged turns that will never be stored, and why.

A turn dropped on its way in (its user erased, its session cleared before it landed)
used to leave no row at all, so its status read `unknown` forever and a client waiting
on it timed out. This table answers `dropped` with the reason. It is keyed by an HMAC
of the turn id and holds no user id and no content: an erased user's dropped turn must
not outlive the erasure in any readable form. A session clear also writes the rows of
the session's turns still in flight, and the ingest step drops a turn whose row exists:
that is the clear's fence.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "memwell_app"
POLICY = "tenant_isolation"
TENANT_MATCHES = "tenant = current_setting('memwell.tenant', true)"


def upgrade() -> None:
    op.create_table(
        "dropped_turns",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("turn_hash", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column(
            "dropped_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("tenant", "turn_hash", name=op.f("pk_dropped_turns")),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON dropped_turns TO {ROLE}")
    op.execute("ALTER TABLE dropped_turns ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY {POLICY} ON dropped_turns TO {ROLE} "
        f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
    )


def downgrade() -> None:
    op.execute(f"DROP POLICY IF EXISTS {POLICY} ON dropped_turns")
    op.execute(f"REVOKE ALL ON dropped_turns FROM {ROLE}")
    op.drop_table("dropped_turns")
