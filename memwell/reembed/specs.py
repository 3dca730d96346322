"""A target model named as `provider:model`, and the embedders built for it.

The spec is stored with the migration, with the endpoint's base URL when the operator
gave one, so every process (worker, API, CLI) embeds with the same model whatever its
own environment selects. The API key never is: it comes from each process's
OPENAI_API_KEY.

Outbound endpoints are the operator's: a tenant names a target only from the list the
operator allows (`allowed_target`), and never an endpoint, since the server would
send its own key, and the tenant's memories, wherever the request pointed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from memwell.core.settings import Settings
from memwell.embeddings import Embedder, EmbeddingError, build_embedder

#: A local target's name -> (MEMWELL_LOCAL_MODEL, precision).
LOCAL_MODELS = {
    "all-MiniLM-L6-v2": ("minilm", "fp32"),
    "all-MiniLM-L6-v2-int8": ("minilm", "int8"),
    "e5-small": ("e5-small", "fp32"),
    "e5-small-int8": ("e5-small", "int8"),
}
#: What rows of a local target record, where it is not the target's own name.
_RECORDED = {"e5-small": "multilingual-e5-small", "e5-small-int8": "multilingual-e5-small-int8"}


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
        if self.provider == "local":
            return _RECORDED.get(self.model, self.model)
        return f"openai:{self.model}"


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


def offered_targets(settings: Settings) -> dict[str, TargetSpec]:
    """The targets a tenant may re-embed to, by spec: every local model, and the
    operator's MEMWELL_REEMBED_TARGETS, each `provider:model` or
    `provider:model@<endpoint>` (an `openai:` target without one embeds through this
    server's OPENAI_BASE_URL). ValueError names a malformed entry."""
    offered = {f"local:{name}": TargetSpec("local", name) for name in LOCAL_MODELS}
    for entry in (e.strip() for e in settings.reembed_targets.split(",")):
        if entry:
            spec, _, endpoint = entry.partition("@")
            target = parse_spec(spec.strip(), base_url=endpoint.strip() or None)
            offered[target.spec] = target
    return offered


def offered_target(spec: str, settings: Settings) -> TargetSpec:
    """A tenant's target, by name only: the operator's entry for `spec`, its endpoint
    included. ValueError names the targets on offer."""
    offered = offered_targets(settings)
    if spec not in offered:
        raise ValueError(f"target {spec!r} is not offered here; the targets are {sorted(offered)}")
    return offered[spec]


def build_target_embedder(
    settings: Settings, target: TargetSpec, *, for_queries: bool = False
) -> Embedder:
    """An embedder for `target`, through the one factory, from these settings."""
    update: dict[str, object] = {"embedding_provider": target.provider}
    if target.provider == "local":
        model, precision = LOCAL_MODELS[target.model]
        update |= {
            "local_model": model,
            "local_embedding_precision": precision,
            "local_query_precision": precision,
        }
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
