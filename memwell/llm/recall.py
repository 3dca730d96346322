"""Local mode's responder: answers with the relevant memories, and says so.

It is not a language model and does not pretend to be one. It lets the whole loop
(buffer, retrieval, enqueue, consolidation) run offline, and shows plainly what
memory would hand a real model.
"""

from __future__ import annotations

from memwell.llm.base import ModelReply, ModelRequest

LABEL = "[memwell local recall — no model endpoint configured]"


class RecallResponder:
    name = "memwell-local-recall"

    async def complete(self, request: ModelRequest) -> ModelReply:
        if not request.memories:
            body = "I have nothing in long-term memory that matches this yet."
        else:
            lines = [
                f"- {m.content} (score {m.score:.2f}, {m.created_at:%Y-%m-%d})"
                for m in request.memories
            ]
            body = "Here is what I remember that seems relevant:\n" + "\n".join(lines)
        return ModelReply(content=f"{LABEL}\n{body}", model=self.name)
