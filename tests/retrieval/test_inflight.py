"""Where a local query embedding runs: on the loop's thread only for a lone request."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

import numpy as np

from memwell.core import inflight
from memwell.embeddings import CachedQueryEmbedder
from memwell.embeddings.query_batcher import QueryBatcher
from memwell.retrieval.service import RetrievalDeps, embed_query


class _ThreadRecorder:
    """Stands in for the query embedder: records which thread embedded."""

    model_name = "test"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.threads.append(threading.get_ident())
        return np.zeros(3, dtype=np.float32)


def _deps(embedder: _ThreadRecorder, *, local: bool) -> RetrievalDeps:
    # Only the fields `embed_query` reads matter here; no batcher (MEMWELL_QUERY_BATCH=1).
    return cast(
        RetrievalDeps, SimpleNamespace(embedder=embedder, local_embedder=local, batcher=None)
    )


def test_a_lone_request_embeds_on_the_loop_thread_and_a_busy_one_does_not() -> None:
    embedder = _ThreadRecorder()

    async def run() -> tuple[int, list[int]]:
        loop_thread = threading.get_ident()
        with inflight.serving():
            assert inflight.alone()
            await embed_query(_deps(embedder, local=True), "alone")
            with inflight.serving():  # a second request in flight
                assert not inflight.alone()
                await embed_query(_deps(embedder, local=True), "busy")
        # An embedding endpoint is a network call: never on the loop, even alone.
        await embed_query(_deps(embedder, local=False), "remote")
        return loop_thread, embedder.threads

    loop_thread, threads = asyncio.run(run())
    assert threads[0] == loop_thread
    assert threads[1] != loop_thread
    assert threads[2] != loop_thread
    assert inflight.alone()


class _ThreadModel:
    """Stands in for the model behind the batcher's cache: records threads and batches."""

    model_name = "test"
    dimensions = 3

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[str]]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((threading.get_ident(), list(texts)))
        return np.ones((len(texts), 3), dtype=np.float32)


def test_with_the_batcher_a_lone_request_still_embeds_on_the_loop_thread() -> None:
    model = _ThreadModel()
    cache = CachedQueryEmbedder(model, capacity=0)
    deps = cast(
        RetrievalDeps,
        SimpleNamespace(embedder=cache, local_embedder=True, batcher=QueryBatcher(cache)),
    )

    async def run() -> int:
        with inflight.serving():
            await embed_query(deps, "alone")
            with inflight.serving():
                await asyncio.gather(embed_query(deps, "busy 1"), embed_query(deps, "busy 2"))
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert model.calls[0] == (loop_thread, ["alone"])
    # Busy: on the batcher's thread (whether "busy 2" joined "busy 1" depends on whether
    # the thread had taken "busy 1" yet: nothing waits for a batch to fill).
    assert sorted(t for _, texts in model.calls[1:] for t in texts) == ["busy 1", "busy 2"]
    assert all(thread != loop_thread for thread, _ in model.calls[1:])
