"""The long-term store's tables. Alembic migrations are the only way they change;
a test proves these models and the migrations agree.

Every table carries `tenant`, and every index that finds rows starts with it, so
that one tenant's (and one user's) rows are reached without touching the rest.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

MEMORY_KINDS = ("fact", "preference", "event", "summary", "episode")
TURN_ROLES = ("user", "assistant", "system", "tool")
TURN_STATUSES = ("pending", "processed", "failed", "dropped")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _now() -> Any:
    return func.now()


class Turn(Base):
    """The episodic log: every accepted message, keyed by a client idempotency key."""

    __tablename__ = "turns"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    # Event time: when it was said; clients replaying history supply it.
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    # Arrival order: breaks ties between equal event times (see extraction's replies).
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    token_count: Mapped[int] = mapped_column(Integer)
    importance: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), server_default=text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the sweeper last re-dispatched it (NULL: only the dispatch at receipt). The
    # sweeper claims on it, so two sweepers never re-dispatch the same turn twice.
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, server_default=text("'{}'::jsonb")
    )

    __table_args__ = (
        CheckConstraint(f"role IN {TURN_ROLES}", name="role"),
        CheckConstraint(f"status IN {TURN_STATUSES}", name="status"),
        Index("ix_turns_user_session", "tenant", "user_id", "session_id", "created_at"),
        # The sweeper's scan: only pending rows are indexed, so it stays small.
        Index(
            "ix_turns_pending",
            "received_at",
            postgresql_where=text("status = 'pending'"),
        ),
        # A consolidate worker claims whole users: one user's pending turns in order.
        Index(
            "ix_turns_pending_by_user",
            "tenant",
            "user_id",
            "seq",
            postgresql_where=text("status = 'pending'"),
        ),
    )


class Memory(Base):
    """What long-term memory returns: facts, preferences, events, summaries, episodes."""

    __tablename__ = "memories"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))
    agent_id: Mapped[str | None] = mapped_column(String(200))
    session_id: Mapped[str | None] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    # No fixed dimension: rows record their model, and a re-embed moves a store to a
    # model of another size without a schema change. Queries filter by model.
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(128))
    importance: Mapped[float] = mapped_column(Float, server_default=text("0.5"))
    strength: Mapped[float] = mapped_column(Float, server_default=text("1.0"))
    pinned: Mapped[bool] = mapped_column(server_default=text("false"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_accessed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    access_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    reinforcement_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="SET NULL")
    )
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: written after the user's ANN index was built, and not in it yet: searched exactly
    #: until the fold job clears it (memwell/retrieval/ann.py)
    ann_deferred: Mapped[bool] = mapped_column(server_default=text("false"))
    source_turn_ids: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, server_default=text("'{}'::jsonb")
    )
    fts: Mapped[Any] = mapped_column(
        # memwell_search_text (migration 0014) spaces out Chinese and Japanese characters,
        # which the text-search parser would otherwise read as one word per sentence.
        TSVECTOR,
        Computed(
            "to_tsvector('english'::regconfig, public.memwell_search_text(content))",
            persisted=True,
        ),
    )

    __table_args__ = (
        CheckConstraint(f"kind IN {MEMORY_KINDS}", name="kind"),
        CheckConstraint("importance >= 0 AND importance <= 1", name="importance_range"),
        # Retrieval's exact scan: one user's live rows, straight from the btree.
        Index("ix_memories_user", "tenant", "user_id", "created_at"),
        # Exact dedup: one live memory per normalised content per user.
        Index(
            "uq_memories_live_hash",
            "tenant",
            "user_id",
            "content_hash",
            unique=True,
            postgresql_where=text("deleted_at IS NULL AND superseded_by IS NULL"),
        ),
        Index("ix_memories_fts", "fts", postgresql_using="gin"),
        # The rows a huge user's ANN index does not hold yet: few, read exactly.
        Index(
            "ix_memories_ann_tail",
            "tenant",
            "user_id",
            "embedding_model",
            postgresql_where=text("ann_deferred"),
        ),
        # Prune's hard delete walks tombstones oldest first; live rows are not indexed.
        Index(
            "ix_memories_tombstones",
            "deleted_at",
            "id",
            postgresql_where=text("deleted_at IS NOT NULL"),
        ),
    )


class MemoryEvent(Base):
    """History of every memory: what changed, from what, to what. Enables audit and undo."""

    __tablename__ = "memory_events"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))
    # No foreign key: history outlives a hard-deleted memory.
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    event: Mapped[str] = mapped_column(String(16))
    old_content: Mapped[str | None] = mapped_column(Text)
    new_content: Mapped[str | None] = mapped_column(Text)
    related_memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    source_turn_ids: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())

    __table_args__ = (
        CheckConstraint(
            "event IN ('add','reinforce','merge','update','supersede','decay','delete','redact')",
            name="event",
        ),
        Index("ix_memory_events_memory", "tenant", "memory_id", "id"),
        Index("ix_memory_events_user", "tenant", "user_id"),
    )


class MemoryAnnIndex(Base):
    """A per-user HNSW index that exists, so retrieval knows to take candidates from it.

    Made and dropped by the ANN maintenance job (memwell/retrieval/ann.py); the index itself is a
    partial expression index whose predicate names this tenant, user and model.
    """

    __tablename__ = "memory_ann_indexes"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    embedding_model: Mapped[str] = mapped_column(String(128), primary_key=True)
    index_name: Mapped[str] = mapped_column(String(63), unique=True)
    dims: Mapped[int] = mapped_column(Integer)
    rows_at_build: Mapped[int] = mapped_column(Integer)
    #: the index leaves out rows with `ann_deferred` set, so reconcile may defer them
    defers_new_rows: Mapped[bool] = mapped_column(server_default=text("false"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class MemoryEmbedding(Base):
    """A memory's vector of a second embedding model, beside `memories.embedding`.

    While a re-embed runs it holds the target model's vector; once the memory's user
    has switched, the previous model's (abort swaps it back, finish drops it). Goes
    with its memory: erasure and prune delete nothing here themselves.
    """

    __tablename__ = "memory_embeddings"

    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))
    embedding: Mapped[Any] = mapped_column(Vector())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())

    __table_args__ = (Index("ix_memory_embeddings_user", "tenant", "user_id", "model"),)


ENTITY_KINDS = ("person", "place", "organization", "thing", "event", "other")


class Entity(Base):
    """Someone or something a user's memories mention: a person, a place, a pet, a
    band, a trip. One row per user and normalised name; `mention_count` is how many
    of the user's memories link to it, so retrieval can tell a rare entity (which
    says which memory is meant) from one named everywhere (which says nothing)."""

    __tablename__ = "entities"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))
    #: the normalised name (memwell/entities/names.py): the key aliases resolve to
    key: Mapped[str] = mapped_column(Text)
    #: the display form, as first written
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16), server_default=text("'other'"))
    mention_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())

    __table_args__ = (
        CheckConstraint(f"kind IN {ENTITY_KINDS}", name="kind"),
        Index("uq_entities_user_key", "tenant", "user_id", "key", unique=True),
    )


class EntityAlias(Base):
    """Another name of an entity ("Mel" for "Melanie", "her sister" resolved): one
    alias means one entity per user, so a query's names resolve by primary key."""

    __tablename__ = "entity_aliases"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    alias: Mapped[str] = mapped_column(Text, primary_key=True)
    entity_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("entities.id", ondelete="CASCADE")
    )

    __table_args__ = (Index("ix_entity_aliases_entity", "entity_id"),)


class MemoryEntity(Base):
    """Which entities a memory mentions. Goes with its memory and with its entity."""

    __tablename__ = "memory_entities"

    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    entity_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True
    )
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))

    # Retrieval goes from an entity to its memories.
    # Covering: retrieval reads an entity's memories, under the tenant's row-level
    # security, from the index alone.
    __table_args__ = (
        Index(
            "ix_memory_entities_entity",
            "entity_id",
            "memory_id",
            postgresql_include=["tenant", "user_id"],
        ),
    )


class EntityRelation(Base):
    """An edge between two entities ("Caroline" -sister_of-> "Ana"), or from an entity
    to a literal value ("Ada" -age-> "34"), with its provenance and validity.

    A single-valued relation (a slot: lives in, works at, name, ...) has at most one
    current edge per subject: a new value ends the old edge (`valid_to`) and points
    it at its successor (`superseded_by`), as memories are superseded.
    """

    __tablename__ = "entity_relations"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    tenant: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(String(200))
    subject_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("entities.id", ondelete="CASCADE")
    )
    relation: Mapped[str] = mapped_column(String(64))
    object_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("entities.id", ondelete="CASCADE")
    )
    #: the value when the object is not an entity (an age, a status)
    value: Mapped[str | None] = mapped_column(Text)
    single_valued: Mapped[bool] = mapped_column(server_default=text("false"))
    #: the memory that stated it; history outlives it, so the link is only cleared
    memory_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="SET NULL")
    )
    source_turn_ids: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("entity_relations.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())

    __table_args__ = (
        CheckConstraint("object_id IS NOT NULL OR value IS NOT NULL", name="target"),
        Index("ix_entity_relations_subject", "tenant", "user_id", "subject_id"),
        Index("ix_entity_relations_object", "object_id"),
        # One current value per slot: two writers racing on a slot cannot both win.
        Index(
            "uq_entity_relations_current_slot",
            "subject_id",
            "relation",
            unique=True,
            postgresql_where=text("single_valued AND superseded_by IS NULL"),
        ),
    )


MIGRATION_STATES = ("running", "paused", "ready", "aborting", "finished", "aborted")


class EmbeddingMigration(Base):
    """One re-embed of the store (or of a tenant, or a user) to another model.

    The keyset cursor walks (tenant, user_id, created_at, id), the order of the
    per-user btree; each batch commits its vectors and the cursor together, so a
    killed worker's batch is redone whole or not at all.
    `step_token` names the one step task allowed to run next (redeliveries no-op).
    """

    __tablename__ = "embedding_migrations"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(String(128))
    user_id: Mapped[str | None] = mapped_column(String(200))
    target_spec: Mapped[str] = mapped_column(String(300))
    target_model: Mapped[str] = mapped_column(String(128))
    target_base_url: Mapped[str | None] = mapped_column(Text)
    target_dims: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    step_token: Mapped[str] = mapped_column(String(32))
    cursor_tenant: Mapped[str | None] = mapped_column(String(128))
    cursor_user: Mapped[str | None] = mapped_column(String(200))
    cursor_created_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cursor_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    #: the cursor has passed the last row; what remains is catching up stragglers
    walked: Mapped[bool] = mapped_column(server_default=text("false"))
    total: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    embedded: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    switched_users: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    batch_size: Mapped[int] = mapped_column(Integer)
    rate_per_s: Mapped[float] = mapped_column(Float)
    grace_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    old_dropped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(f"state IN {MIGRATION_STATES}", name="state"),
        # At most one re-embed in flight: two would race for the same rows.
        Index(
            "uq_embedding_migrations_in_flight",
            text("(true)"),
            unique=True,
            postgresql_where=text("state IN ('running', 'paused', 'ready', 'aborting')"),
        ),
    )


class ChatSession(Base):
    """A conversation: its running summary, counters and last activity."""

    __tablename__ = "sessions"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), server_default=text("'open'"))
    summary: Mapped[str | None] = mapped_column(Text)
    summary_updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Turns already folded into `summary`: a redelivered summarize task skips them.
    summarized_turn_ids: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("'{}'::text[]")
    )
    turn_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_activity_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=_now()
    )
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint("status IN ('open','closed')", name="status"),
        Index(
            "ix_sessions_open_activity",
            "last_activity_at",
            postgresql_where=text("status = 'open'"),
        ),
    )


class DeadLetter(Base):
    """A task that failed for good, kept with its payload so an operator can replay it."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    task_name: Mapped[str] = mapped_column(String(200))
    tenant: Mapped[str | None] = mapped_column(String(128))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    error: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    replayed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_dead_letters_open", "created_at", postgresql_where=text("replayed_at IS NULL")),
        # The open letters of unreadable messages, counted against their bound before each
        # new one: the count reads this index, never the (large, TOASTed) payloads.
        Index(
            "ix_dead_letters_raw_open",
            "id",
            postgresql_where=text("replayed_at IS NULL AND payload ? 'unreadable_body_b64'"),
        ),
    )


class DeadLettersNotKept(Base):
    """Unreadable messages not kept as dead letters because the open ones were at their
    bound (MEMWELL_DEAD_LETTER_RAW_MAX_OPEN): how many, since when, and the last one's
    error (its problem and size, never its content). One row per kind of letter."""

    __tablename__ = "dead_letters_not_kept"

    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_error: Mapped[str] = mapped_column(Text)


class LlmUsage(Base):
    """Tokens spent on the model endpoint, per tenant, day, pipeline stage and model.

    Rows are upserted with increments after every call (in their own transaction, so a
    task that rolls back still accounts for the tokens it spent)."""

    __tablename__ = "llm_usage"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    stage: Mapped[str] = mapped_column(String(32), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    completion_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    # Calls whose answer could not be used (bad JSON twice, HTTP errors) ...
    failures: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # ... and items that then fell back to local mode ...
    fallbacks: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # ... counted by reason: {"timeout": 3, "invalid_output": 1}
    fallback_reasons: Mapped[dict[str, int]] = mapped_column(
        JSONB, server_default=text("'{}'::jsonb")
    )
    # Items left for a later call: the model ran out of time, and the items were sent
    # again (in smaller windows) rather than falling back.
    deferrals: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class ApiKey(Base):
    """A tenant-bound API key. Only its SHA-256 and a short display prefix are stored:
    the key itself is shown once, at creation."""

    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    tenant: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("uq_api_keys_key_hash", "key_hash", unique=True),
        Index("ix_api_keys_tenant", "tenant", "created_at"),
    )


class UserErasure(Base):
    """Tombstone of an erased user, keyed by a hash of the user id (the id itself is
    gone too). Workers drop queued turns of the user that predate `erased_at`."""

    __tablename__ = "user_erasures"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    erased_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    receipt: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))


class DroppedTurn(Base):
    """A turn that was acknowledged but will never be stored: its user was erased, or
    its session cleared, while it was on its way. Keyed by an HMAC of the turn id, and
    holding nothing else of the turn, so a dropped turn of an erased user leaves no
    trace of it; enough for its status to say `dropped` and why, and for a late
    delivery of it to be dropped too (memwell/intake/dropped_turns.py)."""

    __tablename__ = "dropped_turns"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    turn_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    reason: Mapped[str] = mapped_column(String(64))
    dropped_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())

    # prune deletes the oldest records first, past their retention.
    __table_args__ = (Index("ix_dropped_turns_dropped_at", "dropped_at"),)
