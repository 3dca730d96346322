"""Request and response bodies of the REST surface."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwell.retrieval import MemoryHit
from memwell.turns import Identifier, TurnIn


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    session_id: Identifier
    message: str = Field(min_length=1, max_length=32_000)

    @field_validator("message")
    @classmethod
    def _message_is_text(cls, value: str) -> str:
        if "\x00" in value or not value.strip():
            raise ValueError("message must be non-blank text without NUL bytes")
        return value


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

    turns: list[TurnIn] = Field(min_length=1, max_length=500)


class TurnBatchAccepted(BaseModel):
    accepted: int
    turn_ids: list[str]


class TurnStatus(BaseModel):
    id: str
    status: Literal["pending", "processed", "failed", "dropped", "unknown"]
    user_id: str | None = None
    session_id: str | None = None
    processed_at: datetime | None = None
