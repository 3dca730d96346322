"""tenancy: api_keys, user_erasures, and row-level security on every tenant table.

RLS is the second line of defence behind the application's WHERE tenant = ...:
the service switches each transaction to the role `memwell_app` (SET LOCAL ROLE via
set_config) and sets `memwell.tenant`; the policy then hides every other tenant's
rows, and refuses writes into them, even if a query forgets its filter. The role is
NOLOGIN, NOSUPERUSER, NOBYPASSRLS and owns nothing, so RLS binds it.

Roles are cluster-wide while migrations run per database, so creating the role is
idempotent, and the downgrade drops it only when no other database still uses it.

Revision ID: 0004
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "memwell_app"
TENANT_TABLES = (
    "turns",
    "memories",
    "memory_events",
    "sessions",
    "dead_letters",
    "user_erasures",
    "llm_usage",
    "memory_ann_indexes",
)
SEQUENCES = ("memory_events_id_seq", "dead_letters_id_seq")
POLICY = "tenant_isolation"
TENANT_MATCHES = "tenant = current_setting('memwell.tenant', true)"


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    op.create_index("uq_api_keys_key_hash", "api_keys", ["key_hash"], unique=True)
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant", "created_at"], unique=False)
    op.create_table(
        "user_erasures",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_hash", sa.String(length=64), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "receipt",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant", "user_hash", name=op.f("pk_user_erasures")),
    )
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
                CREATE ROLE {ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
            END IF;
            -- The connecting role must be able to SET ROLE to it (superusers always can).
            IF NOT pg_has_role(current_user, '{ROLE}', 'MEMBER') THEN
                EXECUTE format('GRANT {ROLE} TO %I', current_user);
            END IF;
        END
        $$
        """
    )
    op.execute(f"GRANT USAGE ON SCHEMA public TO {ROLE}")
    for table in TENANT_TABLES:
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {ROLE}")
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY {POLICY} ON {table} TO {ROLE} "
            f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
        )
    for sequence in SEQUENCES:
        op.execute(f"GRANT USAGE, SELECT ON SEQUENCE {sequence} TO {ROLE}")


def downgrade() -> None:
    for sequence in SEQUENCES:
        op.execute(f"REVOKE ALL ON SEQUENCE {sequence} FROM {ROLE}")
    for table in TENANT_TABLES:
        op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute(f"REVOKE ALL ON {table} FROM {ROLE}")
    op.execute(f"REVOKE ALL ON SCHEMA public FROM {ROLE}")
    op.drop_table("user_erasures")
    op.drop_index("ix_api_keys_tenant", table_name="api_keys")
    op.drop_index("uq_api_keys_key_hash", table_name="api_keys")
    op.drop_table("api_keys")
    # Another database on this server may still grant to the role: then it stays.
    op.execute(
        f"""
        DO $$
        BEGIN
            DROP ROLE IF EXISTS {ROLE};
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'role {ROLE} is still used by another database; kept';
        END
        $$
        """
    )
