"""The embedding layer: one protocol, a local ONNX backend, an OpenAI-compatible backend,
a query cache, and the factory that picks a backend from Settings.
"""

from memwell.embeddings.base import Embedder, EmbeddingError
from memwell.embeddings.cache import CachedQueryEmbedder
from memwell.embeddings.factory import build_embedder

__all__ = ["CachedQueryEmbedder", "Embedder", "EmbeddingError", "build_embedder"]
