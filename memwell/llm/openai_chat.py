"""Chat through any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LM Studio).

A reply has a total time (MEMWELL_LLM_TIMEOUT_S), the SDK's retries included: httpx's
timeout bounds each read alone, and an endpoint that drips its answer would hold the
request for as long as it liked. A stream is bounded per read only: it is meant to
last as long as the reply, and its reader sees every token as it comes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import openai

from memwell.core.errors import ServiceUnavailable
from memwell.llm.base import ModelReply, ModelRequest, StreamUsage
from memwell.llm.structured import failure


@contextmanager
def _endpoint_errors() -> Iterator[None]:
    """The endpoint's failures as ServiceUnavailable, the same for a reply and a stream."""
    try:
        yield
    except TimeoutError as exc:
        raise ServiceUnavailable("model endpoint unavailable: no reply in time") from exc
    except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError) as exc:
        raise ServiceUnavailable(f"model endpoint unavailable: {failure(exc)}") from exc
    except openai.APIStatusError as exc:
        raise ServiceUnavailable(f"model endpoint answered {exc.status_code}") from exc
    except openai.APIError as exc:  # an error event inside a stream
        raise ServiceUnavailable(f"model endpoint failed: {exc.message}") from exc


class OpenAIChatModel:
    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int = 2,
    ) -> None:
        self.name = model
        self.timeout_s = timeout_s
        # Local servers accept any key, but the SDK insists on one.
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=max_retries,
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        messages: Any = request.messages
        with _endpoint_errors():
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.chat.completions.create(
                    model=self.name, messages=messages
                )
        choice = response.choices[0]
        usage = response.usage
        return ModelReply(
            content=choice.message.content or "",
            model=response.model or self.name,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def stream(
        self, request: ModelRequest, usage: StreamUsage | None = None
    ) -> AsyncIterator[str]:
        messages: Any = request.messages
        report = usage or StreamUsage(model=self.name)
        with _endpoint_errors():
            chunks = await self._client.chat.completions.create(
                model=self.name,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        # Closing the stream releases the connection, also when our caller stops early.
        async with chunks:
            with _endpoint_errors():
                async for chunk in chunks:
                    report.model = chunk.model or report.model
                    if chunk.usage is not None:
                        report.prompt_tokens = chunk.usage.prompt_tokens
                        report.completion_tokens = chunk.usage.completion_tokens
                    for choice in chunk.choices:
                        if choice.index == 0 and choice.delta.content:
                            yield choice.delta.content

    async def aclose(self) -> None:
        await self._client.close()
