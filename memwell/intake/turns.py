"""The turn contract shared by the API, the enqueue client and the ingest task.

`IngestPayload` is what travels over the broker under task `memwell.ingest_turns`.
It is versioned: a worker accepts every version it knows and rejects the rest into
the dead-letter path instead of guessing.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from memwell.core.text_rules import is_utf8_text, text_problem

PAYLOAD_VERSION: Literal[1] = 1

#: Hard caps, part of the published schema. Settings may only lower them (then 413).
MAX_CONTENT_CHARS: Final = 32_000
MAX_BATCH_TURNS: Final = 500
MAX_METADATA_BYTES: Final = 64 * 1024


def _utf8(value: str) -> str:
    if not is_utf8_text(value):
        raise ValueError("must be valid Unicode text (no lone surrogates)")
    return value


def first_reason(exc: ValidationError) -> str:
    """The first rule a value broke, as a door reports it (never the value itself)."""
    return str(exc.errors(include_input=False)[0]["msg"]).removeprefix("Value error, ")


def check_text(value: str, what: str = "text") -> str:
    """Refuse what Postgres, a prompt or a viewer cannot take: NUL, control and
    bidirectional control characters, blank, lone surrogates (memwell/core/text_rules.py,
    which a model's answers pass too). Every door's text goes through here, so all
    refuse alike."""
    if (problem := text_problem(value, what)) is not None:
        raise ValueError(problem)
    return value


_ESCAPED_NUL: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def metadata_size(value: dict[str, Any]) -> int:
    """Bytes of the metadata as compact JSON, the way it is stored."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse what jsonb cannot hold (NaN, NUL, lone surrogates) and oversize maps."""
    try:
        # allow_nan=False: Python's JSON reader accepts NaN, Postgres jsonb does not.
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(f"metadata must be plain finite JSON: {exc}") from None
    # json.dumps escapes control characters; jsonb refuses \u0000 even escaped.
    if _ESCAPED_NUL.search(encoded):
        raise ValueError("metadata must not contain NUL characters")
    if not is_utf8_text(encoded):
        raise ValueError("metadata must be valid Unicode text (no lone surrogates)")
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is over {MAX_METADATA_BYTES} bytes as JSON")
    return value


Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"),
    AfterValidator(_utf8),
]
Role = Literal["user", "assistant", "system", "tool"]


_NUMERIC: Final = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def _not_a_number(value: object) -> object:
    # Pydantic would read a number as Unix time, which the schema does not offer and
    # which hides a seconds/milliseconds mix-up (1024 became 1970-01-01T00:17:04).
    if isinstance(value, int | float) or (
        isinstance(value, str) and _NUMERIC.fullmatch(value.strip())
    ):
        raise ValueError("must be an ISO-8601 date-time string, not a number")
    return value


def _in_utc(value: datetime) -> datetime:
    # Python takes UTC offsets up to 23:59, Postgres only up to 15:59 ("-17:21" was a
    # database error, a 500). The same instant in UTC is what timestamptz stores anyway.
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the range of supported date-times") from None


#: A timestamp in a request: ISO-8601 text (or a datetime from Python callers).
Instant = Annotated[datetime, BeforeValidator(_not_a_number), AfterValidator(_in_utc)]


def _utc_if_naive(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


#: An Instant stored as given, read as UTC when it names no zone.
AwareInstant = Annotated[Instant, AfterValidator(_utc_if_naive)]
#: Text to remember: a turn's or a memory's content.
Content = Annotated[
    str,
    Field(min_length=1, max_length=MAX_CONTENT_CHARS),
    AfterValidator(lambda value: check_text(value, "content")),
]
#: Search text: a query to recall by, at every door (REST search and context, MCP).
MAX_QUERY_CHARS: Final = 8_000
Query = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS),
    AfterValidator(lambda value: check_text(value, "query")),
]
#: Free-form JSON kept with a turn or a memory.
Metadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]

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
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    created_at: Instant | None = Field(
        default=None, description="Event time (ISO-8601). Unset: the time it was received."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form JSON kept with the turn. Keys the pipeline reads: "
        "`speaker` (who said it: named in extracted memories instead of 'The user'), "
        "`image_caption` (a shared image, remembered as 'X shared <caption>'), "
        "`agent_id` (copied onto the memories). "
        f"Plain JSON, at most {MAX_METADATA_BYTES} bytes.",
    )

    @field_validator("content")
    @classmethod
    def _content_is_text(cls, value: str) -> str:
        return check_text(value, "content")

    @field_validator("metadata")
    @classmethod
    def _metadata_is_plain_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(value)

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
