"""One typed settings object for every process: api, worker, beat, CLI and SDK.

Every knob has a default that works on the embedded one-machine stack. A URL left
unset means "use the embedded service"; no model endpoint means local mode.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memwell.core.errors import ConfigurationError
from memwell.core.model_calibration import CALIBRATIONS
from memwell.core.redis_target import check_redis_url, is_sentinel
from memwell.core.url_rules import check_database_url, check_http_url

EmbeddingProvider = Literal["auto", "local", "openai"]
#: Expensive requests in flight per API process in local mode. On 2 cores one process
#: serves about 100-200 chats/s, so a full house waits well under a second.
LOCAL_API_MAX_INFLIGHT = 64


class Settings(BaseSettings):
    """Memwell configuration, read from the environment (and an optional .env file)."""

    # hide_input_in_errors: a refusal never quotes the value, which may be a secret (or,
    # for a check across fields, every setting at once).
    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", populate_by_name=True, hide_input_in_errors=True
    )

    # --- services -----------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        validation_alias="DATABASE_URL",
        description="SQLAlchemy URL of Postgres with pgvector. Unset: the embedded server. "
        "Checked at startup: a URL SQLAlchemy cannot parse, or a port outside 1..65535, "
        "stops every process.",
    )
    database_read_url: str | None = Field(
        default=None,
        validation_alias="MEMWELL_DATABASE_READ_URL",
        description="SQLAlchemy URL of a streaming replica of DATABASE_URL, or several "
        "separated by commas, for the request path's reads: search, context and the "
        "lookups before them. Writes, the workers and the re-embed stay on DATABASE_URL. "
        "A replica that fails is skipped for 5 s and the primary serves (no error). "
        "Unset: every read on DATABASE_URL. Each URL is checked at startup as "
        "DATABASE_URL is.",
    )
    read_your_writes_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        validation_alias="MEMWELL_READ_YOUR_WRITES_S",
        description="With read replicas: after a user's memory is added, edited or "
        "deleted, that user's reads use the primary for this long, so a search right "
        "after a write finds it. 0: no such routing (reads may miss a write the replica "
        "has not replayed yet).",
    )
    redis_url: str | None = Field(
        default=None,
        validation_alias="REDIS_URL",
        description="Redis URL for the broker, the session buffers and the locks: "
        "redis://, rediss://, unix:// or sentinel:// (docs/scaling.md). Unset: the "
        "embedded Valkey server. Checked at startup: a port outside 1..65535 or a "
        "database number below 0 stops every process.",
    )
    data_dir: Path = Field(
        default=Path(".memwell"),
        validation_alias="MEMWELL_DATA_DIR",
        description="Where the embedded services keep their data and the stack file.",
    )
    redis_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        validation_alias="MEMWELL_REDIS_PORT",
        description="Port of the embedded Valkey that `memwell up` starts. Unset: the port "
        "this data dir used last time, else a free one from 16379 (recorded in "
        "MEMWELL_DATA_DIR/ports.json).",
    )
    model_cache_dir: Path = Field(
        default=Path.home() / ".cache" / "memwell",
        validation_alias="MEMWELL_MODEL_CACHE",
        description="Where the local embedding model is exported to ONNX once.",
    )

    # --- model endpoint (any OpenAI-compatible server) ------------------------------
    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias="OPENAI_API_KEY",
        description="API key of the model endpoint. Set (or OPENAI_BASE_URL): LLM mode; "
        "neither: local mode.",
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias="OPENAI_BASE_URL",
        description="Base URL of an OpenAI-compatible server (vLLM, Ollama, LM Studio). "
        "Unset: api.openai.com.",
    )
    chat_model: str = Field(
        default="gpt-4o-mini",
        validation_alias="MEMWELL_CHAT_MODEL",
        description="Model name sent to the endpoint for chat and LLM-mode pipeline steps.",
    )
    llm_timeout_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="MEMWELL_LLM_TIMEOUT_S",
        description="Seconds before a model call is abandoned.",
    )

    # --- a local model server, started by `memwell up` (the llm-local extra) ------------
    local_llm_gguf: Path | None = Field(
        default=None,
        validation_alias="MEMWELL_LOCAL_LLM_GGUF",
        description="A GGUF model file you bring: `memwell up` serves it with llama.cpp's "
        "OpenAI-compatible server (pip install 'memwell[llm-local]') on a loopback port, "
        "and points the chat doors and LLM mode at it. Memwell never downloads a model. "
        "Unset or empty: no local model server. It must be a readable regular file that "
        "starts with the GGUF magic bytes, checked before anything starts.",
    )
    local_llm_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        validation_alias="MEMWELL_LOCAL_LLM_PORT",
        description="Port of the local model server. Unset: the one this data dir used "
        "last time, else a free one from 8430 (recorded in MEMWELL_DATA_DIR/ports.json).",
    )
    local_llm_ctx: int = Field(
        default=4096,
        ge=256,
        validation_alias="MEMWELL_LOCAL_LLM_CTX",
        description="The local model's context window in tokens (llama.cpp's n_ctx).",
    )
    local_llm_threads: int | None = Field(
        default=None,
        ge=1,
        validation_alias="MEMWELL_LOCAL_LLM_THREADS",
        description="CPU threads of the local model server. Unset: one per core.",
    )
    local_llm_alias: str | None = Field(
        default=None,
        min_length=1,
        validation_alias="MEMWELL_LOCAL_LLM_ALIAS",
        description="The model name the local server answers to, and MEMWELL_CHAT_MODEL "
        "for the stack. Unset: the GGUF file's name without .gguf.",
    )
    local_llm_start_timeout_s: float = Field(
        default=180.0,
        gt=0,
        validation_alias="MEMWELL_LOCAL_LLM_START_TIMEOUT_S",
        description="How long `memwell up` waits for the local model server to answer "
        "before it gives up with an error.",
    )
    local_llm_url: str | None = Field(
        default=None,
        validation_alias="MEMWELL_LOCAL_LLM_URL",
        description="Set by `memwell up` for its children: the base URL of the local "
        "model server it supervises, which /readyz reports on. Not for hand-setting.",
    )

    # --- embeddings -------------------------------------------------------------------
    embedding_provider: EmbeddingProvider = Field(
        default="auto",
        validation_alias="MEMWELL_EMBEDDING_PROVIDER",
        description="auto: openai when a model endpoint is configured, else local.",
    )
    local_model: Literal["minilm", "e5-small"] = Field(
        default="minilm",
        validation_alias="MEMWELL_LOCAL_MODEL",
        description="The local embedding model: minilm (all-MiniLM-L6-v2, English) or "
        "e5-small (multilingual-e5-small, about 100 languages; needs the 'e5' extra). "
        "Each has its own calibration: unless set explicitly, MEMWELL_SIM_FLOOR, "
        "MEMWELL_MERGE_THRESHOLD and MEMWELL_SUPERSEDE_FLOOR take the model's (see "
        "docs/models.md). A different model name: switching a store needs a re-embed.",
    )
    local_embedding_precision: Literal["fp32", "int8"] = Field(
        default="fp32",
        validation_alias="MEMWELL_LOCAL_EMBEDDING_PRECISION",
        description="Precision of stored memories (the worker's local MiniLM): fp32, or "
        "int8 (per-channel dynamic quantisation, cosine 0.99 to fp32; LoCoMo dev R@10 "
        "0.742 vs 0.743 and MRPC merge precision 0.909 vs 0.907; its embedder is ~2.4x "
        "fp32 on a CPU with VNNI, less on AVX2 alone; see docs/consolidation.md, "
        "'Precision of stored memories'). A different model name: switching a store needs "
        "a re-embed.",
    )
    local_query_precision: Literal["fp32", "int8"] = Field(
        default="int8",
        validation_alias="MEMWELL_LOCAL_QUERY_PRECISION",
        description="Local MiniLM weights for search queries, whatever the stored "
        "precision: int8 is a quantisation of the same model, 0.8 ms per query against "
        "2.2 ms for fp32, at the same LoCoMo recall against fp32 memories "
        "(see docs/performance.md).",
    )
    openai_embedding_model: str = Field(
        default="text-embedding-3-small",
        validation_alias="MEMWELL_OPENAI_EMBEDDING_MODEL",
        description="Embedding model name when embeddings come from the endpoint.",
    )
    embedding_batch_size: int = Field(
        default=64,
        ge=1,
        le=2048,
        validation_alias="MEMWELL_EMBED_BATCH",
        description="Texts per embedding call, and turns per consolidation batch.",
    )
    embed_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        validation_alias="MEMWELL_EMBED_THREADS",
        description="Intra-op threads of each worker process's local embedder. Unset: "
        "the cores divided by the worker's processes (more threads than cores made the "
        "processes spin against each other).",
    )
    query_cache_size: int = Field(
        default=4096,
        ge=0,
        validation_alias="MEMWELL_QUERY_CACHE_SIZE",
        description="Query embeddings kept in the API's LRU cache (0: off).",
    )
    query_batch_size: int = Field(
        default=32,
        ge=1,
        le=1024,
        validation_alias="MEMWELL_QUERY_BATCH",
        description="Most queries of concurrent requests embedded in one model call (1: "
        "each alone). Nothing waits for a batch to fill: the queries that arrive while the "
        "model runs form the next one, and a lone request embeds at once.",
    )
    query_batch_window_ms: float = Field(
        default=0.0,
        ge=0,
        le=100,
        validation_alias="MEMWELL_QUERY_BATCH_WINDOW_MS",
        description="After an idle spell, how long the first query batch waits for more "
        "queries (0: not at all; the next batches form while the model runs anyway).",
    )

    # --- consolidation -------------------------------------------------------------------
    pipeline_mode: Literal["auto", "local", "llm", "hybrid"] = Field(
        default="auto",
        validation_alias="MEMWELL_PIPELINE_MODE",
        description="local: heuristic importance and sentence extraction. llm: the model "
        "scores and extracts (local per window on a fallback). hybrid: local extraction "
        "always, plus the model's memories that add something. auto: hybrid with an "
        "endpoint (OPENAI_BASE_URL or OPENAI_API_KEY), local without one or with the "
        "CPU model of `memwell up --llm-gguf`: on LoCoMo, hybrid with a capable writer "
        "recalled clearly more than local mode, and with small models no less "
        "(docs/evaluation.md).",
    )
    llm_window_turns: int = Field(
        default=12,
        ge=1,
        le=64,
        validation_alias="MEMWELL_LLM_WINDOW_TURNS",
        description="LLM mode: user messages of one session analysed by one model call "
        "(importance and memories together).",
    )
    llm_window_tokens: int = Field(
        default=1500,
        ge=100,
        validation_alias="MEMWELL_LLM_WINDOW_TOKENS",
        description="LLM mode: the most prompt tokens of messages in one analysis call "
        "(a message longer than this goes alone).",
    )
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = Field(
        default="auto",
        validation_alias="MEMWELL_LLM_RESPONSE_FORMAT",
        description="LLM mode: how structured calls ask for their JSON shape. auto: "
        "json_schema, then json_object with the schema, then none, as the endpoint "
        "accepts. none: the prompt alone (faster on llama-cpp-python, whose "
        "grammar-constrained sampling is slow on a CPU); answers are validated either way.",
    )
    llm_answer: Literal["full", "brief"] = Field(
        default="full",
        validation_alias="MEMWELL_LLM_ANSWER",
        description="LLM mode: what the analysis call asks for. full: each memory with a "
        "score, a kind, its date, entities and relations. brief: score and kind only; the "
        "local extractor reads the memory for entities (a small local model spends its "
        "time on every token it writes).",
    )
    llm_reconcile: bool = Field(
        default=False,
        validation_alias="MEMWELL_LLM_RECONCILE",
        description="LLM mode: ask the model about reconcile cases the local rule finds "
        "ambiguous (one call each). Off: the local rule decides every case.",
    )
    consolidate_soft_limit_s: int = Field(
        default=120,
        ge=10,
        le=1800,  # with the hard limit, well inside the default visibility timeout
        validation_alias="MEMWELL_CONSOLIDATE_SOFT_LIMIT_S",
        description="Soft time limit of a consolidate task (the hard limit is 60 s more). "
        "Model work stops at half of it: what is done commits, the rest goes to a new task.",
    )
    embed_linger_ms: float = Field(
        default=25.0,
        ge=0,
        le=5000,
        validation_alias="MEMWELL_EMBED_LINGER_MS",
        description="A short consolidate batch waits up to this long for more turns.",
    )
    extract_threshold: float = Field(
        default=0.15,
        ge=0,
        le=1,
        validation_alias="MEMWELL_EXTRACT_THRESHOLD",
        description="Local mode: sentences scoring below this importance are not "
        "remembered. Low on purpose: filler scores near 0, and on LoCoMo dev a higher "
        "bar dropped evidence (bench/evals/locomo.py).",
    )
    merge_threshold: float = Field(
        default=0.82,
        ge=0,
        le=1,
        validation_alias="MEMWELL_MERGE_THRESHOLD",
        description="Cosine at or above which a guarded paraphrase merges (bench/evals/dedup.py).",
    )
    supersede_floor: float = Field(
        default=0.3,
        ge=0,
        le=1,
        validation_alias="MEMWELL_SUPERSEDE_FLOOR",
        description="Neighbours below this cosine are never superseded. Low on purpose: "
        "'lives in Berlin' / 'moved to Lisbon' score ~0.5, and the slot rule decides.",
    )
    entities_enabled: bool = Field(
        default=True,
        validation_alias="MEMWELL_ENTITIES_ENABLED",
        description="Consolidation stores the people, places, things and relations each "
        "memory mentions (entity memory), in the same transaction as the memory.",
    )
    reconcile_neighbours: int = Field(
        default=8, ge=1, le=50, validation_alias="MEMWELL_RECONCILE_NEIGHBOURS"
    )
    summary_tokens: int = Field(default=300, ge=20, validation_alias="MEMWELL_SUMMARY_TOKENS")
    llm_requests_per_minute: int = Field(
        default=60,
        ge=0,
        validation_alias="MEMWELL_LLM_RPM",
        description="Pipeline calls to the model endpoint, shared by all workers (0: no cap).",
    )
    llm_rate_wait_s: float = Field(default=30.0, ge=0, validation_alias="MEMWELL_LLM_RATE_WAIT_S")

    # --- tenancy ----------------------------------------------------------------------
    default_tenant: str = Field(
        default="default",
        validation_alias="MEMWELL_DEFAULT_TENANT",
        description="Tenant of callers that do not name one (no API key, the CLI, the MCP server).",
    )

    # --- short-term buffer and context --------------------------------------------------
    buffer_token_budget: int = Field(
        default=2000,
        ge=50,
        validation_alias="MEMWELL_BUFFER_TOKENS",
        description="Token budget of a session's short-term buffer; older turns are evicted.",
    )
    buffer_ttl_s: int = Field(
        default=7 * 24 * 3600,
        ge=60,
        validation_alias="MEMWELL_BUFFER_TTL_S",
        description="Seconds an idle session buffer lives in Redis.",
    )
    context_token_budget: int = Field(
        default=3000,
        ge=100,
        validation_alias="MEMWELL_CONTEXT_TOKENS",
        description="Token budget of the assembled model context.",
    )

    # --- retrieval ----------------------------------------------------------------------
    retrieval_top_k: int = Field(
        default=8,
        ge=1,
        le=100,
        validation_alias="MEMWELL_TOP_K",
        description="Memories retrieved per query, at most.",
    )
    similarity_floor: float = Field(
        default=0.2,
        ge=-1,
        le=1,
        validation_alias="MEMWELL_SIM_FLOOR",
        description="Cosine similarity under which a memory is never returned.",
    )
    weight_relevance: float = Field(
        default=1.0,
        ge=0,
        validation_alias="MEMWELL_W_RELEVANCE",
        description="Score weight of relevance (cosine similarity).",
    )
    weight_importance: float = Field(
        default=0.3,
        ge=0,
        validation_alias="MEMWELL_W_IMPORTANCE",
        description="Score weight of importance.",
    )
    weight_recency: float = Field(
        default=0.05,
        ge=0,
        validation_alias="MEMWELL_W_RECENCY",
        description="Score weight of recency. Small: on LoCoMo dev, questions about old "
        "sessions are as common as about new ones, and 0.15 cost 0.05 of R@10; "
        "supersession, not recency, is what hides outdated facts.",
    )
    recency_half_life_h: float = Field(
        default=24 * 90,
        gt=0,
        validation_alias="MEMWELL_HALF_LIFE_H",
        description="Recency half-life in hours, since last access or creation.",
    )

    # --- retrieval: hybrid fusion, recency, ANN, access tracking ---------------------------
    retrieval_fusion: Literal["rrf", "score", "vector"] = Field(
        default="score",
        validation_alias="MEMWELL_FUSION",
        description="How full-text rank joins cosine similarity: normalised scores "
        "(measured best on LoCoMo, see docs/evaluation.md), reciprocal rank, or vector only.",
    )
    text_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        validation_alias="MEMWELL_TEXT_WEIGHT",
        description="Share of full-text rank in the fused relevance.",
    )
    rrf_k: int = Field(default=60, ge=1, le=1000, validation_alias="MEMWELL_RRF_K")
    access_half_life_h: float = Field(
        default=24 * 7,
        gt=0,
        validation_alias="MEMWELL_ACCESS_HALF_LIFE_H",
        description="Recency half-life since the last access (creation has its own).",
    )
    ann_threshold_rows: int = Field(
        default=50_000,
        ge=1000,
        validation_alias="MEMWELL_ANN_THRESHOLD",
        description="A user with this many live memories of one model gets a per-user "
        "HNSW index; it is dropped below half of it. See docs/retrieval.md.",
    )
    ann_candidates: int = Field(default=200, ge=10, le=5000, validation_alias="MEMWELL_ANN_K")
    ann_fold_every_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias="MEMWELL_ANN_FOLD_EVERY_S",
        description="How often the rows written since a user's ANN index was built are "
        "moved into it. Until then searches read them exactly, so a user writing fast "
        "keeps a tail of about this many seconds of memories. See docs/scaling.md.",
    )
    entity_weight: float = Field(
        default=0.1,
        ge=0,
        validation_alias="MEMWELL_ENTITY_WEIGHT",
        description="Weight of entity_match in the relevance: memories linked to the "
        "entities a query names, by their rarity among the user's memories (0: off).",
    )
    entity_hop_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        validation_alias="MEMWELL_ENTITY_HOP_WEIGHT",
        description="A one-hop neighbour's share of the weight of the query entity it "
        "is related to.",
    )
    entity_candidates: int = Field(
        default=100,
        ge=0,
        le=5000,
        validation_alias="MEMWELL_ENTITY_CANDIDATES",
        description="Entity-linked memories the ANN path adds to its candidates, at most.",
    )
    access_flush_batch: int = Field(
        default=5000, ge=1, validation_alias="MEMWELL_ACCESS_FLUSH_BATCH"
    )
    access_flush_every_s: float = Field(
        default=10.0, gt=0, validation_alias="MEMWELL_ACCESS_FLUSH_EVERY_S"
    )

    # --- re-embed (moving the store to another embedding model) -------------------------
    reembed_batch_size: int = Field(
        default=256,
        ge=1,
        le=10_000,
        validation_alias="MEMWELL_REEMBED_BATCH",
        description="Memories per re-embed batch: one transaction holds their vectors "
        "and the cursor, so a killed worker redoes at most this many.",
    )
    reembed_rate_per_s: float = Field(
        default=0.0,
        ge=0,
        validation_alias="MEMWELL_REEMBED_RATE",
        description="Default cap of a re-embed, in memories per second (0: none). Cap it "
        "to keep a hosted embedder's quota, or the local CPU, for live traffic.",
    )
    reembed_grace_s: float = Field(
        default=24 * 3600.0,
        ge=0,
        validation_alias="MEMWELL_REEMBED_GRACE_S",
        description="After `reembed finish`, the previous model's vectors are kept this "
        "long (a way back), then dropped.",
    )
    reembed_targets: str = Field(
        default="",
        max_length=4000,
        validation_alias="MEMWELL_REEMBED_TARGETS",
        description="The targets a tenant admin may re-embed to through "
        "`POST /v1/admin/reembed`, besides the local models: comma-separated "
        "`provider:model` or `provider:model@<endpoint URL>` (without an endpoint, an "
        "`openai:` target embeds through OPENAI_BASE_URL). A tenant names a target by "
        "`provider:model` only; no request carries an endpoint or a credential. The "
        "operator's `memwell reembed start` may name any spec and `--base-url`.",
    )
    reembed_stale_s: float = Field(
        default=120.0,
        ge=1,
        validation_alias="MEMWELL_REEMBED_STALE_S",
        description="A running re-embed that has not moved for this long gets its step "
        "re-sent by beat (its worker was killed between steps).",
    )

    # --- celery -------------------------------------------------------------------------
    visibility_timeout_s: int = Field(
        default=3600,
        ge=60,
        validation_alias="MEMWELL_VISIBILITY_TIMEOUT_S",
        description="Redis broker: an unacknowledged task is redelivered after this long. "
        "Must exceed the longest task (time_limit) or a slow task runs twice.",
    )
    worker_concurrency: int = Field(
        default=2,
        ge=1,
        validation_alias="MEMWELL_WORKER_CONCURRENCY",
        description="Processes per worker when --concurrency is not given.",
    )
    dead_letter_raw_max_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        validation_alias="MEMWELL_DEAD_LETTER_RAW_MAX_BYTES",
        description="A message no worker could read is kept as a dead letter with its "
        "first this many bytes; a longer one is recorded as truncated, with its whole "
        "size and SHA-256.",
    )
    dead_letter_raw_max_open: int = Field(
        default=1000,
        ge=1,
        validation_alias="MEMWELL_DEAD_LETTER_RAW_MAX_OPEN",
        description="Open dead letters of unreadable messages kept at most (with the "
        "default size cap, about 90 MB). Past it a new one is not stored but counted: "
        "`memwell status`, `memwell dlq list` and memwell_dead_letters_not_kept_total "
        "show how many; `memwell dlq discard --raw` makes room.",
    )

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
    dropped_turns_retention_days: float = Field(
        default=30.0,
        gt=0,
        validation_alias="MEMWELL_DROPPED_TURNS_RETENTION_DAYS",
        description="The record of a dropped turn (its user erased or its session cleared "
        "while it was on its way) is deleted by prune this long after the drop: until then "
        "its status reads `dropped` and a late delivery of it is dropped too; after, its "
        "status reads `unknown` (an erased user's late turns stay dropped by the erasure).",
    )
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
        default="INFO",
        validation_alias="MEMWELL_LOG_LEVEL",
        description="Log level of every process.",
    )

    # --- observability (logs, metrics) ---------------------------------------------------
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto",
        validation_alias="MEMWELL_LOG_FORMAT",
        description="json: one JSON object per line (for log shippers); console: for humans; "
        "auto: console when stderr is a terminal, json otherwise.",
    )
    worker_metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        validation_alias="MEMWELL_WORKER_METRICS_PORT",
        description="Port of a worker's Prometheus /metrics (0: off). `memwell up` uses "
        "9808, or the port its data dir used last time, or a free one after 9808. "
        "One port per worker node: its pool processes are aggregated (multiprocess mode).",
    )
    worker_metrics_host: str = Field(
        default="127.0.0.1",
        validation_alias="MEMWELL_WORKER_METRICS_HOST",
        description="Bind address of the worker metrics server (0.0.0.0 in containers).",
    )

    # --- api ------------------------------------------------------------------------------
    api_host: str = Field(
        default="127.0.0.1",
        validation_alias="MEMWELL_API_HOST",
        description="Bind address of `memwell api`.",
    )
    api_port: int = Field(
        default=8420,
        ge=1,
        le=65535,
        validation_alias="MEMWELL_API_PORT",
        description="Port of `memwell api`. Unset, `memwell up` uses the port its data dir "
        "used last time, else 8420 if free, else a free one after it.",
    )
    api_url: str | None = Field(
        default=None,
        validation_alias="MEMWELL_API_URL",
        description="Where clients (demo, SDK) reach the API. Unset: http://api_host:api_port.",
    )
    api_header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias="MEMWELL_API_HEADER_TIMEOUT_S",
        description="A connection must deliver a request's whole header block this soon "
        "after its first byte (or after connecting); a slower one is closed.",
    )
    api_body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="MEMWELL_API_BODY_TIMEOUT_S",
        description="A request's whole body must arrive this soon after its headers; a "
        "slower one is answered 408 and closed.",
    )
    api_keep_alive_s: int = Field(
        default=5,
        ge=1,
        validation_alias="MEMWELL_API_KEEP_ALIVE_S",
        description="Seconds an idle keep-alive connection stays open between requests.",
    )
    api_max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        validation_alias="MEMWELL_API_MAX_HEADER_BYTES",
        description="Largest request line plus headers, counted as the bytes received "
        "(whitespace included), however they arrive; a larger one is answered 431 and its "
        "connection closed.",
    )
    api_limit_concurrency: int = Field(
        default=0,
        ge=0,
        validation_alias="MEMWELL_API_LIMIT_CONCURRENCY",
        description="Open connections plus requests in flight above which a process "
        "answers 503 at once (0: no limit). Each open connection costs a file descriptor.",
    )
    api_workers: int | None = Field(
        default=None,
        ge=1,
        le=256,
        validation_alias="MEMWELL_API_WORKERS",
        description="Processes of `memwell api` (and `memwell up`'s API) when --workers is "
        "not given. Unset: one per two cores (one process keeps about one core busy under "
        "load, Postgres most of another; see docs/performance.md, figure 2).",
    )
    api_max_inflight: int | None = Field(
        default=None,
        ge=0,
        validation_alias="MEMWELL_API_MAX_INFLIGHT",
        description="Chat (both doors), context and search requests one API process serves "
        "at once; "
        "one more is answered 503 with Retry-After at once, before any of it is done, "
        "instead of queueing for seconds (0: no cap). /healthz, /metrics and the other "
        "routes never count. Unset: 64 in local mode (the process computes replies and "
        "query embeddings itself), no cap with a model endpoint (requests mostly wait "
        "for it, not for this process).",
    )
    max_message_chars: int = Field(
        default=32_000,
        ge=1,
        validation_alias="MEMWELL_MAX_MESSAGE_CHARS",
        description="Longest chat message accepted, in characters.",
    )
    max_batch_turns: int = Field(
        default=500,
        ge=1,
        validation_alias="MEMWELL_MAX_BATCH_TURNS",
        description="Most turns in one POST /v1/turns batch.",
    )

    replica_acks: int | None = Field(
        default=None,
        ge=0,
        le=16,
        validation_alias="MEMWELL_REPLICA_ACKS",
        description="Redis replicas that must hold a turn before `enqueue_turn` returns "
        "and before POST /v1/chat (broker durability) answers: the producer sends `WAIT "
        "n` after its write, so a failover cannot lose what it acknowledged. Unset: 1 "
        "when REDIS_URL is a sentinel:// URL, else 0 (one Redis has no replica to wait "
        "for). POST /v1/turns needs no wait: Postgres holds its turns first.",
    )
    replica_ack_timeout_ms: int = Field(
        default=1000,
        ge=1,
        le=60_000,
        validation_alias="MEMWELL_REPLICA_ACK_TIMEOUT_MS",
        description="How long a producer waits for MEMWELL_REPLICA_ACKS replicas. Past "
        "it the turn is not acknowledged: the API answers 503 with Retry-After and "
        "`enqueue_turn` raises ServiceUnavailable; a resend with the same turn id is "
        "harmless.",
    )

    chat_durability: Literal["broker", "outbox"] = Field(
        default="broker",
        validation_alias="MEMWELL_CHAT_DURABILITY",
        description="Where POST /v1/chat puts the exchange before replying. broker: the "
        "Redis queue and inbox, like enqueue_turn (AOF: a crash loses at most about 1 s, "
        "as it would the session buffer itself). outbox: Postgres first, like POST "
        "/v1/turns: survives any Redis loss, at about 10 ms more per chat.",
    )

    # --- tenancy, auth and hostile input -----------------------------------------------------
    auth_disabled: bool = Field(
        default=False,
        validation_alias="MEMWELL_AUTH_DISABLED",
        description="Serve without API keys (every caller is MEMWELL_DEFAULT_TENANT). For "
        "local development only; startup logs a warning. `memwell up` sets it for its "
        "children unless the environment says otherwise.",
    )
    auth_cache_s: float = Field(
        default=5.0,
        ge=0,
        le=300,
        validation_alias="MEMWELL_AUTH_CACHE_S",
        description="Seconds an API process trusts a key it has looked up; a revoked "
        "key keeps working at most this long. 0 looks every request up.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias="MEMWELL_API_KEY",
        description="The key clients of this package (the demo) send as a Bearer token.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        min_length=16,
        validation_alias="MEMWELL_METRICS_TOKEN",
        description="Bearer token a Prometheus scrape of the API's /metrics must send. "
        "Unset: /metrics answers 404, unless MEMWELL_AUTH_DISABLED (then it is open).",
    )
    rate_limit_per_s: float = Field(
        default=50.0,
        ge=0,
        validation_alias="MEMWELL_RATE_LIMIT_PER_S",
        description="Token-bucket refill rate per API key (requests/s); 0 turns it off.",
    )
    rate_limit_burst: int = Field(default=100, ge=1, validation_alias="MEMWELL_RATE_LIMIT_BURST")
    rate_limit_lease_s: float = Field(
        default=0.25,
        ge=0,
        le=5,
        validation_alias="MEMWELL_RATE_LIMIT_LEASE_S",
        description="A busy key's API process takes up to this long's worth of its "
        "tokens (at most 64) in one Redis round trip and spends them locally, so most of "
        "its requests skip the trip; unspent tokens go back. The limit still holds "
        "across processes. 0: every request asks Redis.",
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        validation_alias="MEMWELL_MAX_BODY_BYTES",
        description="Request bodies over this are refused (413) before being read whole.",
    )
    auth_fail_per_s: float = Field(
        default=2.0,
        ge=0,
        validation_alias="MEMWELL_AUTH_FAIL_PER_S",
        description="Requests with a missing or wrong API key allowed per client address "
        "per second, after a burst of MEMWELL_AUTH_FAIL_BURST (then 429); 0 turns it off. "
        "Behind a proxy, the address is the proxy's unless uvicorn trusts its "
        "X-Forwarded-For (FORWARDED_ALLOW_IPS).",
    )
    auth_fail_burst: int = Field(
        default=60,
        ge=1,
        validation_alias="MEMWELL_AUTH_FAIL_BURST",
        description="Failed authentications one client address may make at once before "
        "MEMWELL_AUTH_FAIL_PER_S applies.",
    )
    erasure_secret: SecretStr | None = Field(
        default=None,
        min_length=16,
        validation_alias="MEMWELL_ERASURE_SECRET",
        description="Key of the HMAC that names an erased user's tombstone, so a guessed "
        "user id cannot be confirmed from the database alone. Every process of a stack "
        "must share it. Unset: generated once into MEMWELL_DATA_DIR/erasure.secret, which "
        "suits processes sharing one data dir (memwell up); set it on multi-host stacks.",
    )
    max_metadata_bytes: int = Field(
        default=16 * 1024,
        ge=2,
        validation_alias="MEMWELL_MAX_METADATA_BYTES",
        description="Size of one turn's metadata as compact JSON.",
    )

    @field_validator("database_url", "database_read_url")
    @classmethod
    def _check_database_urls(cls, value: str | None) -> str | None:
        for url in (value or "").split(","):
            if url.strip():
                _obeys(check_database_url, url.strip())
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value:
            _obeys(check_redis_url, value)
        return value

    @field_validator("openai_base_url")
    @classmethod
    def _check_endpoint(cls, value: str | None) -> str | None:
        if value is not None:
            _obeys(check_http_url, value)
        return value

    @field_validator("local_llm_gguf", mode="before")
    @classmethod
    def _empty_gguf_is_unset(cls, value: object) -> object:
        # As Path, "" would be ".", the working directory, refused as "a directory".
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("api_url")
    @classmethod
    def _check_api_url(cls, value: str | None) -> str | None:
        if value:  # empty, like unset: http://api_host:api_port
            _obeys(check_http_url, value)
        return value

    @field_validator("reembed_targets")
    @classmethod
    def _check_reembed_targets(cls, value: str) -> str:
        for number, entry in enumerate(filter(None, (e.strip() for e in value.split(","))), 1):
            spec, at, endpoint = entry.partition("@")
            if ":" not in spec:
                raise ValueError(f"entry {number}: expected provider:model[@endpoint URL]")
            if at:
                _obeys(check_http_url, endpoint.strip(), f"entry {number}'s endpoint")
        return value

    @model_validator(mode="after")
    def _calibrate_for_the_local_model(self) -> Settings:
        # Cosines of different models live in different bands: a cut-off the operator
        # did not set comes from the selected model's calibration.
        if self.resolved_embedding_provider != "local":
            return self
        calibration = CALIBRATIONS[self.local_model]
        for name in ("similarity_floor", "merge_threshold", "supersede_floor"):
            if name not in self.model_fields_set:
                object.__setattr__(self, name, getattr(calibration, name))
        return self

    @property
    def database_read_urls(self) -> list[str]:
        """MEMWELL_DATABASE_READ_URL as a list (empty: no replicas)."""
        return [u.strip() for u in (self.database_read_url or "").split(",") if u.strip()]

    def resolved_replica_acks(self, redis_url: str) -> int:
        """MEMWELL_REPLICA_ACKS, or its default for this Redis: 1 behind Sentinel."""
        if self.replica_acks is not None:
            return self.replica_acks
        return 1 if is_sentinel(redis_url) else 0

    @property
    def llm_mode(self) -> bool:
        """True when a model endpoint is configured; local mode otherwise."""
        return self.openai_api_key is not None or self.openai_base_url is not None

    @property
    def resolved_api_max_inflight(self) -> int:
        """The in-flight cap of expensive requests per API process (0: none)."""
        if self.api_max_inflight is not None:
            return self.api_max_inflight
        return 0 if self.llm_mode else LOCAL_API_MAX_INFLIGHT

    @property
    def resolved_pipeline_mode(self) -> Literal["local", "llm", "hybrid"]:
        """The pipeline mode `auto` stands for: hybrid with an operator's endpoint, local
        otherwise. On LoCoMo (docs/evaluation.md), hybrid with a capable writer recalled
        clearly more than local mode, and with small local models no less. The CPU model
        `memwell up --llm-gguf` serves is such a small one: it would add no recall and
        consolidate at a fiftieth of local mode's pace, so it serves the chat doors and
        joins consolidation only when asked (llm or hybrid)."""
        if self.pipeline_mode != "auto":
            return self.pipeline_mode
        if not self.llm_mode or self.serves_local_model:
            return "local"
        return "hybrid"

    @property
    def serves_local_model(self) -> bool:
        """Whether the endpoint is the local model server `memwell up` supervises."""
        local = self.local_llm_url
        return local is not None and (self.openai_base_url or "").rstrip("/") == local.rstrip("/")

    @property
    def pipeline_uses_llm(self) -> bool:
        """Whether consolidation calls the model endpoint or runs locally."""
        return self.resolved_pipeline_mode != "local"

    @property
    def resolved_embedding_provider(self) -> Literal["local", "openai"]:
        if self.embedding_provider == "auto":
            return "openai" if self.llm_mode else "local"
        return self.embedding_provider

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"


def _obeys(check: Callable[[str], None], url: str, what: str = "") -> None:
    """Run a URL rule as a field check: its ConfigurationError becomes the ValueError
    pydantic reports against the setting's name."""
    try:
        check(url)
    except ConfigurationError as exc:
        raise ValueError(f"{what}: {exc}" if what else str(exc)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, validated once."""
    return Settings()
