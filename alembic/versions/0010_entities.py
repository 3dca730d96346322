"""entities: who and what a user's memories mention, and how they relate.

`entities` (one per user and normalised name), `entity_aliases` (other names of an
entity, one entity per alias), `memory_entities` (memory <-> entity links, going with
either side) and `entity_relations` (edges between entities, or from an entity to a
literal value, with provenance and validity; a single-valued relation has at most one
current edge per subject). Every table is under the tenant's row-level security.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "memwell_app"
POLICY = "tenant_isolation"
TENANT_MATCHES = "tenant = current_setting('memwell.tenant', true)"
TABLES = ("entities", "entity_aliases", "memory_entities", "entity_relations")
KINDS = "kind IN ('person', 'place', 'organization', 'thing', 'event', 'other')"


def _now() -> sa.TextClause:
    return sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "entities",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), server_default=sa.text("'other'"), nullable=False),
        sa.Column("mention_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.Column(
            "last_seen_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False
        ),
        sa.CheckConstraint(KINDS, name=op.f("ck_entities_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entities")),
    )
    op.create_index("uq_entities_user_key", "entities", ["tenant", "user_id", "key"], unique=True)
    op.create_table(
        "entity_aliases",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("alias", sa.Text(), nullable=False),
        sa.Column("entity_id", sa.UUID(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name=op.f("fk_entity_aliases_entity_id_entities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant", "user_id", "alias", name=op.f("pk_entity_aliases")),
    )
    op.create_index("ix_entity_aliases_entity", "entity_aliases", ["entity_id"])
    op.create_table(
        "memory_entities",
        sa.Column("memory_id", sa.UUID(), nullable=False),
        sa.Column("entity_id", sa.UUID(), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_memory_entities_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name=op.f("fk_memory_entities_entity_id_entities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("memory_id", "entity_id", name=op.f("pk_memory_entities")),
    )
    op.create_index("ix_memory_entities_entity", "memory_entities", ["entity_id", "memory_id"])
    op.create_table(
        "entity_relations",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("subject_id", sa.UUID(), nullable=False),
        sa.Column("relation", sa.String(length=64), nullable=False),
        sa.Column("object_id", sa.UUID(), nullable=True),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("single_valued", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("memory_id", sa.UUID(), nullable=True),
        sa.Column(
            "source_turn_ids",
            sa.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_by", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.CheckConstraint(
            "object_id IS NOT NULL OR value IS NOT NULL", name=op.f("ck_entity_relations_target")
        ),
        sa.ForeignKeyConstraint(
            ["subject_id"],
            ["entities.id"],
            name=op.f("fk_entity_relations_subject_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["object_id"],
            ["entities.id"],
            name=op.f("fk_entity_relations_object_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_entity_relations_memory_id_memories"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by"],
            ["entity_relations.id"],
            name=op.f("fk_entity_relations_superseded_by_entity_relations"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entity_relations")),
    )
    op.create_index(
        "ix_entity_relations_subject", "entity_relations", ["tenant", "user_id", "subject_id"]
    )
    op.create_index("ix_entity_relations_object", "entity_relations", ["object_id"])
    op.create_index(
        "uq_entity_relations_current_slot",
        "entity_relations",
        ["subject_id", "relation"],
        unique=True,
        postgresql_where=sa.text("single_valued AND superseded_by IS NULL"),
    )
    for table in TABLES:
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {ROLE}")
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY {POLICY} ON {table} TO {ROLE} "
            f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
        )


def downgrade() -> None:
    for table in reversed(TABLES):
        op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
        op.execute(f"REVOKE ALL ON {table} FROM {ROLE}")
    op.drop_index("uq_entity_relations_current_slot", table_name="entity_relations")
    op.drop_index("ix_entity_relations_object", table_name="entity_relations")
    op.drop_index("ix_entity_relations_subject", table_name="entity_relations")
    op.drop_table("entity_relations")
    op.drop_index("ix_memory_entities_entity", table_name="memory_entities")
    op.drop_table("memory_entities")
    op.drop_index("ix_entity_aliases_entity", table_name="entity_aliases")
    op.drop_table("entity_aliases")
    op.drop_index("uq_entities_user_key", table_name="entities")
    op.drop_table("entities")
