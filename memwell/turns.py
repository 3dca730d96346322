"""The turn contract shared by the API, the enqueue client and the ingest task.

`IngestPayload` is what travels over the broker under task `memwell.ingest_turns`.
It is versioned: a worker accepts every version it knows and rejects the rest into
the dead-letter path instead of guessing.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

PAYLOAD_VERSION: Literal[1] = 1

Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
]
Role = Literal["user", "assistant", "system", "tool"]

#: Event times further out than this are client clock or unit bugs, not history.
MAX_FUTURE_SKEW = timedelta(days=1)
MIN_EVENT_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def new_turn_id() -> str:
    """128 random bits as hex: unique without the cost of building a UUID object."""
    return os.urandom(16).hex()


class TurnIn(BaseModel):
    """One message to remember. `id` is the idempotency key: sending the same id twice
    stores one turn."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    id: Identifier = Field(default_factory=new_turn_id)
    user_id: Identifier
    session_id: Identifier
    role: Role = "user"
    content: str = Field(min_length=1, max_length=32_000)
    created_at: datetime | None = Field(
        default=None, description="Event time (ISO-8601). Unset: the time it was received."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form JSON kept with the turn. Keys the pipeline reads: "
        "`speaker` (who said it: named in extracted memories instead of 'The user'), "
        "`image_caption` (a shared image, remembered as 'X shared <caption>'), "
        "`agent_id` (copied onto the memories).",
    )

    @field_validator("content")
    @classmethod
    def _content_is_text(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("content must not contain NUL bytes")
        if not value.strip():
            raise ValueError("content must not be blank")
        return value

    @field_validator("created_at")
    @classmethod
    def _sane_event_time(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value < MIN_EVENT_TIME or value > datetime.now(UTC) + MAX_FUTURE_SKEW:
            raise ValueError("created_at is outside 1970 .. now + 1 day")
        return value


class IngestPayload(BaseModel):
    """The body of task `memwell.ingest_turns` (version 1)."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = PAYLOAD_VERSION
    tenant: Identifier
    turns: list[TurnIn] = Field(min_length=1)
    request_id: str | None = None
