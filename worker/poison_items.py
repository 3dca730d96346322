"""Raw items on a queue's list that are not messages: kept as dead letters, never logged.

A producer that pushes onto a queue's Redis list itself (docs/enqueue-contract.md) can
push anything. Kombu's Redis channel pops the item, parses it as JSON and reads it as
a message envelope; when either fails (not JSON, not an object, no `properties`, a body
its encoding cannot decode) the error escaped into Celery's consumer, which stopped
the worker with "Unrecoverable error". The item, already popped, was lost, and every
queue of that worker waited for the restart.

The transport (worker/broker_transport.py) screens each popped item with `problem_of`
before Kombu reads it. One that Kombu could not deliver is kept here as a dead letter
with its bytes (within the size cap and the bound of memwell/intake/raw_letters.py),
the log names only its queue, its size and the problem (once a minute per queue and
problem, with a count), and the channel reads on as if the pop had found nothing. An
item that is an envelope but not a task (a body that is not JSON, an unknown task) goes
on to the consumer, which keeps it the same way (worker/undecodable.py). Neither kind
is replayable: its bytes are not a task's arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from memwell.core.log_throttle import LogThrottle
from worker.undecodable import UNREADABLE_TASK, store

log = logging.getLogger(__name__)
#: A flood of poison items logs one line per queue and problem a minute, with a count.
throttled = LogThrottle(log)

#: The JSON names of what an item held instead of an envelope (an object).
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}  # fmt: skip


def _error_name(exc: BaseException) -> str:
    kind = type(exc)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    return module + kind.__qualname__


def _parse(item: bytes | str) -> Any:
    """`item` parsed as Kombu's channel parses it; orjson first, since every message
    is screened, and Kombu's own parser where orjson is stricter (NaN, a lone
    surrogate escape)."""
    try:
        return orjson.loads(item)
    except orjson.JSONDecodeError:
        return loads(bytes_to_str(item))


def problem_of(item: bytes | str, read: Callable[[dict[str, Any]], object]) -> str | None:
    """Why Kombu's Redis channel could not deliver `item`, in words that hold none of its
    content; None when it can. `read` builds the channel's message from the parsed
    envelope, as the channel will (it decodes the body)."""
    try:
        envelope = _parse(item)
    except Exception:  # not UTF-8, not JSON, nested too deep
        return "not JSON"
    if not isinstance(envelope, dict):
        return f"not a message envelope: {_JSON_KINDS.get(type(envelope), 'not an object')}"
    properties = envelope.get("properties")
    if not isinstance(properties, dict):
        return "no message properties"
    # What the channel's QoS needs to hold the message unacknowledged.
    if not isinstance(properties.get("delivery_tag"), str):
        return "no delivery tag"
    info = properties.get("delivery_info")
    if not (
        isinstance(info, dict)
        and isinstance(info.get("exchange"), str)
        and isinstance(info.get("routing_key"), str)
    ):
        return "no delivery info"
    try:
        read(envelope)
    except Exception as exc:  # a body its encoding cannot decode, headers not an object, ...
        return f"unreadable envelope ({_error_name(exc)})"
    return None


def keep_item(queue: str, item: bytes | str, problem: str) -> None:
    """Keep a raw item of `queue` that is not a message as a dead letter, and log that it
    was: its queue, size and problem only."""
    raw = item if isinstance(item, bytes) else item.encode("utf-8", "surrogateescape")
    outcome = store(
        raw, task_name=UNREADABLE_TASK, error=f"not a message: {problem}", details={"queue": queue}
    )
    throttled.log(
        logging.ERROR, (queue, problem),
        "a raw item on queue %s is not a message (%s): %d bytes; %s",
        queue, problem, len(raw), outcome,
    )  # fmt: skip
