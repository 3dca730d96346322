"""The query batcher: concurrent queries share one model call, each caller gets its own
vector (or the model's error), a lone inline query runs at once on its caller's thread.

The model here is a plain function of the text, gated by an event, so a test decides
when the model call in progress ends and which queries have queued behind it."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from memwell.core.settings import Settings
from memwell.embeddings import CachedQueryEmbedder
from memwell.embeddings.base import EmbeddingError, FloatMatrix, FloatVector
from memwell.embeddings.query_batcher import QueryBatcher, build_query_batcher

DIM = 8


def vector_of(text: str) -> FloatVector:
    digest = hashlib.sha256(text.encode()).digest()
    v = np.array([b - 127.5 for b in digest[:DIM]], dtype=np.float32)
    return v / np.linalg.norm(v)


class GatedModel:
    """Embeds by `vector_of`; each call blocks until `release` is set (set by default)."""

    model_name = "gated"
    dimensions = DIM

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.threads: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_on = fail_on

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(list(texts))
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.release.wait(10), "the test never released the model"
        if self.fail_on is not None and self.fail_on in texts:
            raise EmbeddingError(f"cannot embed {self.fail_on!r}")
        return np.stack([vector_of(t) for t in texts])


def _batcher(model: GatedModel, *, max_batch: int = 32, window_s: float = 0.0) -> QueryBatcher:
    cache = CachedQueryEmbedder(model, capacity=100)
    return QueryBatcher(cache, max_batch=max_batch, window_s=window_s)


async def _queued_behind_a_running_call(
    batcher: QueryBatcher, model: GatedModel, first: str, rest: list[str]
) -> list[asyncio.Task[FloatVector]]:
    """Start `first`, hold the model inside its call, then queue `rest` behind it."""
    model.release.clear()
    model.started.clear()
    tasks = [asyncio.create_task(batcher.embed_query(first))]
    await asyncio.to_thread(model.started.wait, 10)
    tasks += [asyncio.create_task(batcher.embed_query(t)) for t in rest]
    await asyncio.sleep(0)  # each task runs up to its wait: in the queue
    assert batcher.queued == len(rest)
    return tasks


def test_queries_waiting_behind_a_model_call_embed_together() -> None:
    asyncio.run(_queries_waiting_behind_a_model_call_embed_together())


async def _queries_waiting_behind_a_model_call_embed_together() -> None:
    model = GatedModel()
    batcher = _batcher(model)
    rest = [f"question {i}" for i in range(10)]
    tasks = await _queued_behind_a_running_call(batcher, model, "first", rest)
    assert model.calls == [["first"]]  # the others are queued, not in their own calls
    model.release.set()
    vectors = await asyncio.gather(*tasks)

    assert model.calls == [["first"], rest]
    for text, vector in zip(["first", *rest], vectors, strict=True):
        np.testing.assert_array_equal(vector, vector_of(text))
    assert set(model.threads) == {model.threads[0]} and model.threads[0].startswith("query-batch")
    assert (batcher.batches, batcher.batched) == (2, 11)


def test_a_batch_holds_at_most_max_batch_and_each_text_once() -> None:
    asyncio.run(_a_batch_holds_at_most_max_batch_and_each_text_once())


async def _a_batch_holds_at_most_max_batch_and_each_text_once() -> None:
    model = GatedModel()
    batcher = _batcher(model, max_batch=4)
    rest = ["a", "b", "a", "c", "d", "e", "f"]  # "a" twice: one row, two answers
    tasks = await _queued_behind_a_running_call(batcher, model, "first", rest)
    model.release.set()
    vectors = await asyncio.gather(*tasks)

    assert model.calls == [["first"], ["a", "b", "c"], ["d", "e", "f"]]
    for text, vector in zip(["first", *rest], vectors, strict=True):
        np.testing.assert_array_equal(vector, vector_of(text))


def test_the_model_error_reaches_every_caller_of_its_call_only() -> None:
    asyncio.run(_the_model_error_reaches_every_caller_of_its_call_only())


async def _the_model_error_reaches_every_caller_of_its_call_only() -> None:
    model = GatedModel(fail_on="bad 1")
    batcher = _batcher(model, max_batch=3)
    rest = ["ok 1", "bad 1", "ok 2", "ok 3"]
    tasks = await _queued_behind_a_running_call(batcher, model, "first", rest)
    model.release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)

    assert model.calls == [["first"], ["ok 1", "ok 2", "bad 1"], ["ok 3"]]  # by length
    np.testing.assert_array_equal(results[0], vector_of("first"))
    for failed in results[1:4]:
        assert isinstance(failed, EmbeddingError) and "bad 1" in str(failed)
    np.testing.assert_array_equal(results[4], vector_of("ok 3"))
    # The batcher goes on after a failure.
    np.testing.assert_array_equal(await batcher.embed_query("later"), vector_of("later"))


def test_texts_of_unlike_lengths_embed_in_separate_calls() -> None:
    asyncio.run(_texts_of_unlike_lengths_embed_in_separate_calls())


async def _texts_of_unlike_lengths_embed_in_separate_calls() -> None:
    # Each call pads its texts to the longest: short ones go apart from long ones.
    model = GatedModel(fail_on="x" * 40)
    batcher = _batcher(model)
    rest = ["x" * 40, "y" * 10, "z" * 36, "w" * 12]
    tasks = await _queued_behind_a_running_call(batcher, model, "first", rest)
    model.release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)

    assert model.calls == [["first"], ["y" * 10, "w" * 12], ["z" * 36, "x" * 40]]
    np.testing.assert_array_equal(results[2], vector_of("y" * 10))
    np.testing.assert_array_equal(results[4], vector_of("w" * 12))
    # A failed call fails its own callers only.
    assert isinstance(results[1], EmbeddingError) and isinstance(results[3], EmbeddingError)


def test_a_lone_inline_query_runs_at_once_on_its_own_thread() -> None:
    asyncio.run(_a_lone_inline_query_runs_at_once_on_its_own_thread())


async def _a_lone_inline_query_runs_at_once_on_its_own_thread() -> None:
    model = GatedModel()
    batcher = _batcher(model)
    vector = await batcher.embed_query("alone", inline=True)
    np.testing.assert_array_equal(vector, vector_of("alone"))
    assert model.threads == [threading.current_thread().name]
    assert batcher.batches == 0

    # Inline or not, a query already queued behind a model call waits its turn.
    tasks = await _queued_behind_a_running_call(batcher, model, "first", [])
    late = asyncio.create_task(batcher.embed_query("late", inline=True))
    await asyncio.sleep(0)
    assert batcher.queued == 1
    assert model.calls == [["alone"], ["first"]]
    model.release.set()
    await asyncio.gather(*tasks, late)
    assert model.calls == [["alone"], ["first"], ["late"]]
    assert model.threads[2] == model.threads[1] != threading.current_thread().name


def test_cached_queries_never_reach_the_model_and_cancelled_ones_are_dropped() -> None:
    asyncio.run(_cached_queries_never_reach_the_model_and_cancelled_ones_are_dropped())


async def _cached_queries_never_reach_the_model_and_cancelled_ones_are_dropped() -> None:
    model = GatedModel()
    batcher = _batcher(model)
    await batcher.embed_query("seen")
    tasks = await _queued_behind_a_running_call(batcher, model, "first", ["gone", "kept"])
    tasks[1].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks[1]
    assert await batcher.embed_query("seen") is batcher.queries.lookup("seen")
    model.release.set()
    await asyncio.gather(tasks[0], tasks[2])
    assert model.calls == [["seen"], ["first"], ["kept"]]


def test_a_window_waits_for_a_fuller_first_batch_until_it_is_full() -> None:
    asyncio.run(_a_window_waits_for_a_fuller_first_batch_until_it_is_full())


async def _a_window_waits_for_a_fuller_first_batch_until_it_is_full() -> None:
    model = GatedModel()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await _batcher(model, window_s=0.1).embed_query("alone")
    assert loop.time() - started >= 0.1  # nobody came: it waited the whole window

    full = _batcher(model, window_s=30, max_batch=2)
    started = loop.time()
    first = asyncio.create_task(full.embed_query("one"))
    await asyncio.sleep(0)
    await asyncio.gather(first, full.embed_query("two"))
    assert model.calls == [["alone"], ["one", "two"]]
    assert loop.time() - started < 10  # full: it went at once


def test_settings_choose_the_batch() -> None:
    queries = CachedQueryEmbedder(GatedModel(), capacity=1)
    assert build_query_batcher(queries, Settings(query_batch_size=1)) is None
    batcher = build_query_batcher(queries, Settings(query_batch_size=16, query_batch_window_ms=2.5))
    assert batcher is not None and (batcher.max_batch, batcher.window_s) == (16, 0.0025)
