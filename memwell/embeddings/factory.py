"""Builds the configured Embedder. The only place that chooses between backends.

Backend modules are imported inside their builders, so an OpenAI deployment never
loads onnxruntime and a local one never loads the openai SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memwell.embeddings.base import Embedder, EmbeddingError

if TYPE_CHECKING:
    from memwell.core.settings import Settings


def local_model_name(settings: Settings) -> str:
    """The model name local mode records on stored rows (and searches by): int8 memories
    are another name, so a switch of precision is a re-embed, never a silent mix."""
    from memwell.embeddings.local_models import local_model

    name = local_model(settings.local_model).model_name
    return f"{name}-int8" if settings.local_embedding_precision == "int8" else name


def _build_local(settings: Settings, for_queries: bool, threads: int | None) -> Embedder:
    from memwell.embeddings.local_models import local_model
    from memwell.embeddings.local_onnx import OnnxMiniLMEmbedder
    from memwell.embeddings.onnx_export import ensure_onnx_model, tokenizer_path_for

    spec = local_model(settings.local_model)
    stored = settings.local_embedding_precision
    weights = settings.local_query_precision if for_queries else stored
    model_path = ensure_onnx_model(settings.model_cache_dir, quantized=weights == "int8", spec=spec)
    return OnnxMiniLMEmbedder(
        model_path,
        tokenizer_path_for(model_path),
        batch_size=settings.embedding_batch_size,
        # The stored rows' name, whatever weights embed the query: int8 weights are a
        # quantisation of the same model, so its query vectors search the fp32 rows.
        model_name=local_model_name(settings),
        spin=not for_queries,
        precision=weights,
        # One query at a time: a second thread does not make batch 1 faster, and the
        # other core stays free for the event loop and the database.
        threads=1 if for_queries else threads,
        prefix=spec.query_prefix if for_queries else spec.passage_prefix,
        dimensions=spec.dimensions,
        pad_token=spec.pad_token,
        max_length=spec.max_length,
    )


def _build_openai(settings: Settings, for_queries: bool, threads: int | None) -> Embedder:
    from memwell.embeddings.openai_compat import OpenAIEmbedder

    key = settings.openai_api_key
    return OpenAIEmbedder(
        settings.openai_embedding_model,
        base_url=settings.openai_base_url,
        api_key=key.get_secret_value() if key is not None else None,
        timeout=settings.llm_timeout_s,
        batch_size=settings.embedding_batch_size,
    )


_BUILDERS: dict[str, Callable[[Settings, bool, int | None], Embedder]] = {
    "local": _build_local,
    "openai": _build_openai,
}


def build_embedder(
    settings: Settings, *, for_queries: bool = False, threads: int | None = None
) -> Embedder:
    """The Embedder that ``settings`` selects (``resolved_embedding_provider``).

    ``for_queries``: tuned for one query at a time on a request path, not for batches.
    ``threads``: a local model's intra-op threads (None: one per core).
    """
    provider = settings.resolved_embedding_provider
    builder = _BUILDERS.get(provider)
    if builder is None:
        raise EmbeddingError(f"unknown embedding provider {provider!r}")
    return builder(settings, for_queries, threads)
