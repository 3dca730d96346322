"""Embeddings from any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...).

Uses the official SDK's sync client, which brings retries with backoff and timeouts.
Rows are re-normalised here because not every server returns unit vectors.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import openai

from memwell.embeddings.base import EmbeddingError, FloatMatrix

# Local servers ignore the key but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


class OpenAIEmbedder:
    """Embeds through ``POST {base_url}/embeddings``.

    ``dimensions`` may be left unset: the first response fixes it, and every later
    response must match. Reading ``dimensions`` before any call makes one small
    probe request, because callers (schema setup) may need it up front.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
        max_retries: int = 2,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if dimensions is not None and dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self.model = model
        self.model_name = f"openai:{model}"
        self.batch_size = batch_size
        self._dimensions = dimensions
        self._dimensions_lock = threading.Lock()
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key if api_key is not None else PLACEHOLDER_API_KEY,
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self.embed(["dimension probe"])
        assert self._dimensions is not None  # set by the probe or it raised
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        chunks = [
            self._embed_chunk(list(texts[start : start + self.batch_size]))
            for start in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(chunks, axis=0)

    def _embed_chunk(self, texts: list[str]) -> FloatMatrix:
        try:
            response = self._client.embeddings.create(
                model=self.model,
                input=texts,
                # Explicit, because some compatible servers do not implement the SDK's
                # default base64 encoding.
                encoding_format="float",
            )
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"embedding request to {self.model_name} failed: {exc}") from exc

        # The API does not promise response order; ``index`` is the position in ``input``.
        rows = sorted(response.data, key=lambda item: item.index)
        if [row.index for row in rows] != list(range(len(texts))):
            raise EmbeddingError(
                f"{self.model_name} returned indices {[r.index for r in rows]} "
                f"for {len(texts)} inputs"
            )
        widths = {len(row.embedding) for row in rows}
        if len(widths) != 1:
            raise EmbeddingError(f"{self.model_name} returned rows of widths {sorted(widths)}")
        self._check_width(widths.pop())

        matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(f"{self.model_name} returned a zero or non-finite vector")
        normalised: FloatMatrix = (matrix / norms).astype(np.float32, copy=False)
        return normalised

    def _check_width(self, width: int) -> None:
        with self._dimensions_lock:
            if self._dimensions is None:
                self._dimensions = width
            elif width != self._dimensions:
                raise EmbeddingError(
                    f"{self.model_name} returned {width}-dimensional vectors, "
                    f"expected {self._dimensions}"
                )
