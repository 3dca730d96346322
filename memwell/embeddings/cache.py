"""An LRU cache in front of an Embedder for query texts.

Agents ask the same questions again and again; a repeated query should cost a dict
lookup, not a model call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from memwell.embeddings.base import Embedder, FloatMatrix, FloatVector


class CachedQueryEmbedder:
    """Wraps an Embedder; ``embed_query`` is cached by exact text, ``embed`` passes through.

    Cached vectors are returned read-only and shared between callers, so copy before
    mutating. Thread-safe. ``capacity=0`` disables the cache.
    """

    def __init__(self, embedder: Embedder, capacity: int = 4096) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self._embedder = embedder
        self._capacity = capacity
        self._entries: OrderedDict[str, FloatVector] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self._embedder.model_name

    @property
    def dimensions(self) -> int:
        return self._embedder.dimensions

    @property
    def inner(self) -> Embedder:
        """The wrapped embedder."""
        return self._embedder

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self._embedder.embed(texts)

    def embed_query(self, text: str) -> FloatVector:
        """The embedding of one text, shape (dimensions,), float32."""
        cached = self.lookup(text)
        if cached is not None:
            return cached
        # The model runs outside the lock so concurrent misses do not serialise; two
        # threads missing on the same text both compute it, which is harmless.
        return self.embed_missing([text])[0]

    def lookup(self, text: str) -> FloatVector | None:
        """The cached vector of `text`, or None (counted as a hit or a miss)."""
        with self._lock:
            cached = self._entries.get(text)
            if cached is None:
                self.misses += 1
                return None
            self._entries.move_to_end(text)
            self.hits += 1
            return cached

    def embed_missing(self, texts: Sequence[str]) -> list[FloatVector]:
        """Embed `texts` in one model call and cache each; read-only vectors, in order."""
        matrix = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        vectors = []
        for row in matrix:
            vector: FloatVector = np.array(row, dtype=np.float32)  # its own, compact copy
            vector.flags.writeable = False
            vectors.append(vector)
        if self._capacity == 0:
            return vectors
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._entries[text] = vector
                self._entries.move_to_end(text)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return vectors

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
