"""Where a local query embedding runs: on the loop's thread only for a lone request."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import cast

import numpy as np

from memwell.core import inflight
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
    # Only the two fields `embed_query` reads matter here.
    return cast(RetrievalDeps, SimpleNamespace(embedder=embedder, local_embedder=local))


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
