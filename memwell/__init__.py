"""Memwell: memory for AI agents.

The top-level names are the integration surface:
- apps that already run their own model loop enqueue turns over the broker, with no
  HTTP hop (`enqueue_turn`, `enqueue_turns`);
- everything else talks to the REST API through the SDK (`MemoryClient`,
  `AsyncMemoryClient`), whose errors are `APIError` subclasses and whose results are
  typed models.

The code lives in domain packages below this one; only these names are public. They
load on first use (PEP 562): `import memwell` stays cheap, so `memwell --help` does not
pay for Celery, SQLAlchemy or the SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memwell.intake.enqueue import enqueue_turn, enqueue_turns
    from memwell.intake.turns import IngestPayload, TurnIn
    from memwell.sdk import (
        APIError,
        AsyncMemoryClient,
        ChatReply,
        ChatStreamEvent,
        ContextResult,
        ErasureReceipt,
        ForbiddenError,
        InvalidInputError,
        Memory,
        MemoryClient,
        MemoryEvent,
        MemwellClientError,
        NotFoundError,
        PayloadTooLargeError,
        RateLimitedError,
        ScoredMemory,
        SearchResult,
        ServerError,
        TransportError,
        TurnsAccepted,
        TurnStatus,
        UnauthorizedError,
        UnavailableError,
    )

_HOMES = {
    "enqueue_turn": "memwell.intake.enqueue",
    "enqueue_turns": "memwell.intake.enqueue",
    "IngestPayload": "memwell.intake.turns",
    "TurnIn": "memwell.intake.turns",
}

__all__ = [
    "APIError",
    "AsyncMemoryClient",
    "ChatReply",
    "ChatStreamEvent",
    "ContextResult",
    "ErasureReceipt",
    "ForbiddenError",
    "IngestPayload",
    "InvalidInputError",
    "Memory",
    "MemoryClient",
    "MemoryEvent",
    "MemwellClientError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ScoredMemory",
    "SearchResult",
    "ServerError",
    "TransportError",
    "TurnIn",
    "TurnStatus",
    "TurnsAccepted",
    "UnauthorizedError",
    "UnavailableError",
    "enqueue_turn",
    "enqueue_turns",
]
# The one place the version is written: the build reads it (pyproject.toml, dynamic),
# and `memwell --version` prints it.
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load a public name from its home module on first use, then keep it here."""
    if name not in __all__:
        raise AttributeError(f"module 'memwell' has no attribute {name!r}")
    value = getattr(import_module(_HOMES.get(name, "memwell.sdk")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
