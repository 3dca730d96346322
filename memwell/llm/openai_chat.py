"""Chat through any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LM Studio)."""

from __future__ import annotations

from typing import Any

import openai

from memwell.core.errors import ServiceUnavailable
from memwell.llm.base import ModelReply, ModelRequest


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
        # Local servers accept any key, but the SDK insists on one.
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=max_retries,
        )

    async def complete(self, request: ModelRequest) -> ModelReply:
        messages: Any = request.messages
        try:
            response = await self._client.chat.completions.create(
                model=self.name, messages=messages
            )
        except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError) as exc:
            raise ServiceUnavailable(f"model endpoint unavailable: {exc}") from exc
        except openai.APIStatusError as exc:
            raise ServiceUnavailable(f"model endpoint answered {exc.status_code}") from exc
        choice = response.choices[0]
        usage = response.usage
        return ModelReply(
            content=choice.message.content or "",
            model=response.model or self.name,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def aclose(self) -> None:
        await self._client.close()
