"""One client for the pipeline's structured (JSON) calls to any OpenAI-compatible
endpoint: OpenAI, vLLM, Ollama, LM Studio.

- The answer is parsed and validated by a pydantic model. Bad output gets one retry,
  with the parse error shown to the model; a second failure returns None, and the
  caller falls back to local mode for that item. Never lose the turn.
- HTTP 429 and 5xx are retried by the SDK (it honours Retry-After); a failure after
  that, or a timeout, also returns None (local fallback for the item).
- Every call takes one request from the Redis rate limit shared by all workers.
- Token usage goes to llm_usage per tenant and stage; failures and fallbacks too.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from memwell.llm.provider_rate_limit import RedisRateLimiter

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
UsageSink = Callable[..., None]
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)


def parse_json_answer(content: str, schema: type[T]) -> T:
    """The model's answer as `schema`; tolerates code fences and prose around it."""
    text = _FENCE.sub("", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    return schema.model_validate(json.loads(text[start : end + 1]))


class StructuredLLM:
    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int = 2,
        limiter: RedisRateLimiter | None = None,
        usage: UsageSink | None = None,
    ) -> None:
        self.model = model
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self._limiter = limiter
        self._usage = usage

    def call_json(
        self, *, stage: str, tenant: str, system: str, user: str, schema: type[T]
    ) -> T | None:
        """The validated answer, or None when the caller should fall back to local."""
        messages: list[dict[str, str]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        for attempt in range(2):
            content = self._complete(stage, tenant, messages)
            if content is None:
                break
            try:
                return parse_json_answer(content, schema)
            except (ValueError, ValidationError) as exc:
                log.info("%s: unparseable answer (attempt %d): %s", stage, attempt + 1, exc)
                messages += [
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"That answer was not valid: {str(exc)[:500]}. "
                        "Reply again with only the JSON object, in the requested shape.",
                    },
                ]
        self._record(tenant, stage, calls=0, failures=1, fallbacks=1)
        return None

    def _complete(self, stage: str, tenant: str, messages: list[dict[str, str]]) -> str | None:
        if self._limiter is not None:
            self._limiter.acquire()
        payload: Any = messages
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=payload, temperature=0
            )
        except openai.APIError as exc:
            log.warning("%s: model endpoint failed, falling back to local: %s", stage, exc)
            return None
        usage = response.usage
        self._record(
            tenant,
            stage,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        return response.choices[0].message.content or ""

    def _record(self, tenant: str, stage: str, **fields: int) -> None:
        if self._usage is None:
            return
        try:
            self._usage(tenant=tenant, stage=stage, model=self.model, **fields)
        except Exception:  # accounting must never fail the pipeline
            log.exception("could not record LLM usage")

    def close(self) -> None:
        self._client.close()
