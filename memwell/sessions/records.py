"""A session as every door shows it: a list item, the full view, a deletion receipt.

REST returns these models as they are; their examples are the OpenAPI document's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

Status = Literal["open", "closed"]

_SESSION_EXAMPLE: JsonDict = {
    "id": "s-42",
    "user_id": "u1",
    "status": "open",
    "turn_count": 12,
    "created_at": "2026-03-01T09:00:00Z",
    "last_activity_at": "2026-03-01T09:40:12Z",
    "closed_at": None,
}


class SessionItem(BaseModel):
    """One session in a user's list; `summary_excerpt` is the stored summary's start."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [{**_SESSION_EXAMPLE, "summary_excerpt": "- I moved to Lisbon in May."}]
        },
    )

    id: str
    user_id: str
    status: Status
    turn_count: int
    created_at: datetime
    last_activity_at: datetime
    closed_at: datetime | None
    summary_excerpt: str | None


class SessionPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "sessions": [{**_SESSION_EXAMPLE, "summary_excerpt": None}],
                    "next_cursor": "eyJzIjp7Imxpc3QiOiJzZXNzaW9ucyJ9LCJrIjpbXX0",
                }
            ]
        }
    )

    sessions: list[SessionItem]
    #: pass back as `cursor` for the next page; None on the last page
    next_cursor: str | None = Field(description="The next page's `cursor`; null on the last.")


class BufferTurnView(BaseModel):
    """A turn in the short-term buffer, with the tokens it costs the prompt."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    role: str
    content: str
    created_at: str
    tokens: int


class BufferView(BaseModel):
    """The session's Redis buffer: recent turns verbatim and the running summary of
    the turns it evicted. Empty once the session is closed or idle past its TTL."""

    model_config = ConfigDict(frozen=True)

    turns: list[BufferTurnView]
    total_tokens: int
    summary: str | None


class SessionDetail(BaseModel):
    """A session's stored row, its persisted turn ids (newest first) and its buffer.

    A session whose turns are still on their way to Postgres has no row yet: it reads
    as open, with the counts of what is stored so far."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    **_SESSION_EXAMPLE,
                    "summary": "- I moved to Lisbon in May.",
                    "summary_updated_at": "2026-03-01T09:30:00Z",
                    "turn_ids": ["t-12", "t-11"],
                    "buffer": {
                        "turns": [
                            {
                                "turn_id": "t-12",
                                "role": "assistant",
                                "content": "Lisbon in May sounds lovely.",
                                "created_at": "2026-03-01T09:40:12+00:00",
                                "tokens": 7,
                            }
                        ],
                        "total_tokens": 7,
                        "summary": None,
                    },
                }
            ]
        },
    )

    id: str
    user_id: str
    status: Status
    summary: str | None
    summary_updated_at: datetime | None
    turn_count: int
    created_at: datetime | None
    last_activity_at: datetime | None
    closed_at: datetime | None
    turn_ids: list[str] = Field(description="Persisted turns, newest first (at most 200).")
    buffer: BufferView


class SessionDeletion(BaseModel):
    """What deleting a session removed, per store, and when."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "tenant": "acme",
                    "user_id": "u1",
                    "session_id": "s-42",
                    "deleted_at": "2026-03-02T10:00:00Z",
                    "counts": {
                        "turns": 12,
                        "sessions": 1,
                        "memories": 0,
                        "memory_events": 0,
                        "redis_keys": 3,
                    },
                }
            ]
        },
    )

    tenant: str
    user_id: str
    session_id: str
    deleted_at: datetime
    counts: dict[str, int] = Field(
        description="rows deleted per table (turns, sessions, memories, memory_events) "
        "and Redis keys deleted (redis_keys)"
    )
