"""The one place that chooses who answers."""

from __future__ import annotations

from memwell.core.settings import Settings
from memwell.llm.base import ChatModel
from memwell.llm.openai_chat import OpenAIChatModel
from memwell.llm.recall import RecallResponder
from memwell.llm.upstream import HttpUpstream, LocalUpstream, Upstream


def build_chat_model(settings: Settings) -> ChatModel:
    if not settings.llm_mode:
        return RecallResponder()
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAIChatModel(
        model=settings.chat_model,
        base_url=settings.openai_base_url,
        api_key=key,
        timeout_s=settings.llm_timeout_s,
    )


def build_upstream(settings: Settings) -> Upstream:
    """The model behind the OpenAI-compatible door: the configured endpoint, or the
    local recall responder."""
    if not settings.llm_mode:
        return LocalUpstream()
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return HttpUpstream(
        base_url=settings.openai_base_url or "https://api.openai.com/v1",
        api_key=key,
        timeout_s=settings.llm_timeout_s,
    )
