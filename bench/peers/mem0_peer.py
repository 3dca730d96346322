"""mem0 open source (mem0ai) with its pgvector store, as its documentation sets it up
without a hosted service: `Memory(config)`, each turn added with `infer=False` (stored
as given, no model call), searched with `filters={"user_id": ...}`.

Its embedder is replaced by one that hands it the vectors embedded up front (and embeds
a question when asked: bench/peers/vectors.py); its model is configured (the config
requires one) but never called, since nothing is inferred. Its search is its own:
semantic over-fetch, then keyword (BM25) and entity boosts. Those two use spaCy's
en_core_web_sm, which mem0 downloads at first use; offline it falls back to the raw
text for keywords and no entity boost, and says so in its log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal

from bench.evals.locomo import Scores, add_turns, turn_document
from bench.harness.locomo_data import Conversation, Question, dia_id
from bench.harness.stack import BenchStack, bare_postgres
from bench.peers.systems import Ingest, OnItsOwnPostgres, System
from bench.peers.vectors import VectorBook
from memwell.db.driver import libpq_url

NAME = "mem0 OSS, pgvector HNSW, infer=False"


class _BookEmbedder:
    """mem0's embedder interface over the vector book."""

    def __init__(self, book: VectorBook) -> None:
        self.book = book

    def embed(
        self, text: str, memory_action: Literal["add", "search", "update"] | None = None
    ) -> list[float]:
        return self.book.embed_lists([text])[0]

    def embed_batch(
        self, texts: list[str], memory_action: Literal["add", "search", "update"] | None = None
    ) -> list[list[float]]:
        return self.book.embed_lists(texts)


@dataclass
class Mem0System(OnItsOwnPostgres):
    memory: Any
    stack: BenchStack
    ingested: Ingest
    name: str = NAME

    async def search(self, conv: Conversation, q: Question) -> Sequence[dict[str, Any]]:
        found = self.memory.search(q.text, top_k=10, filters={"user_id": conv.sample_id})
        results: list[dict[str, Any]] = found["results"]
        return results

    def score(
        self, conv: Conversation, q: Question, hits: Sequence[dict[str, Any]], scores: Scores
    ) -> None:
        ids = [str((h.get("metadata") or {}).get("dia_id", "")) for h in hits]
        add_turns(scores, q, ids, [str(h["memory"]) for h in hits])


def _memory(stack: BenchStack, book: VectorBook) -> Any:
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", str(stack.root / "mem0"))
    from mem0 import Memory  # type: ignore[import-untyped]
    from mem0.configs.base import MemoryConfig  # type: ignore[import-untyped]

    config = MemoryConfig(
        vector_store={
            "provider": "pgvector",
            "config": {
                "connection_string": libpq_url(stack.database_url),
                "collection_name": "memories",
                "embedding_model_dims": book.dimensions,
                "hnsw": True,
            },
        },
        # Required by the config, never called: infer=False, and the embedder is ours.
        embedder={
            "provider": "openai",
            "config": {"api_key": "unused", "embedding_dims": book.dimensions},
        },
        llm={"provider": "openai", "config": {"api_key": "unused"}},
        history_db_path=str(stack.root / "mem0-history.db"),
    )
    memory = Memory(config)
    memory.embedding_model = _BookEmbedder(book)
    return memory


def mem0_system(
    stacks: ExitStack, book: VectorBook, conversations: Sequence[Conversation], buffers: int
) -> System:
    """mem0 on a Postgres of its own, holding every turn of `conversations`."""
    stack = stacks.enter_context(bare_postgres(shared_buffers_mb=buffers))
    memory = _memory(stack, book)
    started = time.perf_counter()
    for conv in conversations:
        for turn in conv.turns:
            memory.add(
                [{"role": "user", "content": turn_document(turn)}],
                user_id=conv.sample_id,
                metadata={"dia_id": dia_id(turn)},
                infer=False,
            )
    seconds = time.perf_counter() - started
    turns = sum(len(c.turns) for c in conversations)
    return Mem0System(
        memory=memory, stack=stack,
        ingested=Ingest(turns=turns, seconds=seconds, embed_s=book.stored_s),
    )  # fmt: skip
