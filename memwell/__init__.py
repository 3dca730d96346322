"""Memwell: memory for AI agents.

The top-level names are the integration surface:
- apps that already run their own model loop enqueue turns over the broker, with no
  HTTP hop (`enqueue_turn`, `enqueue_turns`);
- everything else talks to the REST API through the SDK (`MemoryClient`,
  `AsyncMemoryClient`), whose errors are `APIError` subclasses and whose results are
  typed models.

The code lives in domain packages below this one; only these names are public.
"""

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
__version__ = "0.1.0"
