"""Request and response bodies of the REST surface."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwell.intake.turns import (
    MAX_BATCH_TURNS,
    MAX_CONTENT_CHARS,
    Identifier,
    Instant,
    Query,
    TurnIn,
    check_metadata,
    check_text,
)
from memwell.retrieval.search import MemoryHit, Overrides, SearchFilters

#: An id in a URL path, with the same rules as in a body (no control characters).
IdentifierPath = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    session_id: Identifier
    message: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    stream: bool = Field(
        default=False,
        strict=True,
        description="Answer with Server-Sent Events as the reply is produced, not one JSON.",
    )

    @field_validator("message")
    @classmethod
    def _message_is_text(cls, value: str) -> str:
        return check_text(value, "message")


class ChatResponse(BaseModel):
    reply: str
    model: str
    memories: list[MemoryHit]
    turn_ids: list[str]
    timings_ms: dict[str, float]


class TurnBatch(BaseModel):
    """A batch is all-or-nothing: one invalid turn rejects the whole batch (422 with
    the item's location), and nothing of it is enqueued."""

    model_config = ConfigDict(extra="forbid")

    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_BATCH_TURNS)


class TurnBatchAccepted(BaseModel):
    accepted: int
    turn_ids: list[str]


class TurnStatus(BaseModel):
    id: str
    status: Literal["pending", "processed", "failed", "dropped", "unknown"] = Field(
        description="pending, processed or failed once stored; dropped when it will never "
        "be stored (see `reason`); unknown while it may still be on its way."
    )
    user_id: str | None = None
    session_id: str | None = None
    processed_at: datetime | None = None
    reason: str | None = Field(
        default=None,
        description='Why a dropped turn was dropped: "user erased" (it predates its '
        'user\'s erasure) or "session cleared" (its session was cleared while it was on '
        "its way).",
    )


class SearchFiltersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kinds: list[Literal["fact", "preference", "event", "summary", "episode"]] | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, description="JSONB containment: rows whose metadata contains this."
    )

    @field_validator("metadata")
    @classmethod
    def _metadata_is_plain_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # Checked like stored metadata: jsonb would refuse it with a server error.
        return None if value is None else check_metadata(value)

    created_after: Instant | None = None
    created_before: Instant | None = None
    agent_id: Identifier | None = None
    session_id: Identifier | None = None
    exclude_ids: list[uuid.UUID] | None = Field(default=None, max_length=1000)

    def to_domain(self) -> SearchFilters:
        return SearchFilters(
            kinds=tuple(self.kinds) if self.kinds else None,
            metadata=self.metadata or None,
            created_after=self.created_after,
            created_before=self.created_before,
            agent_id=self.agent_id,
            session_id=self.session_id,
            exclude_ids=tuple(self.exclude_ids) if self.exclude_ids else None,
        )


class ScoringIn(BaseModel):
    """Per-request tuning; values outside the bounds are clamped, not rejected."""

    model_config = ConfigDict(extra="forbid")

    w_relevance: float | None = Field(default=None, strict=True, ge=0)
    w_importance: float | None = Field(default=None, strict=True, ge=0)
    w_recency: float | None = Field(default=None, strict=True, ge=0)
    half_life_h: float | None = Field(default=None, strict=True, gt=0)
    half_life_access_h: float | None = Field(default=None, strict=True, gt=0)
    fusion: Literal["rrf", "score", "vector"] | None = None
    text_weight: float | None = Field(default=None, strict=True, ge=0, le=1)
    similarity_floor: float | None = Field(
        default=None, strict=True, ge=-1, le=1, description="Cosine under which hits drop."
    )
    entity_weight: float | None = Field(
        default=None, strict=True, ge=0, description="Weight of entity_match (0: off)."
    )

    def to_domain(self) -> Overrides:
        return Overrides(**self.model_dump())


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    query: Query
    k: int | None = Field(default=None, strict=True, ge=1, le=100)
    filters: SearchFiltersIn = Field(default_factory=SearchFiltersIn)
    as_of: Instant | None = Field(
        default=None, description="Answer as the store stood at this instant."
    )
    scoring: ScoringIn = Field(default_factory=ScoringIn)


class SearchResponse(BaseModel):
    hits: list[MemoryHit]


class ContextRequest(SearchRequest):
    session_id: Identifier
    token_budget: int | None = Field(default=None, strict=True, ge=100, le=200_000)
    system_prompt: str | None = Field(default=None, max_length=16_000)
    include_profile: bool = Field(
        default=False,
        strict=True,
        description="Add the user's profile (GET /v1/users/{id}/profile) as known facts, "
        "quoted like memories and inside the same token budget.",
    )


class RecentTurn(BaseModel):
    turn_id: str
    role: str
    content: str
    created_at: str
    tokens: int


class ContextResponse(BaseModel):
    messages: list[dict[str, str]]
    data_block: str
    memories: list[MemoryHit]
    summary: str | None
    recent: list[RecentTurn]
    tokens: int
    token_budget: int
    profile: list[str] = Field(
        default=[], description="The profile's facts that fit (with include_profile)."
    )


class ErasureReceiptPublic(BaseModel):
    """What an erasure removed, per store, and when. Repeating it is harmless."""

    tenant: str
    user_id: str
    erased_at: datetime
    counts: dict[str, int] = Field(
        description="what was removed, per store: rows per table (turns, memories, "
        "memory_events, sessions, dead_letters, dead_letters_without_tenant), the user's "
        "ANN indexes (ann_indexes), Redis keys (redis_keys), inbox entries "
        "(inbox_entries), queued ingest messages (queued_messages) and re-embeds scoped "
        "to this user (reembed_runs)"
    )
