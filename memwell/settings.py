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

    # --- tenancy, auth and hostile input (issue 6) ------------------------------------------
    auth_disabled: bool = Field(
        default=False,
        validation_alias="MEMWELL_AUTH_DISABLED",
        description="Serve without API keys (every caller is MEMWELL_DEFAULT_TENANT). For "
        "local development only; startup logs a warning. `memwell up` sets it for its "
        "children unless the environment says otherwise.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias="MEMWELL_API_KEY",
        description="The key clients of this package (the demo) send as a Bearer token.",
    )
    rate_limit_per_s: float = Field(
        default=50.0,
        ge=0,
        validation_alias="MEMWELL_RATE_LIMIT_PER_S",
        description="Token-bucket refill rate per API key (requests/s); 0 turns it off.",
    )
    rate_limit_burst: int = Field(default=100, ge=1, validation_alias="MEMWELL_RATE_LIMIT_BURST")
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        validation_alias="MEMWELL_MAX_BODY_BYTES",
        description="Request bodies over this are refused (413) before being read whole.",
    )
    max_metadata_bytes: int = Field(
        default=16 * 1024,
        ge=2,
        validation_alias="MEMWELL_MAX_METADATA_BYTES",
        description="Size of one turn's metadata as compact JSON.",
    )

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
