"""A target model named as `provider:model`, and the embedders built for it.

The spec is stored with the migration, with the endpoint's base URL when one was
given, so every process (worker, API, CLI) embeds with the same model whatever its
own environment selects. The API key never is: it comes from each process's
OPENAI_API_KEY.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from memwell.core.settings import Settings
from memwell.embeddings import Embedder, EmbeddingError, build_embedder

LOCAL_MODELS = {"all-MiniLM-L6-v2": "fp32", "all-MiniLM-L6-v2-int8": "int8"}


@dataclass(frozen=True)
class TargetSpec:
    provider: str
    model: str
    base_url: str | None = None

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def model_name(self) -> str:
        """The name rows of this model record (the embedder's `model_name`)."""
        return self.model if self.provider == "local" else f"openai:{self.model}"


def parse_spec(spec: str, *, base_url: str | None = None) -> TargetSpec:
    """`local:all-MiniLM-L6-v2` or `openai:<model>`; ValueError names what is wrong."""
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise ValueError(
            f"target {spec!r}: expected provider:model, e.g. openai:text-embedding-3-small"
        )
    if provider == "local":
        if model not in LOCAL_MODELS:
            raise ValueError(f"local models are {sorted(LOCAL_MODELS)}, not {model!r}")
        if base_url is not None:
            raise ValueError("a base URL only applies to provider openai")
    elif provider != "openai":
        raise ValueError(f"provider {provider!r}: expected local or openai")
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise ValueError("the base URL must be an http(s) URL")
    return TargetSpec(provider=provider, model=model, base_url=base_url)


def build_target_embedder(
    settings: Settings, target: TargetSpec, *, for_queries: bool = False
) -> Embedder:
    """An embedder for `target`, through the one factory, from these settings."""
    update: dict[str, object] = {"embedding_provider": target.provider}
    if target.provider == "local":
        precision = LOCAL_MODELS[target.model]
        update |= {"local_embedding_precision": precision, "local_query_precision": precision}
    else:
        update["openai_embedding_model"] = target.model
        if target.base_url is not None:
            update["openai_base_url"] = target.base_url
    embedder = build_embedder(settings.model_copy(update=update), for_queries=for_queries)
    if embedder.model_name != target.model_name:
        raise EmbeddingError(f"{target.spec} built {embedder.model_name!r}")
    return embedder


class EmbedderCache:
    """One embedder per target per process: an ONNX session or HTTP client is costly."""

    def __init__(self, settings: Settings, *, for_queries: bool = False) -> None:
        self.settings = settings
        self.for_queries = for_queries
        self._built: dict[TargetSpec, Embedder] = {}
        self._lock = threading.Lock()

    def get(self, target: TargetSpec) -> Embedder:
        with self._lock:
            if target not in self._built:
                self._built[target] = build_target_embedder(
                    self.settings, target, for_queries=self.for_queries
                )
            return self._built[target]
