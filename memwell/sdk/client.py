"""`MemoryClient`: the synchronous Python SDK for the Memwell REST API.

    from memwell import MemoryClient

    with MemoryClient("http://localhost:8420", api_key="mw_...") as mw:
        reply = mw.chat(user_id="u1", session_id="s1", message="I moved to Lisbon.")
        ids = mw.add_turns([{"user_id": "u1", "session_id": "s1", "content": "I prefer tea."}])
        mw.wait_for_turns(ids.turn_ids)
        for hit in mw.search(user_id="u1", query="where do I live?").hits:
            print(hit.score, hit.content)

Errors raise subclasses of `memwell.APIError` (NotFoundError, InvalidInputError,
RateLimitedError, ...), mapped from the API's problem+json `type`. Calls that are
safe to repeat are retried on connection errors, 429 and 502-504 (see `_ops`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from memwell.sdk import _ops
from memwell.sdk._events import STREAM_HEADERS, EventReader
from memwell.sdk._transport import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    Addressing,
    backoff_s,
    decode,
    default_headers,
    resolve_base_url,
    should_retry,
    transport_error,
)
from memwell.sdk.models import (
    AddedMemory,
    AddResult,
    ChatReply,
    ChatStreamEvent,
    ContextResult,
    EditedMemory,
    ErasureReceipt,
    Memory,
    MemoryEvent,
    MemoryPage,
    Receipt,
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
DONE_STATES = frozenset({"processed", "failed", "dropped"})


class MemoryClient:
    """A client for one Memwell API. Thread-safe; reuse one per process.

    Args:
        base_url: the API (default: $MEMWELL_API_URL, else http://127.0.0.1:8420).
        api_key: sent as `Authorization: Bearer <key>` (default: $MEMWELL_API_KEY).
        timeout: seconds per HTTP exchange.
        max_retries: extra attempts for calls that are safe to repeat.
        http_client: an httpx.Client to use instead of making one (its base URL and
            headers are kept; the SDK's headers are added per request).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        self.max_retries = max_retries
        headers = default_headers(api_key)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers
        )
        self._to = Addressing(self._http, headers, owned=self._owns_http)

    # --- plumbing ---------------------------------------------------------------------
    def _run(self, call: _ops.Call[T]) -> T:
        request_id = _ops.new_turn_id()  # one id for every attempt of this call
        headers = {**self._to.headers, "X-Request-ID": request_id}
        url = self._to.url(call.path)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method, url, json=call.json, params=call.params or None, headers=headers
                )
            except httpx.TransportError as exc:
                if attempt < self.max_retries and should_retry(exc, None, retryable=call.retryable):
                    time.sleep(backoff_s(attempt))
                    attempt += 1
                    continue
                raise transport_error(exc, call.method, call.path) from exc
            if attempt < self.max_retries and should_retry(
                None, response, retryable=call.retryable
            ):
                time.sleep(backoff_s(attempt, response))
                attempt += 1
                continue
            return call.parse_response(response, request_id)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- chat through Memwell ---------------------------------------------------------
    def chat(self, *, user_id: str, session_id: str, message: str) -> ChatReply:
        """A reply grounded in the session buffer and long-term memory; the exchange
        is remembered. Not retried once sent (it is not idempotent)."""
        return self._run(_ops.chat(user_id=user_id, session_id=session_id, message=message))

    def chat_stream(
        self, *, user_id: str, session_id: str, message: str
    ) -> Iterator[ChatStreamEvent]:
        """`chat`, as the reply is produced: a `memories` event, `token` events (each a
        `delta` of the reply), then `done` (turn_ids, model, timings_ms). A failure
        mid-way raises the mapped APIError; its `body` holds the `turn_ids` of what was
        remembered. Not retried once sent; stopping early remembers what was produced."""
        call = _ops.chat_stream(user_id=user_id, session_id=session_id, message=message)
        request_id = _ops.new_turn_id()
        headers = {**self._to.headers, **STREAM_HEADERS, "X-Request-ID": request_id}
        try:
            with self._http.stream(
                call.method, self._to.url(call.path), json=call.json, headers=headers
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    decode(response, request_id)
                reader = EventReader(request_id)
                for line in response.iter_lines():
                    if (event := reader.feed(line)) is not None:
                        yield event
        except httpx.TransportError as exc:
            raise transport_error(exc, call.method, call.path) from exc

    # --- memory for your own model loop -------------------------------------------------
    def add_turns(self, turns: Iterable[Mapping[str, Any]]) -> TurnsAccepted:
        """Enqueue up to 500 turns for consolidation, all or nothing. Each turn is a
        mapping with user_id, session_id, content and optionally id, role, created_at
        (event time) and metadata. Turns without an id get one here, so a retry is safe."""
        return self._run(_ops.add_turns(_ops.prepare_turns(turns)))

    def add_turn(
        self,
        *,
        user_id: str,
        session_id: str,
        content: str,
        role: str = "user",
        turn_id: str | None = None,
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Enqueue one turn; returns its id."""
        turn = {
            "id": turn_id,
            "user_id": user_id,
            "session_id": session_id,
            "role": role,
            "content": content,
            "created_at": created_at,
            "metadata": dict(metadata) if metadata else None,
        }
        return self.add_turns([turn]).turn_ids[0]

    def turn_status(self, turn_id: str) -> TurnStatus:
        """pending, processed, failed, dropped, or unknown (not persisted yet)."""
        return self._run(_ops.turn_status(turn_id))

    def wait_for_turns(
        self, turn_ids: Iterable[str], *, timeout: float = 60.0, poll: float = 0.25
    ) -> list[TurnStatus]:
        """Poll until every turn is consolidated (or failed/dropped); TimeoutError after
        `timeout` seconds."""
        pending = list(turn_ids)
        done: dict[str, TurnStatus] = {}
        deadline = time.monotonic() + timeout
        while pending:
            for turn_id in list(pending):
                status = self.turn_status(turn_id)
                if status.status in DONE_STATES:
                    done[turn_id] = status
                    pending.remove(turn_id)
            if pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} turns still pending after {timeout} s")
                time.sleep(poll)
        return list(done.values())

    def search(self, *, user_id: str, query: str, **options: Any) -> SearchResult:
        """Memories for `query`, best first, each with its score parts. Options pass
        through to POST /v1/memories/search: k, session_id, agent_id, kinds, metadata,
        since, until, as_of, weights."""
        return self._run(_ops.search(user_id=user_id, query=query, options=options))

    def context(
        self, *, user_id: str, query: str, session_id: str | None = None, **options: Any
    ) -> ContextResult:
        """Ready-to-use context for your own model call: memories (as quoted data),
        the session summary and the recent buffer, inside a token budget (option
        `token_budget`)."""
        return self._run(
            _ops.context(user_id=user_id, session_id=session_id, query=query, options=options)
        )

    def get_memory(self, memory_id: str) -> Memory:
        return self._run(_ops.get_memory(memory_id))

    def delete_memory(self, memory_id: str) -> Memory:
        """Tombstone one memory and return the tombstone: `deleted_at` set, content
        redacted. Its history keeps the event, redacted too."""
        return self._run(_ops.delete_memory(memory_id))

    def memory_history(self, memory_id: str) -> list[MemoryEvent]:
        """Every change to the memory (add, reinforce, merge, supersede, delete), oldest first."""
        return self._run(_ops.memory_history(memory_id))

    def erase_user(self, user_id: str) -> ErasureReceipt:
        """Erase everything about a user (turns, memories, history, sessions, buffers);
        returns the receipt with counts per store. Needs an admin-scoped key."""
        return self._run(_ops.erase_user(user_id))

    # --- memories: list, add, edit ------------------------------------------------------
    def list_memories(
        self,
        *,
        user_id: str,
        kinds: Sequence[str] | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        pinned: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        include: Sequence[str] = (),
        sort: str = "newest",
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """One page of the user's memories (newest, importance or strength first), with
        the total; `metadata` keeps those whose metadata contains it; `include` may name
        "deleted" and "superseded". Pass the page's
        `next_cursor` back as `cursor` for the next one."""
        options = {
            "kind": list(kinds or ()), "session_id": session_id, "agent_id": agent_id,
            "created_after": created_after, "created_before": created_before,
            "pinned": pinned, "metadata": metadata, "include": list(include), "sort": sort,
            "limit": limit,
            "cursor": cursor,
        }  # fmt: skip
        return self._run(_ops.list_memories(user_id=user_id, options=options))

    def add_memories(
        self,
        *,
        user_id: str,
        memories: Iterable[Mapping[str, Any] | str],
        reconcile: bool = True,
    ) -> AddResult:
        """Store up to 500 memories directly (a string is a fact's content; a mapping
        may set kind, importance, metadata, pinned, expires_at, valid_from, valid_to,
        session_id, agent_id, source). With `reconcile`, each is deduplicated, merged or
        supersedes as consolidation would; each result says which. Searchable at once."""
        items = [{"content": m} if isinstance(m, str) else _ops.drop_none(m) for m in memories]
        call = _ops.add_memories(user_id=user_id, memories=items, reconcile=reconcile)
        return self._run(call)

    def add_memory(self, *, user_id: str, content: str, **fields: Any) -> AddedMemory:
        """Store one memory directly (fields as in `add_memories`, plus `reconcile`)."""
        reconcile = bool(fields.pop("reconcile", True))
        memory = {"content": content, **fields}
        added = self.add_memories(user_id=user_id, memories=[memory], reconcile=reconcile)
        return added.results[0]

    def update_memory(self, memory_id: str, **changes: Any) -> EditedMemory:
        """Change content, kind, importance, metadata, pinned or expires_at (None clears
        an expiry). New content is re-embedded; `collisions` lists live memories it now
        comes close to. Each edit is an `update` event in the memory's history."""
        return self._run(_ops.update_memory(memory_id, changes))

    # --- sessions and users -------------------------------------------------------------
    def list_sessions(
        self, *, user_id: str, limit: int = 50, cursor: str | None = None
    ) -> SessionPage:
        """The user's sessions, most recently active first."""
        return self._run(_ops.list_sessions(user_id=user_id, limit=limit, cursor=cursor))

    def get_session(self, session_id: str, *, user_id: str) -> SessionInfo:
        """A session's status, running summary, buffered turns and turn ids."""
        return self._run(_ops.get_session(session_id, user_id=user_id))

    def close_session(self, session_id: str, *, user_id: str) -> SessionInfo:
        """Fold what is left into the session's summary now, as the idle job would."""
        return self._run(_ops.close_session(session_id, user_id=user_id))

    def delete_session(
        self, session_id: str, *, user_id: str, with_memories: bool = False
    ) -> Receipt:
        """Delete a session's buffer, summary and turns (and, if asked, the memories it
        produced); returns counts per store. Needs an admin-scoped key."""
        return self._run(
            _ops.delete_session(session_id, user_id=user_id, with_memories=with_memories)
        )

    def transcript(self, *, user_id: str, session_id: str, limit: int | None = None) -> Transcript:
        """The session's turns, oldest first (the newest `limit`, at most 1,000): stored
        turns and those only in the buffer, each once. An unknown session is empty."""
        return self._run(_ops.transcript(user_id=user_id, session_id=session_id, limit=limit))

    def clear_transcript(
        self, *, user_id: str, session_id: str, turn_ids: Iterable[str] | None = None
    ) -> Receipt:
        """Delete the named stored turns of the session, or with none named all of it
        (turns, row, buffer). Memories already consolidated from them stay."""
        return self._run(
            _ops.clear_transcript(user_id=user_id, session_id=session_id, turn_ids=turn_ids)
        )

    def list_users(self, *, limit: int = 50, cursor: str | None = None) -> UserPage:
        """The tenant's users with their memory and session counts."""
        return self._run(_ops.list_users(limit=limit, cursor=cursor))

    def get_user(self, user_id: str) -> UserInfo:
        """One user's counts by kind, pending turns and last consolidation."""
        return self._run(_ops.get_user(user_id))

    def get_profile(
        self,
        user_id: str,
        *,
        entities_limit: int | None = None,
        relations_limit: int | None = None,
    ) -> UserProfile:
        """The user's current single-valued facts (lives_in, works_at, ...) by entity,
        and their most mentioned entities with current relations; superseded values
        are left out."""
        return self._run(
            _ops.get_profile(
                user_id, entities_limit=entities_limit, relations_limit=relations_limit
            )
        )

    def ready(self) -> bool:
        """True when the API and its database and broker answer."""
        return self._run(_ops.ready())
