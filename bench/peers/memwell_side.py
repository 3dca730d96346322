"""Memwell as it runs: the turns through the real pipeline (a real worker, stopped once
every turn is consolidated), each question through `retrieve`, the service function
every door calls, in this process, one at a time.

The query cache is off: the peers embed every question, so Memwell does too (a question
asked twice would otherwise skip its embedding on one side only). Questions are asked
`as_of` the conversation's last session, as bench.evals.locomo asks them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from bench.evals.locomo import TENANT, Scores, add_hits
from bench.harness.locomo_data import Conversation, Question
from bench.harness.locomo_store import LocomoStore
from bench.peers.systems import Ingest
from memwell.core.settings import Settings
from memwell.retrieval.search import MemoryHit
from memwell.retrieval.service import RetrievalDeps, build_retrieval, retrieve

__all__ = ["MemwellSystem", "memwell_system"]


@dataclass
class MemwellSystem:
    store: LocomoStore
    deps: RetrievalDeps
    name: str = "memwell"

    @property
    def database_url(self) -> str:
        return self.store.stack.database_url

    @property
    def postgres_pid(self) -> int:
        assert self.store.stack.postgres_pid is not None
        return self.store.stack.postgres_pid

    @property
    def ingested(self) -> Ingest:
        turns = sum(len(c.turns) for c in self.store.conversations)
        return Ingest(turns=turns, seconds=self.store.ingest_s)

    async def search(self, conv: Conversation, q: Question) -> Sequence[MemoryHit]:
        return await retrieve(
            self.deps, tenant=TENANT, user_id=conv.sample_id, query=q.text, k=10,
            as_of=conv.last_date,
        )  # fmt: skip

    def score(
        self, conv: Conversation, q: Question, hits: Sequence[MemoryHit], scores: Scores
    ) -> None:
        add_hits(scores, conv, q, hits)


@asynccontextmanager
async def memwell_system(store: LocomoStore, settings: Settings) -> AsyncIterator[MemwellSystem]:
    """Retrieval built as every door builds it, on the store's database, cache off."""
    uncached = settings.model_copy(update={"query_cache_size": 0})
    deps = build_retrieval(uncached, database_url=store.stack.database_url, access=None)
    await deps.reads.open()
    try:
        yield MemwellSystem(store=store, deps=deps)
    finally:
        await deps.reads.close()
