"""A user as every door shows it: a list item and the full view.

There is no users table: a user is whoever owns sessions, turns or memories of the
tenant. REST returns these models as they are; their examples are the OpenAPI
document's.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

_USER_EXAMPLE: JsonDict = {
    "user_id": "u1",
    "memory_count": 42,
    "session_count": 7,
    "last_activity_at": "2026-03-01T09:40:12Z",
}


class UserItem(BaseModel):
    """One user in the tenant's list: live memories, sessions and last activity."""

    model_config = ConfigDict(frozen=True, json_schema_extra={"examples": [_USER_EXAMPLE]})

    user_id: str
    memory_count: int = Field(description="Live memories: not deleted, superseded or expired.")
    session_count: int
    last_activity_at: datetime | None = Field(description="The newest session activity.")


class UserPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"users": [_USER_EXAMPLE], "next_cursor": "eyJzIjp7fSwiayI6W119"}]
        }
    )

    users: list[UserItem]
    next_cursor: str | None = Field(description="The next page's `cursor`; null on the last.")


class UserDetail(BaseModel):
    """One user: live memories by kind, sessions, turns not yet consolidated, and when
    consolidation and activity last happened."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    **_USER_EXAMPLE,
                    "memories_by_kind": {
                        "fact": 30,
                        "preference": 8,
                        "event": 3,
                        "summary": 1,
                        "episode": 0,
                    },
                    "pending_turns": 2,
                    "last_consolidated_at": "2026-03-01T09:40:13Z",
                }
            ]
        },
    )

    user_id: str
    memory_count: int = Field(description="Live memories: not deleted, superseded or expired.")
    memories_by_kind: dict[str, int]
    session_count: int
    pending_turns: int = Field(description="Stored turns not yet consolidated.")
    last_consolidated_at: datetime | None = Field(description="When a turn was last processed.")
    last_activity_at: datetime | None = Field(description="The newest session activity.")
