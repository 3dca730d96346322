"""The Python SDK for the Memwell REST API: `MemoryClient` (sync) and
`AsyncMemoryClient` (asyncio) over httpx, with typed results and exceptions mapped
from problem+json. Also exported from the top-level `memwell` package."""

from memwell.sdk.aio import AsyncMemoryClient
from memwell.sdk.client import MemoryClient
from memwell.sdk.errors import (
    APIError,
    ForbiddenError,
    InvalidInputError,
    MemwellClientError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from memwell.sdk.models import (
    ChatReply,
    ContextResult,
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ScoredMemory,
    SearchResult,
    TurnsAccepted,
    TurnStatus,
)

__all__ = [
    "APIError",
    "AsyncMemoryClient",
    "ChatReply",
    "ContextResult",
    "ErasureReceipt",
    "ForbiddenError",
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
    "TurnStatus",
    "TurnsAccepted",
    "UnauthorizedError",
    "UnavailableError",
]
