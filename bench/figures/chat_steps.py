"""The chat path's own steps, each done alone: the yardstick of what the path adds.

Figure 1's floors are what any memory service must pay (a Redis round trip, the query
embedding, a bare top-10); the path pays more: its search ranks by text, entities,
recency and importance, and it writes the exchange to the buffer and the broker. Here
each of its steps runs by itself, from the benchmark's process, with the code the API
runs: the session buffer's read, the service's search statement through its read pool,
the buffer's append and the ingest send. The path's total over the sum of these is its
own cost (the request's handling, the hand-offs between steps); the floors' ratio is
that and the steps' extra work together.

The append goes to a session of its own (the request's session + STEPS_SESSION), so the
path's buffer is what it would be without this run; the sends go to the broker the API
sends to, where nothing consumes them, as nothing consumes the API's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memwell.buffer.session_buffer import SessionBuffer
from memwell.core.redis_clients import async_client
from memwell.core.settings import Settings
from memwell.db.read_pool import TenantReadPool
from memwell.embeddings.local_onnx import MODEL_NAME
from memwell.intake.dispatch import send_ingest_async
from memwell.intake.turns import IngestPayload, TurnIn, new_turn_id
from memwell.retrieval.ann import AnnRegistry
from memwell.retrieval.search import params_from_settings, search_pooled

STEPS_SESSION = "-steps"
#: the recall responder's replies are a few sentences; the step appends one of that size
REPLY = "Here is what I remember about that, from what you told me before. " * 3


class PathSteps:
    """The path's steps but the embedding (the floors time that one), per message:
    `bodies[i]` is request i's body and `owners[i]` its (tenant, user)."""

    def __init__(
        self,
        *,
        database_url: str,
        redis_url: str,
        settings: Settings,
        bodies: Sequence[dict[str, str]],
        owners: Sequence[tuple[str, str]],
        vectors: Sequence[np.ndarray],
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._redis_url = redis_url
        self._settings = settings
        self._bodies, self._owners, self._vectors = bodies, owners, vectors
        self._client = async_client(redis_url)
        self._buffer = SessionBuffer(
            self._client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
        )
        self._reads = TenantReadPool(database_url)
        self._ann = AnnRegistry()
        self.names = (
            "step: buffer read",
            "step: search (the service's statement)",
            "step: buffer append",
            "step: enqueue",
        )
        self.steps: list[Callable[[int], object]] = [
            lambda i: self._run(self._read(i)),
            lambda i: self._run(self._search(i)),
            lambda i: self._run(self._append(i)),
            lambda i: self._run(self._send(i)),
        ]

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self._loop.run_until_complete(coro)

    async def _read(self, i: int) -> object:
        tenant, user = self._owners[i]
        return await self._buffer.read(tenant, user, self._bodies[i]["session_id"])

    async def _search(self, i: int) -> object:
        tenant, user = self._owners[i]
        dims = await self._ann.dims_for(self._reads, tenant, user, MODEL_NAME)
        params = params_from_settings(
            self._settings, tenant=tenant, user_id=user, query_vector=self._vectors[i],
            embedding_model=MODEL_NAME, query_text=self._bodies[i]["message"], ann_dims=dims,
        )  # fmt: skip
        return await search_pooled(self._reads, params)

    def _turns(self, i: int) -> list[TurnIn]:
        _, user = self._owners[i]
        session = self._bodies[i]["session_id"] + STEPS_SESSION
        now = datetime.now(UTC)
        said = (("user", self._bodies[i]["message"]), ("assistant", REPLY))
        return [
            TurnIn(id=new_turn_id(), user_id=user, session_id=session, role=role,
                   content=content, created_at=now)
            for role, content in said
        ]  # fmt: skip

    async def _append(self, i: int) -> object:
        tenant, user = self._owners[i]
        turns = self._turns(i)
        buffered = [
            self._buffer.make_turn(turn_id=t.id, role=t.role, content=t.content,
                                   created_at=(t.created_at or datetime.now(UTC)).isoformat())
            for t in turns
        ]  # fmt: skip
        return await self._buffer.append(tenant, user, turns[0].session_id, buffered)

    async def _send(self, i: int) -> None:
        tenant, _ = self._owners[i]
        payload = IngestPayload(tenant=tenant, turns=self._turns(i))
        await send_ingest_async(self._client, [payload], broker_url=self._redis_url)

    def close(self) -> None:
        self._run(self._reads.close())
        self._run(self._client.aclose())
        self._loop.close()
