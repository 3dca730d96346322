"""The REST calls, described once as data and shared by the sync and async clients.

Each function returns a `Call`: method, path, body, whether a retry is safe, and how
to parse the answer. The clients only execute them, so both stay thin and agree.

Retry safety: GET, PUT and DELETE are idempotent; so are the read-only POSTs
(search, context); and so is POST /v1/turns, because every turn carries an id
(made here, client-side, when the caller gave none) that the server stores once.
POST /v1/chat is not: a retried chat would ask the model twice and remember the
exchange twice, so it is retried only when the connection never opened.

search, context, the /v1/memories/{id} calls and erase_user follow the shapes the
retrieval and tenancy issues document; their answers are parsed leniently (extra
fields kept, a list bare or under a key) and they are verified against the real
endpoints by the integration run once those land.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from memwell.sdk._text import refuse_unsendable
from memwell.sdk._transport import decode
from memwell.sdk.models import (
    AddResult,
    ChatReply,
    ContextResult,
    EditedMemory,
    ErasureReceipt,
    Memory,
    MemoryEvent,
    MemoryPage,
    Receipt,
    ScoredMemory,
    SearchResult,
    SessionInfo,
    SessionPage,
    Transcript,
    TurnsAccepted,
    TurnStatus,
    UserInfo,
    UserPage,
    UserProfile,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    retryable: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    #: the answer straight from its bytes, when it has the usual shape (None: use `parse`)
    parse_json: Callable[[bytes], T | None] | None = None

    def __post_init__(self) -> None:
        # Every call is built here, so its text is checked here, once, for all methods.
        refuse_unsendable(self.json, ("body",))
        refuse_unsendable(self.params, ("query",))

    def parse_response(self, response: httpx.Response, request_id: str) -> T:
        """The result of a success; the mapped APIError for anything else."""
        if self.parse_json is not None and response.status_code < 400 and response.content:
            parsed = self.parse_json(response.content)
            if parsed is not None:
                return parsed
        return self.parse(decode(response, request_id))


M = TypeVar("M", bound=BaseModel)


def from_json(model: type[M]) -> Callable[[bytes], M | None]:
    """Validate the bytes as `model` in one step (JSON parsed by pydantic, not twice in
    Python); None when they do not fit, so the lenient parser gets its say."""

    def parse(content: bytes) -> M | None:
        try:
            return model.model_validate_json(content)
        except ValidationError:
            return None

    return parse


def _seg(value: str) -> str:
    """A path segment, escaped: ids are the caller's strings."""
    refuse_unsendable(str(value), ("path",))
    return quote(str(value), safe="")


def drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v.isoformat() if isinstance(v, datetime) else v for k, v in body.items() if v is not None
    }


def _items(body: Any, *keys: str) -> list[Any]:
    """A list answer, bare or under one of `keys`."""
    if isinstance(body, list):
        return body
    for key in keys:
        if isinstance(body, dict) and isinstance(body.get(key), list):
            return list(body[key])
    return []


def new_turn_id() -> str:
    return uuid.uuid4().hex


def prepare_turns(turns: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Give every turn an id now, so a retried batch is the same batch."""
    prepared = []
    for turn in turns:
        item = drop_none(turn)
        item.setdefault("id", new_turn_id())
        prepared.append(item)
    return prepared


def chat(*, user_id: str, session_id: str, message: str) -> Call[ChatReply]:
    body = {"user_id": user_id, "session_id": session_id, "message": message}
    return Call(
        "POST", "/v1/chat", ChatReply.model_validate, json=body, parse_json=from_json(ChatReply)
    )


def chat_stream(*, user_id: str, session_id: str, message: str) -> Call[None]:
    # Read event by event as it arrives (memwell/sdk/_events.py), never parsed whole.
    body = {"user_id": user_id, "session_id": session_id, "message": message, "stream": True}
    return Call("POST", "/v1/chat", lambda raw: None, json=body)


def add_turns(turns: list[dict[str, Any]]) -> Call[TurnsAccepted]:
    return Call(
        "POST", "/v1/turns", TurnsAccepted.model_validate, json={"turns": turns}, retryable=True
    )


def turn_status(turn_id: str) -> Call[TurnStatus]:
    return Call("GET", f"/v1/turns/{_seg(turn_id)}", TurnStatus.model_validate, retryable=True)


def search(*, user_id: str, query: str, options: Mapping[str, Any]) -> Call[SearchResult]:
    body = drop_none({"user_id": user_id, "query": query, **options})

    def parse(raw: Any) -> SearchResult:
        hits = [ScoredMemory.model_validate(h) for h in _items(raw, "hits", "memories", "results")]
        extra = raw if isinstance(raw, dict) else {}
        return SearchResult.model_validate({**extra, "hits": hits})

    def parse_json(content: bytes) -> SearchResult | None:
        # The usual shape only: a list under another key is for `parse`.
        result = from_json(SearchResult)(content)
        return result if result is not None and "hits" in result.model_fields_set else None

    return Call(
        "POST", "/v1/memories/search", parse, json=body, retryable=True, parse_json=parse_json
    )


def context(
    *, user_id: str, session_id: str | None, query: str, options: Mapping[str, Any]
) -> Call[ContextResult]:
    body = drop_none({"user_id": user_id, "session_id": session_id, "query": query, **options})
    return Call(
        "POST", "/v1/context", ContextResult.model_validate, json=body, retryable=True,
        parse_json=from_json(ContextResult),
    )  # fmt: skip


def get_memory(memory_id: str) -> Call[Memory]:
    return Call("GET", f"/v1/memories/{_seg(memory_id)}", Memory.model_validate, retryable=True)


def delete_memory(memory_id: str) -> Call[Memory]:
    # The server answers with the tombstone (deleted_at set, content redacted).
    return Call("DELETE", f"/v1/memories/{_seg(memory_id)}", Memory.model_validate, retryable=True)


def memory_history(memory_id: str) -> Call[list[MemoryEvent]]:
    def parse(raw: Any) -> list[MemoryEvent]:
        return [MemoryEvent.model_validate(e) for e in _items(raw, "events", "history")]

    return Call("GET", f"/v1/memories/{_seg(memory_id)}/history", parse, retryable=True)


def erase_user(user_id: str) -> Call[ErasureReceipt]:
    def parse(raw: Any) -> ErasureReceipt:
        data = dict(raw) if isinstance(raw, dict) else {}
        data.setdefault("user_id", user_id)
        return ErasureReceipt.model_validate(data)

    return Call("DELETE", f"/v1/users/{_seg(user_id)}", parse, retryable=True)


def ready() -> Call[bool]:
    return Call(
        "GET", "/readyz", lambda raw: bool(raw and raw.get("status") == "ready"), retryable=True
    )


def _query(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters without the unset ones; lists repeat the key."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None or (isinstance(value, list | tuple) and not value):
            continue
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, datetime):
            value = value.isoformat()
        out[key] = list(value) if isinstance(value, list | tuple) else value
    return out


def list_memories(*, user_id: str, options: Mapping[str, Any]) -> Call[MemoryPage]:
    options = dict(options)
    if options.get("metadata") is not None:
        # One query parameter, a JSON object (JSONB containment on the server).
        options["metadata"] = json.dumps(options["metadata"], separators=(",", ":"))
    params = _query({"user_id": user_id, **options})
    return Call("GET", "/v1/memories", MemoryPage.model_validate, retryable=True, params=params)


def add_memories(
    *, user_id: str, memories: list[dict[str, Any]], reconcile: bool
) -> Call[AddResult]:
    # Not retried once sent: a reconciled add that ran twice reinforces twice.
    body = {"user_id": user_id, "memories": memories, "reconcile": reconcile}
    return Call("POST", "/v1/memories", AddResult.model_validate, json=body)


def update_memory(memory_id: str, changes: Mapping[str, Any]) -> Call[EditedMemory]:
    body = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in changes.items()}
    return Call(
        "PATCH", f"/v1/memories/{_seg(memory_id)}", EditedMemory.model_validate,
        json=body, retryable=True,
    )  # fmt: skip


def list_sessions(*, user_id: str, limit: int, cursor: str | None) -> Call[SessionPage]:
    params = _query({"user_id": user_id, "limit": limit, "cursor": cursor})
    return Call("GET", "/v1/sessions", SessionPage.model_validate, retryable=True, params=params)


def get_session(session_id: str, *, user_id: str) -> Call[SessionInfo]:
    return Call(
        "GET", f"/v1/sessions/{_seg(session_id)}", SessionInfo.model_validate,
        retryable=True, params={"user_id": user_id},
    )  # fmt: skip


def close_session(session_id: str, *, user_id: str) -> Call[SessionInfo]:
    return Call(
        "POST", f"/v1/sessions/{_seg(session_id)}/close", SessionInfo.model_validate,
        retryable=True, params={"user_id": user_id},
    )  # fmt: skip


def delete_session(session_id: str, *, user_id: str, with_memories: bool) -> Call[Receipt]:
    return Call(
        "DELETE", f"/v1/sessions/{_seg(session_id)}", Receipt.model_validate, retryable=True,
        params={"user_id": user_id, "with_memories": str(with_memories).lower()},
    )  # fmt: skip


def list_users(*, limit: int, cursor: str | None) -> Call[UserPage]:
    params = _query({"limit": limit, "cursor": cursor})
    return Call("GET", "/v1/users", UserPage.model_validate, retryable=True, params=params)


def get_user(user_id: str) -> Call[UserInfo]:
    def parse(raw: Any) -> UserInfo:
        data = dict(raw) if isinstance(raw, dict) else {}
        data.setdefault("user_id", user_id)
        return UserInfo.model_validate(data)

    return Call("GET", f"/v1/users/{_seg(user_id)}", parse, retryable=True)


def get_profile(
    user_id: str, *, entities_limit: int | None, relations_limit: int | None
) -> Call[UserProfile]:
    params = _query({"entities_limit": entities_limit, "relations_limit": relations_limit})
    return Call(
        "GET", f"/v1/users/{_seg(user_id)}/profile", UserProfile.model_validate,
        retryable=True, params=params,
    )  # fmt: skip


def transcript(*, user_id: str, session_id: str, limit: int | None) -> Call[Transcript]:
    params = _query({"user_id": user_id, "session_id": session_id, "limit": limit})
    return Call("GET", "/v1/turns", Transcript.model_validate, retryable=True, params=params)


def clear_transcript(
    *, user_id: str, session_id: str, turn_ids: Iterable[str] | None
) -> Call[Receipt]:
    params = _query({"user_id": user_id, "session_id": session_id, "turn_id": list(turn_ids or ())})
    return Call("DELETE", "/v1/turns", Receipt.model_validate, retryable=True, params=params)
