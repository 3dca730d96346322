"""Typed results of the SDK. They mirror the REST responses and accept fields a newer
server adds (extra="allow"), so an older client keeps working against a newer API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ScoredMemory(_Result):
    """A retrieved memory and why it came back: its score and the score's parts."""

    id: str
    kind: str
    content: str
    score: float
    relevance: float | None = None
    importance: float | None = None
    recency: float | None = None
    similarity: float | None = None
    text_rank: float | None = None
    created_at: datetime | None = None
    session_id: str | None = None
    agent_id: str | None = None
    source_turn_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChatReply(_Result):
    reply: str
    model: str
    memories: list[ScoredMemory] = Field(default_factory=list)
    turn_ids: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)


class ChatStreamEvent(_Result):
    """One event of a streamed chat: `memories` (the memories used) first, then a
    `token` per piece of the reply (`delta`), then `done` (turn_ids, model, timings_ms)."""

    event: str
    memories: list[ScoredMemory] = Field(default_factory=list)
    delta: str = ""
    turn_ids: list[str] = Field(default_factory=list)
    model: str | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)


class TurnsAccepted(_Result):
    accepted: int
    turn_ids: list[str]


TurnState = Literal["pending", "processed", "failed", "dropped", "unknown"]


class TurnStatus(_Result):
    id: str
    status: TurnState
    user_id: str | None = None
    session_id: str | None = None
    processed_at: datetime | None = None
    #: why a `dropped` turn was dropped: "user erased" or "session cleared"
    reason: str | None = None


class SearchResult(_Result):
    hits: list[ScoredMemory] = Field(default_factory=list)


class ContextResult(_Result):
    """Ready-to-use context for your own model call."""

    memories: list[ScoredMemory] = Field(default_factory=list)
    summary: str | None = None
    recent: list[dict[str, Any]] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    text: str | None = None
    tokens: int | None = None
    profile: list[str] = Field(
        default_factory=list, description="The profile facts kept (with include_profile)."
    )


class Memory(_Result):
    id: str
    kind: str
    content: str
    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    importance: float | None = None
    strength: float | None = None
    pinned: bool | None = None
    expires_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted_at: datetime | None = None
    superseded_by: str | None = None
    source_turn_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryEvent(_Result):
    event: str
    old_content: str | None = None
    new_content: str | None = None
    created_at: datetime | None = None
    source_turn_ids: list[str] = Field(default_factory=list)
    reason: str | None = None


class ErasureReceipt(_Result):
    """What `DELETE /v1/users/{id}` removed: counts per store, and when."""

    user_id: str
    counts: dict[str, int] = Field(default_factory=dict)
    erased_at: datetime | None = None


class MemoryPage(_Result):
    """One page of a user's memories; pass `next_cursor` back for the next one."""

    memories: list[Memory] = Field(default_factory=list)
    next_cursor: str | None = None
    total: int = 0


class AddedMemory(_Result):
    """What became of one added memory: added, reinforced, merged or superseded."""

    action: str
    memory_id: str
    #: merged: the memory it merged into; superseded: the memory it replaced
    related_memory_id: str | None = None


class AddResult(_Result):
    results: list[AddedMemory] = Field(default_factory=list)
    embedding_model: str | None = None


class EditedMemory(Memory):
    """The memory after an edit, and the live memories its new content comes close to
    (each with memory_id, content, similarity, relation, reason)."""

    collisions: list[dict[str, Any]] = Field(default_factory=list)


class SessionInfo(_Result):
    """A session: status, counts, last activity; `buffer` and `turn_ids` when read alone."""

    id: str
    status: str | None = None
    turn_count: int | None = None
    last_activity_at: datetime | None = None


class SessionPage(_Result):
    sessions: list[SessionInfo] = Field(default_factory=list)
    next_cursor: str | None = None


class UserInfo(_Result):
    """A user of the tenant with their counts; more detail when read alone."""

    user_id: str


class UserPage(_Result):
    users: list[UserInfo] = Field(default_factory=list)
    next_cursor: str | None = None


class ProfileValue(_Result):
    """A current value (another entity's name, or a literal) and where it came from."""

    relation_id: str
    value: str
    value_entity_id: str | None = None
    memory_id: str | None = None
    source_turn_ids: list[str] = Field(default_factory=list)
    valid_from: datetime | None = None


class ProfileFacts(_Result):
    """One entity's current single-valued facts, keyed by relation (lives_in, ...)."""

    entity_id: str
    name: str
    kind: str | None = None
    slots: dict[str, ProfileValue] = Field(default_factory=dict)


class ProfileRelation(ProfileValue):
    """An entity's current edge: `out` when it is the subject, `in` when the object."""

    relation: str
    direction: str
    single_valued: bool = False


class ProfileEntity(_Result):
    entity_id: str
    name: str
    kind: str | None = None
    mention_count: int = 0
    last_seen_at: datetime | None = None
    relations: list[ProfileRelation] = Field(default_factory=list)


class UserProfile(_Result):
    """What the user's entity memory holds now: facts by entity and the top entities."""

    user_id: str
    facts: list[ProfileFacts] = Field(default_factory=list)
    entities: list[ProfileEntity] = Field(default_factory=list)


class Receipt(_Result):
    """What a deletion removed, with counts per store."""

    counts: dict[str, int] = Field(default_factory=dict)


class TranscriptTurn(_Result):
    """One turn of a session: `stored` when its row is in Postgres (with its
    consolidation `status`), else only in the session's buffer."""

    turn_id: str
    role: str
    content: str
    created_at: datetime | None = None
    stored: bool = True
    status: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Transcript(_Result):
    """A session's turns, oldest first."""

    user_id: str
    session_id: str
    turns: list[TranscriptTurn] = Field(default_factory=list)
