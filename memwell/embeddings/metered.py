"""An Embedder that counts what it embeds, for `memwell_embeddings_total` (rate() is
embeddings per second) and the batch latency histogram. Wraps any backend."""

from __future__ import annotations

import time
from collections.abc import Sequence

from memwell.core.metrics import EMBED_BATCH_SECONDS, EMBEDDINGS_TOTAL
from memwell.embeddings.base import Embedder, FloatMatrix


class MeteredEmbedder:
    def __init__(self, inner: Embedder, *, use: str) -> None:
        self.inner = inner
        self.use = use

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        if texts:
            EMBED_BATCH_SECONDS.labels(self.use, self.model_name).observe(
                time.perf_counter() - started
            )
            EMBEDDINGS_TOTAL.labels(self.use, self.model_name).inc(len(texts))
        return vectors
