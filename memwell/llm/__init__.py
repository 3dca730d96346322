"""Who answers a chat: a model behind any OpenAI-compatible endpoint, or, in local
mode, the built-in recall responder."""

from memwell.llm.base import ChatModel, ModelReply, ModelRequest
from memwell.llm.factory import build_chat_model

__all__ = ["ChatModel", "ModelReply", "ModelRequest", "build_chat_model"]
