"""One embedder for every system: Memwell's local query embedder (its int8 weights, one
thread, as Memwell's query path runs it).

Every stored text is embedded once, up front, and a peer's store gets those vectors by
lookup, so the systems are compared on the same vectors and a peer's ingest rate can be
given with and without the embedding. A text the book does not hold (every question)
is embedded when the peer asks for it, at batch 1: the query embedding is part of a
search on both sides.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from memwell.core.settings import Settings
from memwell.embeddings import build_embedder
from memwell.embeddings.base import Embedder, FloatMatrix


class VectorBook:
    """Texts to vectors: looked up when embedded before, embedded now otherwise."""

    def __init__(self, settings: Settings) -> None:
        self.embedder: Embedder = build_embedder(settings, for_queries=True)
        self._vectors: dict[str, np.ndarray] = {}
        #: seconds spent embedding the stored texts up front (batches of the settings')
        self.stored_s = 0.0

    @property
    def dimensions(self) -> int:
        return self.embedder.dimensions

    def add(self, texts: Sequence[str]) -> float:
        """Embed the texts not held yet; returns the seconds it took."""
        new = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        started = time.perf_counter()
        if new:
            self._vectors.update(zip(new, self.embedder.embed(new), strict=True))
        seconds = time.perf_counter() - started
        self.stored_s += seconds
        return seconds

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """The texts' vectors, rows in order: held ones looked up, the rest embedded."""
        missing = [t for t in texts if t not in self._vectors]
        fresh = dict(zip(missing, self.embedder.embed(missing), strict=True)) if missing else {}
        rows = [self._vectors.get(t, fresh.get(t)) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)

    def embed_lists(self, texts: Sequence[str]) -> list[list[float]]:
        """The same, as lists of floats (what the peers' embedding hooks return)."""
        return [row.tolist() for row in self.embed(texts)]
