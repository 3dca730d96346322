"""LangGraph's PostgresStore (langgraph-checkpoint-postgres), as its documentation sets
it up for semantic search: `index` = the dimensions, an embedding function and the
fields to embed; `setup()` once; `put` items in a namespace; `search` a namespace
prefix with a query.

Each turn is one item in the conversation's namespace ("locomo", sample id), keyed by
its LoCoMo dia id, its `text` the turn as a reader needs it (date, speaker, words,
an image's caption: bench.evals.locomo.turn_document). The embedding function looks up
the vectors embedded up front and embeds a question when asked (bench/peers/vectors.py).

Two variants: the store's default index (HNSW, pgvector's defaults, cosine), and no
ANN index at all (`ann_index_config.kind = "flat"`: every search an exact scan), the
store's own way to trade speed for exact results.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import PutOp, SearchItem
from langgraph.store.postgres import PostgresStore

from bench.evals.locomo import Scores, add_turns, turn_document
from bench.harness.locomo_data import Conversation, Question, dia_id
from bench.harness.stack import BenchStack
from bench.peers.systems import Ingest, OnItsOwnPostgres
from bench.peers.vectors import VectorBook
from memwell.db.driver import libpq_url

Kind = Literal["hnsw", "flat"]
LABELS: dict[Kind, str] = {
    "hnsw": "LangGraph PostgresStore, HNSW (default)",
    "flat": "LangGraph PostgresStore, exact (no ANN index)",
}
#: puts per `batch` call: one embedding call and one pipelined round trip per chunk
PUT_CHUNK = 50


def namespace(conv: Conversation) -> tuple[str, str]:
    return ("locomo", conv.sample_id)


@dataclass
class LangGraphSystem(OnItsOwnPostgres):
    store: PostgresStore
    stack: BenchStack
    kind: Kind
    ingested: Ingest

    @property
    def name(self) -> str:
        return LABELS[self.kind]

    async def search(self, conv: Conversation, q: Question) -> Sequence[SearchItem]:
        return self.store.search(namespace(conv), query=q.text, limit=10)

    def score(
        self, conv: Conversation, q: Question, hits: Sequence[SearchItem], scores: Scores
    ) -> None:
        add_turns(scores, q, [h.key for h in hits], [str(h.value["text"]) for h in hits])


def _item(conv: Conversation, index: int) -> tuple[str, dict[str, Any]]:
    turn = conv.turns[index]
    speaker = str(turn.metadata.get("speaker", ""))
    assert turn.created_at is not None
    value = {"text": turn_document(turn), "speaker": speaker, "date": turn.created_at.isoformat()}
    return dia_id(turn), value


def _put_all(store: PostgresStore, conversations: Sequence[Conversation]) -> float:
    """Every turn as an item, in chunks; returns the seconds it took."""
    started = time.perf_counter()
    for conv in conversations:
        ops = [PutOp(namespace(conv), *_item(conv, i)) for i in range(len(conv.turns))]
        for start in range(0, len(ops), PUT_CHUNK):
            store.batch(ops[start : start + PUT_CHUNK])
    return time.perf_counter() - started


@contextmanager
def langgraph_system(
    stack: BenchStack, kind: Kind, book: VectorBook, conversations: Sequence[Conversation]
) -> Iterator[LangGraphSystem]:
    """A PostgresStore on `stack`'s database holding every turn of `conversations`,
    whose texts `book` holds (`book.stored_s`: what embedding them took)."""
    index: Any = {
        "dims": book.dimensions,
        "embed": book.embed_lists,
        "fields": ["text"],
        "ann_index_config": {"kind": kind},
    }
    with PostgresStore.from_conn_string(libpq_url(stack.database_url), index=index) as store:
        store.setup()
        seconds = _put_all(store, conversations)
        turns = sum(len(c.turns) for c in conversations)
        yield LangGraphSystem(
            store=store, stack=stack, kind=kind,
            ingested=Ingest(turns=turns, seconds=seconds, embed_s=book.stored_s),
        )  # fmt: skip
