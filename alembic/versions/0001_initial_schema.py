"""initial schema: turns, memories, memory_events, sessions; the vector extension.

No global ANN index on memories.embedding: measured at 1M rows it cost ~7 ms per
insert and lost to an exact per-user scan (see DESIGN.md).

Revision ID: 0001
Revises:
Create Date: 2026-11-22 00:46:05.819335
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table('memories',
    sa.Column('id', sa.UUID(), server_default=sa.text('gen_random_uuid()'), nullable=False),
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('agent_id', sa.String(length=200), nullable=True),
    sa.Column('session_id', sa.String(length=200), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('embedding', Vector(), nullable=True),
    sa.Column('embedding_model', sa.String(length=128), nullable=True),
    sa.Column('importance', sa.Float(), server_default=sa.text('0.5'), nullable=False),
    sa.Column('strength', sa.Float(), server_default=sa.text('1.0'), nullable=False),
    sa.Column('pinned', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_accessed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('access_count', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('reinforcement_count', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('valid_from', sa.DateTime(timezone=True), nullable=True),
    sa.Column('valid_to', sa.DateTime(timezone=True), nullable=True),
    sa.Column('superseded_by', sa.UUID(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('source_turn_ids', postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('fts', postgresql.TSVECTOR(), sa.Computed("to_tsvector('english'::regconfig, content)", persisted=True), nullable=False),
    sa.CheckConstraint("kind IN ('fact', 'preference', 'event', 'summary', 'episode')", name=op.f('ck_memories_kind')),
    sa.CheckConstraint('importance >= 0 AND importance <= 1', name=op.f('ck_memories_importance_range')),
    sa.ForeignKeyConstraint(['superseded_by'], ['memories.id'], name=op.f('fk_memories_superseded_by_memories'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memories'))
    )
    op.create_index('ix_memories_fts', 'memories', ['fts'], unique=False, postgresql_using='gin')
    op.create_index('ix_memories_user', 'memories', ['tenant', 'user_id', 'created_at'], unique=False)
    op.create_index('uq_memories_live_hash', 'memories', ['tenant', 'user_id', 'content_hash'], unique=True, postgresql_where=sa.text('deleted_at IS NULL AND superseded_by IS NULL'))
    op.create_table('memory_events',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('memory_id', sa.UUID(), nullable=False),
    sa.Column('event', sa.String(length=16), nullable=False),
    sa.Column('old_content', sa.Text(), nullable=True),
    sa.Column('new_content', sa.Text(), nullable=True),
    sa.Column('related_memory_id', sa.UUID(), nullable=True),
    sa.Column('source_turn_ids', postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("event IN ('add','reinforce','merge','update','supersede','decay','delete','redact')", name=op.f('ck_memory_events_event')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memory_events'))
    )
    op.create_index('ix_memory_events_memory', 'memory_events', ['tenant', 'memory_id', 'id'], unique=False)
    op.create_index('ix_memory_events_user', 'memory_events', ['tenant', 'user_id'], unique=False)
    op.create_table('sessions',
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), server_default=sa.text("'open'"), nullable=False),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('summary_updated_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('turn_count', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_activity_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('open','closed')", name=op.f('ck_sessions_status')),
    sa.PrimaryKeyConstraint('tenant', 'user_id', 'id', name=op.f('pk_sessions'))
    )
    op.create_index('ix_sessions_open_activity', 'sessions', ['last_activity_at'], unique=False, postgresql_where=sa.text("status = 'open'"))
    op.create_table('turns',
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('session_id', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('token_count', sa.Integer(), nullable=False),
    sa.Column('importance', sa.Float(), nullable=True),
    sa.Column('status', sa.String(length=16), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('processed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.CheckConstraint("role IN ('user', 'assistant', 'system', 'tool')", name=op.f('ck_turns_role')),
    sa.CheckConstraint("status IN ('pending', 'processed', 'failed', 'dropped')", name=op.f('ck_turns_status')),
    sa.PrimaryKeyConstraint('tenant', 'id', name=op.f('pk_turns'))
    )
    op.create_index('ix_turns_pending', 'turns', ['received_at'], unique=False, postgresql_where=sa.text("status = 'pending'"))
    op.create_index('ix_turns_user_session', 'turns', ['tenant', 'user_id', 'session_id', 'created_at'], unique=False)
    op.create_table('dead_letters',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('task_name', sa.String(length=200), nullable=False),
    sa.Column('tenant', sa.String(length=128), nullable=True),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('replayed_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dead_letters'))
    )
    op.create_index('ix_dead_letters_open', 'dead_letters', ['created_at'], unique=False, postgresql_where=sa.text('replayed_at IS NULL'))


def downgrade() -> None:
    op.drop_index('ix_dead_letters_open', table_name='dead_letters', postgresql_where=sa.text('replayed_at IS NULL'))
    op.drop_table('dead_letters')
    op.drop_index('ix_turns_user_session', table_name='turns')
    op.drop_index('ix_turns_pending', table_name='turns', postgresql_where=sa.text("status = 'pending'"))
    op.drop_table('turns')
    op.drop_index('ix_sessions_open_activity', table_name='sessions', postgresql_where=sa.text("status = 'open'"))
    op.drop_table('sessions')
    op.drop_index('ix_memory_events_user', table_name='memory_events')
    op.drop_index('ix_memory_events_memory', table_name='memory_events')
    op.drop_table('memory_events')
    op.drop_index('uq_memories_live_hash', table_name='memories', postgresql_where=sa.text('deleted_at IS NULL AND superseded_by IS NULL'))
    op.drop_index('ix_memories_user', table_name='memories')
    op.drop_index('ix_memories_fts', table_name='memories', postgresql_using='gin')
    op.drop_table('memories')
    op.execute("DROP EXTENSION IF EXISTS vector")
