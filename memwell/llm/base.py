"""The seam between the chat path and whatever answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from memwell.retrieval.search import MemoryHit


@dataclass(frozen=True)
class ModelRequest:
    #: OpenAI-style messages: [{"role": "system"|"user"|"assistant", "content": str}]
    messages: list[dict[str, str]]
    #: the memories already placed in `messages`, for responders that use them directly
    memories: list[MemoryHit] = field(default_factory=list)


@dataclass(frozen=True)
class ModelReply:
    content: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class StreamUsage:
    """What a stream reports besides its text (the answering model, the tokens), filled
    in as it goes: an endpoint sends usage only in its last chunk, if at all."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    def stream(self, request: ModelRequest, usage: StreamUsage | None = None) -> AsyncIterator[str]:
        """The reply as text deltas, in order; `usage`, when given, is filled in."""
        ...
