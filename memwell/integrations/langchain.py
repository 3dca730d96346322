"""LangChain over Memwell (extra `memwell[langchain]`): a chat message history whose
messages are a Memwell session's turns, and a retriever over Memwell's search.

    from memwell import MemoryClient
    from memwell.integrations.langchain import MemwellChatMessageHistory, MemwellRetriever

    mw = MemoryClient("http://localhost:8420", api_key="mw_...")
    history = MemwellChatMessageHistory(mw, user_id="u1", session_id="s1")
    retriever = MemwellRetriever(client=mw, user_id="u1", k=5)

Messages go in as turns (POST /v1/turns), so the pipeline consolidates them into
memories like any conversation; they come back from the session's transcript, its
stored turns and buffer (GET /v1/turns). Each turn keeps the whole message in its
metadata ("langchain"), so tool calls, names and ids come back as they went in; a
message with no text (an AI message that only calls tools) is stored with a short
placeholder text naming the tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from memwell.sdk import MemoryClient, TranscriptTurn

#: the turn metadata key that holds the whole message
META = "langchain"
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _text(message: BaseMessage) -> str:
    text = message.text.strip()
    if text:
        return text
    calls = [c["name"] for c in getattr(message, "tool_calls", None) or []]
    return f"(calls tools: {', '.join(calls)})" if calls else f"({message.type} message)"


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return message.role if message.role in ROLES.values() else "user"
    return ROLES.get(message.type, "user")


def _message(turn: TranscriptTurn) -> BaseMessage:
    stored = turn.metadata.get(META)
    if isinstance(stored, dict):
        return messages_from_dict([stored])[0]
    # A turn another door sent (the chat path, the enqueue client): its role decides.
    if turn.role == "assistant":
        return AIMessage(content=turn.content, id=turn.turn_id)
    if turn.role == "system":
        return SystemMessage(content=turn.content, id=turn.turn_id)
    if turn.role == "tool":
        return ToolMessage(content=turn.content, tool_call_id=turn.turn_id, id=turn.turn_id)
    return HumanMessage(content=turn.content, id=turn.turn_id)


class MemwellChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history backed by one Memwell session of one user."""

    def __init__(self, client: MemoryClient, *, user_id: str, session_id: str) -> None:
        self.client = client
        self.user_id = user_id
        self.session_id = session_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        transcript = self.client.transcript(user_id=self.user_id, session_id=self.session_id)
        return [_message(turn) for turn in transcript.turns]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if not messages:
            return
        turns = [
            {
                "user_id": self.user_id, "session_id": self.session_id, "role": _role(m),
                "content": _text(m), "metadata": {META: message_to_dict(m)},
            }
            for m in messages
        ]  # fmt: skip
        self.client.add_turns(turns)

    def clear(self) -> None:
        """Delete the session's turns and buffer; memories made from them stay."""
        self.client.clear_transcript(user_id=self.user_id, session_id=self.session_id)


class MemwellRetriever(BaseRetriever):
    """Memwell's hybrid, recency-weighted search as LangChain `Document`s; each
    document's metadata holds the memory's id, kind and the score's parts."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: MemoryClient
    user_id: str
    k: int = 10
    #: passed through to the search: kinds, metadata, agent_id, session_id, ...
    filters: dict[str, Any] | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        options: dict[str, Any] = {"k": self.k}
        if self.filters:
            options["filters"] = self.filters
        hits = self.client.search(user_id=self.user_id, query=query, **options).hits
        return [
            Document(
                page_content=hit.content,
                id=hit.id,
                metadata={
                    "id": hit.id, "kind": hit.kind, "score": hit.score,
                    "relevance": hit.relevance, "importance": hit.importance,
                    "recency": hit.recency, "similarity": hit.similarity,
                    "text_rank": hit.text_rank,
                    "created_at": hit.created_at.isoformat() if hit.created_at else None,
                    "session_id": hit.session_id, "agent_id": hit.agent_id,
                    "source_turn_ids": hit.source_turn_ids, "metadata": hit.metadata,
                },
            )
            for hit in hits
        ]  # fmt: skip


__all__ = ["MemwellChatMessageHistory", "MemwellRetriever"]
