"""Enqueue turns from any Python app: only the broker URL, no HTTP hop, no database.

    import memwell
    memwell.enqueue_turn(user_id="u1", session_id="s1", content="I moved to Lisbon.")

The task is sent by its stable name (`memwell.ingest_turns`, through
memwell/intake/dispatch.py), so the producer needs none of the worker's code. A client
turn id makes a resend harmless.

What a return promises: the turn is in Redis (its queue and the inbox), and, behind
Sentinel, on MEMWELL_REPLICA_ACKS replicas too (1 by default), so a failover cannot
lose it. When the replicas do not confirm in MEMWELL_REPLICA_ACK_TIMEOUT_MS, or Redis
cannot be reached, it raises (ServiceUnavailable, or redis-py's ConnectionError): the
turn is not acknowledged, and a resend with the same turn id is the remedy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails

from memwell.core.logs import current_request_id
from memwell.core.settings import get_settings
from memwell.intake.dispatch import send_ingest_json
from memwell.intake.turns import IngestPayload, TurnIn


def enqueue_turn(
    *,
    user_id: str,
    session_id: str,
    content: str,
    role: str = "user",
    turn_id: str | None = None,
    created_at: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
    tenant: str | None = None,
    broker_url: str | None = None,
) -> str:
    """Enqueue one turn for consolidation and return its id (the idempotency key)."""
    fields: dict[str, Any] = {
        "user_id": user_id,
        "session_id": session_id,
        "content": content,
        "role": role,
        "created_at": created_at,
        "metadata": dict(metadata or {}),
    }
    if turn_id is not None:
        fields["id"] = turn_id
    return enqueue_turns([fields], tenant=tenant, broker_url=broker_url)[0]


def enqueue_turns(
    turns: Iterable[TurnIn | Mapping[str, Any]],
    *,
    tenant: str | None = None,
    broker_url: str | None = None,
    chunk_size: int = 100,
    request_id: str | None = None,
) -> list[str]:
    """Validate all turns first (so a bad one sends nothing; the error names it by its
    index), then send them in chunks of `chunk_size` turns per task. Returns the turn
    ids in input order.

    `request_id` (default: the current request's) goes into the payload, so the
    worker's log lines for these turns carry it."""
    # Stamp the event time now, not at persist: an erasure drops queued turns by
    # comparing their event time with its own, and the queue may be long.
    received_at = datetime.now(UTC)
    resolved_tenant = tenant or get_settings().default_tenant
    resolved_request_id = request_id or current_request_id()
    ids: list[str] = []
    bodies: list[bytes] = []
    # Each chunk becomes JSON before the next is validated, so only one chunk's models
    # are ever alive. Holding a whole batch of models triggers full garbage
    # collections, which in a sizeable process cost more than the enqueue itself.
    for first, chunk in _chunks(turns, chunk_size):
        validated = _validate(chunk, received_at=received_at, first=first)
        payload = IngestPayload(
            tenant=resolved_tenant, turns=validated, request_id=resolved_request_id
        )
        ids.extend(t.id for t in validated)
        bodies.append(payload.model_dump_json().encode())
    send_ingest_json(bodies, broker_url=broker_url)
    return ids


_TURN_LIST: Final = TypeAdapter(list[TurnIn])


def _chunks(
    turns: Iterable[TurnIn | Mapping[str, Any]], size: int
) -> Iterator[tuple[int, list[TurnIn | Mapping[str, Any]]]]:
    """(index of its first turn, chunk) for consecutive chunks of `size` turns."""
    if size < 1:
        raise ValueError("chunk_size must be at least 1")
    it = iter(turns)
    first = 0
    while chunk := list(islice(it, size)):
        yield first, chunk
        first += len(chunk)


def _validate(
    chunk: list[TurnIn | Mapping[str, Any]], *, received_at: datetime, first: int
) -> list[TurnIn]:
    """The chunk's turns validated in one call, with their event time defaulting to
    `received_at`. Errors name each turn by its index in the whole batch."""
    try:
        return _TURN_LIST.validate_python([_received(t, received_at) for t in chunk])
    except ValidationError as exc:
        raise _renumbered(exc, first) from None


def _received(
    turn: TurnIn | Mapping[str, Any], received_at: datetime
) -> TurnIn | Mapping[str, Any]:
    """The turn with `created_at` set to `received_at` when it has none; anything
    that is not a turn at all is left for validation to refuse."""
    if isinstance(turn, TurnIn):
        return turn if turn.created_at else turn.model_copy(update={"created_at": received_at})
    if isinstance(turn, Mapping) and turn.get("created_at") is None:
        return {**turn, "created_at": received_at}
    return turn


def _renumbered(exc: ValidationError, first: int) -> ValidationError:
    """`exc` (from validating one chunk) with each error located by its turn's index in
    the whole batch rather than in the chunk."""
    errors: list[InitErrorDetails] = []
    for e in exc.errors():
        index, *field = e["loc"]
        error = InitErrorDetails(type=e["type"], loc=(first + int(index), *field), input=e["input"])
        if "ctx" in e:
            error["ctx"] = e["ctx"]
        errors.append(error)
    return ValidationError.from_exception_data("turns", errors)
