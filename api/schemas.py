"""Request and response bodies of the REST surface."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwell.retrieval import MemoryHit
from memwell.turns import MAX_BATCH_TURNS, MAX_CONTENT_CHARS, Identifier, TurnIn, check_text

#: An id in a URL path, with the same rules as in a body (no control characters).
IdentifierPath = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    session_id: Identifier
    message: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)

    @field_validator("message")
    @classmethod
    def _message_is_text(cls, value: str) -> str:
        return check_text(value, "message")


class MemoryHitPublic(BaseModel):
    id: uuid.UUID
    kind: str
    content: str
    score: float
    relevance: float
    importance: float
    recency: float
    created_at: datetime
    session_id: str | None
    source_turn_ids: list[str]

    @classmethod
    def from_hit(cls, hit: MemoryHit) -> MemoryHitPublic:
        return cls.model_validate(hit, from_attributes=True)


class ChatResponse(BaseModel):
    reply: str
    model: str
    memories: list[MemoryHitPublic]
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
    status: Literal["pending", "processed", "failed", "dropped", "unknown"]
    user_id: str | None = None
    session_id: str | None = None
    processed_at: datetime | None = None


class ErasureReceiptPublic(BaseModel):
    """What an erasure removed, per store, and when. Repeating it is harmless."""

    tenant: str
    user_id: str
    erased_at: datetime
    counts: dict[str, int] = Field(
        description="rows deleted per table (turns, memories, memory_events, sessions, "
        "dead_letters) and Redis keys deleted (redis_keys)"
    )
