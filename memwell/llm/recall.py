"""Local mode's responder: answers with the relevant memories, and says so.

It is not a language model and does not pretend to be one. It lets the whole loop
(buffer, retrieval, enqueue, consolidation) run offline, and shows plainly what
memory would hand a real model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from memwell.llm.base import ModelReply, ModelRequest, StreamUsage

LABEL = "[memwell local recall — no model endpoint configured]"


class RecallResponder:
    name = "memwell-local-recall"

    def _text(self, request: ModelRequest) -> str:
        if not request.memories:
            body = "I have nothing in long-term memory that matches this yet."
        else:
            lines = [
                f"- {m.content} (score {m.score:.2f}, {m.created_at:%Y-%m-%d})"
                for m in request.memories
            ]
            body = "Here is what I remember that seems relevant:\n" + "\n".join(lines)
        return f"{LABEL}\n{body}"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(content=self._text(request), model=self.name)

    async def stream(
        self, request: ModelRequest, usage: StreamUsage | None = None
    ) -> AsyncIterator[str]:
        # Line by line: the same text as `complete`, in the pieces a stream would bring.
        for line in self._text(request).splitlines(keepends=True):
            yield line
