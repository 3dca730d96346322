"""Memwell: memory for AI agents.

The top-level names are the integration surface:
- apps that already run their own model loop enqueue turns over the broker, with no
  HTTP hop (`enqueue_turn`, `enqueue_turns`);
- everything else talks to the REST API through the SDK (`MemoryClient`,
  `AsyncMemoryClient`), whose errors are `APIError` subclasses.
"""

from memwell.enqueue import enqueue_turn, enqueue_turns
from memwell.sdk import (
    APIError,
    AsyncMemoryClient,
    InvalidInputError,
    MemoryClient,
    MemwellClientError,
    NotFoundError,
    RateLimitedError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from memwell.turns import IngestPayload, TurnIn

__all__ = [
    "APIError",
    "AsyncMemoryClient",
    "IngestPayload",
    "InvalidInputError",
    "MemoryClient",
    "MemwellClientError",
    "NotFoundError",
    "RateLimitedError",
    "TransportError",
    "TurnIn",
    "UnauthorizedError",
    "UnavailableError",
    "enqueue_turn",
    "enqueue_turns",
]
__version__ = "0.1.0"
