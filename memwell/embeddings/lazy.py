"""An embedder built on first use.

The API process embeds stored memories only when a client adds or edits one directly;
the model (tens of MB, a second to load) is not worth loading into every API process
that never does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from memwell.embeddings.base import Embedder, FloatMatrix


class LazyEmbedder:
    def __init__(self, build: Callable[[], Embedder]) -> None:
        self._build = build
        self._inner: Embedder | None = None
        self._lock = threading.Lock()

    def _get(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                self._inner = self._build()
            return self._inner

    @property
    def model_name(self) -> str:
        return self._get().model_name

    @property
    def dimensions(self) -> int:
        return self._get().dimensions

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self._get().embed(texts)
