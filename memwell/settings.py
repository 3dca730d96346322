"""One typed settings object for every process: api, worker, beat, CLI and SDK.

Every knob has a default that works on the embedded one-machine stack. A URL left
unset means "use the embedded service"; no model endpoint means local mode.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

EmbeddingProvider = Literal["auto", "local", "openai"]


class Settings(BaseSettings):
    """Memwell configuration, read from the environment (and an optional .env file)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # --- services -----------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        validation_alias="DATABASE_URL",
        description="SQLAlchemy URL of Postgres with pgvector. Unset: the embedded server.",
    )
    redis_url: str | None = Field(
        default=None,
        validation_alias="REDIS_URL",
        description="Redis URL for the broker, the session buffers and the locks. "
        "Unset: the embedded Valkey server.",
    )
    data_dir: Path = Field(
        default=Path(".memwell"),
        validation_alias="MEMWELL_DATA_DIR",
        description="Where the embedded services keep their data and the stack file.",
    )
    model_cache_dir: Path = Field(
        default=Path.home() / ".cache" / "memwell",
        validation_alias="MEMWELL_MODEL_CACHE",
        description="Where the local embedding model is exported to ONNX once.",
    )

    # --- model endpoint (any OpenAI-compatible server) ------------------------------
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    chat_model: str = Field(default="gpt-4o-mini", validation_alias="MEMWELL_CHAT_MODEL")
    llm_timeout_s: float = Field(default=30.0, gt=0, validation_alias="MEMWELL_LLM_TIMEOUT_S")

    # --- embeddings -------------------------------------------------------------------
    embedding_provider: EmbeddingProvider = Field(
        default="auto",
        validation_alias="MEMWELL_EMBEDDING_PROVIDER",
        description="auto: openai when a model endpoint is configured, else local.",
    )
    openai_embedding_model: str = Field(
        default="text-embedding-3-small", validation_alias="MEMWELL_OPENAI_EMBEDDING_MODEL"
    )
    embedding_batch_size: int = Field(
        default=64, ge=1, le=2048, validation_alias="MEMWELL_EMBED_BATCH"
    )
    query_cache_size: int = Field(default=4096, ge=0, validation_alias="MEMWELL_QUERY_CACHE_SIZE")

    # --- tenancy ----------------------------------------------------------------------
    default_tenant: str = Field(default="default", validation_alias="MEMWELL_DEFAULT_TENANT")

    # --- short-term buffer and context --------------------------------------------------
    buffer_token_budget: int = Field(default=2000, ge=50, validation_alias="MEMWELL_BUFFER_TOKENS")
    buffer_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, validation_alias="MEMWELL_BUFFER_TTL_S")
    context_token_budget: int = Field(
        default=3000, ge=100, validation_alias="MEMWELL_CONTEXT_TOKENS"
    )

    # --- retrieval ----------------------------------------------------------------------
    retrieval_top_k: int = Field(default=8, ge=1, le=100, validation_alias="MEMWELL_TOP_K")
    similarity_floor: float = Field(default=0.2, ge=-1, le=1, validation_alias="MEMWELL_SIM_FLOOR")
    weight_relevance: float = Field(default=1.0, ge=0, validation_alias="MEMWELL_W_RELEVANCE")
    weight_importance: float = Field(default=0.15, ge=0, validation_alias="MEMWELL_W_IMPORTANCE")
    weight_recency: float = Field(default=0.15, ge=0, validation_alias="MEMWELL_W_RECENCY")
    recency_half_life_h: float = Field(
        default=24 * 14, gt=0, validation_alias="MEMWELL_HALF_LIFE_H"
    )

    # --- celery -------------------------------------------------------------------------
    visibility_timeout_s: int = Field(
        default=3600,
        ge=60,
        validation_alias="MEMWELL_VISIBILITY_TIMEOUT_S",
        description="Redis broker: an unacknowledged task is redelivered after this long. "
        "Must exceed the longest task (time_limit) or a slow task runs twice.",
    )
    worker_concurrency: int = Field(default=2, ge=1, validation_alias="MEMWELL_WORKER_CONCURRENCY")

    # --- maintenance: beat jobs (decay, prune, TTL, idle sessions, sweep) --------------
    # Decay: strength = 2 ^ -(days since last use / half_life), with
    # half_life = decay_half_life_days * (1 + decay_importance_boost * importance)
    #                                 * (1 + decay_use_boost * ln(1 + uses)).
    decay_half_life_days: float = Field(
        default=7.0, gt=0, validation_alias="MEMWELL_DECAY_HALF_LIFE_DAYS"
    )
    decay_importance_boost: float = Field(
        default=4.0, ge=0, validation_alias="MEMWELL_DECAY_IMPORTANCE_BOOST"
    )
    decay_use_boost: float = Field(default=1.0, ge=0, validation_alias="MEMWELL_DECAY_USE_BOOST")
    decay_every_s: float = Field(default=3600.0, gt=0, validation_alias="MEMWELL_DECAY_EVERY_S")
    prune_retention_floor: float = Field(
        default=0.05, ge=0, le=1, validation_alias="MEMWELL_PRUNE_RETENTION_FLOOR"
    )
    prune_importance_floor: float = Field(
        default=0.8,
        ge=0,
        le=1,
        validation_alias="MEMWELL_PRUNE_IMPORTANCE_FLOOR",
        description="Memories at or above this importance are never pruned.",
    )
    prune_grace_days: float = Field(
        default=30.0,
        ge=0,
        validation_alias="MEMWELL_PRUNE_GRACE_DAYS",
        description="Tombstones are hard-deleted this long after they were made.",
    )
    prune_every_s: float = Field(default=3600.0, gt=0, validation_alias="MEMWELL_PRUNE_EVERY_S")
    ttl_days_by_kind: dict[str, float] = Field(
        default_factory=lambda: {"episode": 90.0},
        validation_alias="MEMWELL_TTL_DAYS_BY_KIND",
        description='JSON, e.g. {"episode": 90}: a memory of that kind with no explicit '
        "expires_at expires this many days after it was last seen, used or reinforced.",
    )
    idle_session_minutes: float = Field(
        default=30.0, gt=0, validation_alias="MEMWELL_IDLE_SESSION_MINUTES"
    )
    close_idle_every_s: float = Field(
        default=300.0, gt=0, validation_alias="MEMWELL_CLOSE_IDLE_EVERY_S"
    )
    sweep_after_s: float = Field(
        default=300.0,
        gt=0,
        validation_alias="MEMWELL_SWEEP_AFTER_S",
        description="A turn pending (and not re-dispatched) for this long is re-dispatched.",
    )
    sweep_every_s: float = Field(default=60.0, gt=0, validation_alias="MEMWELL_SWEEP_EVERY_S")
    sweep_max_attempts: int = Field(
        default=20,
        ge=1,
        validation_alias="MEMWELL_SWEEP_MAX_ATTEMPTS",
        description="After this many re-dispatches a pending turn is marked failed.",
    )
    sweep_backlog_threshold: int = Field(
        default=1000,
        ge=0,
        validation_alias="MEMWELL_SWEEP_BACKLOG_THRESHOLD",
        description="With more messages than this waiting in the consolidation queues, "
        "the sweeper does not re-dispatch: pending turns are queued, not lost.",
    )
    maintenance_batch_size: int = Field(
        default=500, ge=1, le=10_000, validation_alias="MEMWELL_MAINTENANCE_BATCH"
    )
    maintenance_max_batches: int = Field(
        default=200,
        ge=1,
        validation_alias="MEMWELL_MAINTENANCE_MAX_BATCHES",
        description="Batches one job run may do; the rest waits for the next run.",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", validation_alias="MEMWELL_LOG_LEVEL"
    )

    # --- api ------------------------------------------------------------------------------
    api_host: str = Field(default="127.0.0.1", validation_alias="MEMWELL_API_HOST")
    api_port: int = Field(default=8420, ge=1, le=65535, validation_alias="MEMWELL_API_PORT")
    api_url: str | None = Field(
        default=None,
        validation_alias="MEMWELL_API_URL",
        description="Where clients (demo, SDK) reach the API. Unset: http://api_host:api_port.",
    )
    max_message_chars: int = Field(
        default=32_000, ge=1, validation_alias="MEMWELL_MAX_MESSAGE_CHARS"
    )
    max_batch_turns: int = Field(default=500, ge=1, validation_alias="MEMWELL_MAX_BATCH_TURNS")

    @model_validator(mode="after")
    def _check_endpoint_pair(self) -> Settings:
        if self.openai_base_url is not None and not self.openai_base_url.startswith(
            ("http://", "https://")
        ):
            raise ValueError("OPENAI_BASE_URL must be an http(s) URL")
        return self

    @property
    def llm_mode(self) -> bool:
        """True when a model endpoint is configured; local mode otherwise."""
        return self.openai_api_key is not None or self.openai_base_url is not None

    @property
    def resolved_embedding_provider(self) -> Literal["local", "openai"]:
        if self.embedding_provider == "auto":
            return "openai" if self.llm_mode else "local"
        return self.embedding_provider

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, validated once."""
    return Settings()
