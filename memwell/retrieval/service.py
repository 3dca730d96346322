"""Long-term retrieval's one entry point: `retrieve`.

Chat, REST search, /v1/context, the MCP tools and the SDK (through REST) all come
through here, so they cannot rank, filter or fail differently. The request's
parameters are built from the settings in one place (`search.params_from_settings`);
the statement, the per-user ANN index and access tracking are behind it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import redis.asyncio as aioredis

from memwell.core import inflight
from memwell.core.settings import Settings
from memwell.core.timing import Stopwatch
from memwell.db.read_pool import TenantReadPool
from memwell.db.recent_writes import wrote_recently
from memwell.db.replicas import RoutedReadPool, read_pool, reads_on_primary
from memwell.embeddings import CachedQueryEmbedder, build_embedder
from memwell.embeddings.metered import MeteredEmbedder
from memwell.embeddings.query_batcher import QueryBatcher, build_query_batcher
from memwell.reembed.query_models import QueryModels
from memwell.retrieval.access import record_access_in_background
from memwell.retrieval.ann import AnnRegistry
from memwell.retrieval.search import (
    MemoryHit,
    Overrides,
    SearchFilters,
    params_from_settings,
    search_pooled,
)


@dataclass
class RetrievalDeps:
    """What retrieval needs; built once per process by `build_retrieval`."""

    settings: Settings
    #: one round trip per search (memwell/db/read_pool.py)
    reads: TenantReadPool
    embedder: CachedQueryEmbedder
    ann: AnnRegistry = field(default_factory=AnnRegistry)
    #: None: hits are not marked accessed (benchmarks, replays)
    access: aioredis.Redis | None = None
    #: the query embedder is local CPU work, not a network call (see `embed_query`)
    local_embedder: bool = False
    #: during and after a re-embed, a user's queries embed with their memories' model
    models: QueryModels | None = None
    #: concurrent requests' queries embed together (None: each on its own)
    batcher: QueryBatcher | None = None


def build_retrieval(
    settings: Settings, *, database_url: str, access: aioredis.Redis | None
) -> RetrievalDeps:
    """Retrieval as every door runs it: the query embedder, the read pool, the ANN
    registry and access tracking, all from the settings."""
    embedder = CachedQueryEmbedder(
        MeteredEmbedder(build_embedder(settings, for_queries=True), use="query"),
        capacity=settings.query_cache_size,
    )
    return RetrievalDeps(
        settings=settings,
        reads=read_pool(database_url, settings.database_read_urls),
        embedder=embedder,
        local_embedder=settings.resolved_embedding_provider == "local",
        access=access,
        models=QueryModels(settings),
        batcher=build_query_batcher(embedder, settings),
    )


async def embed_query(
    deps: RetrievalDeps, query: str, embedder: CachedQueryEmbedder | None = None
) -> np.ndarray:
    """The query's vector: a local model embeds on the loop's own thread when this is
    the only request being served; otherwise (other requests to serve, or an embedding
    endpoint to wait for) a worker thread does, for every query waiting at the time
    together (the batcher).

    Why not always a thread: the hand-off puts the model on the other core, whose caches
    hold none of it, which costs about a third more per query.
    """
    if embedder is None:  # not `or`: an empty cache is falsy (it has a length)
        embedder = deps.embedder
    inline = deps.local_embedder and inflight.alone()
    if embedder is deps.embedder and deps.batcher is not None:
        return await deps.batcher.embed_query(query, inline=inline)
    if inline and embedder is deps.embedder:
        return embedder.embed_query(query)
    return await asyncio.to_thread(embedder.embed_query, query)


async def query_embedder(deps: RetrievalDeps, tenant: str, user_id: str) -> CachedQueryEmbedder:
    """The embedder whose vectors this user's memories hold (memwell/reembed/routing.py)."""
    if deps.models is None:
        return deps.embedder
    target = await deps.models.target_for(deps.reads, tenant, user_id)
    if target is None or target.model_name == deps.embedder.model_name:
        return deps.embedder
    return deps.models.embedder_for(target)


async def retrieve(
    deps: RetrievalDeps,
    *,
    tenant: str,
    user_id: str,
    query: str,
    k: int | None = None,
    filters: SearchFilters | None = None,
    as_of: datetime | None = None,
    overrides: Overrides | None = None,
    watch: Stopwatch | None = None,
) -> list[MemoryHit]:
    """The user's memories most relevant to `query`, best first, with score parts.

    Hits are marked accessed in the background; the caller never waits for that write.
    Behind read replicas, a user who just wrote a memory is read on the primary.
    """
    on_primary = isinstance(deps.reads, RoutedReadPool) and await wrote_recently(
        deps.access, tenant=tenant, user_id=user_id
    )
    with reads_on_primary(on_primary):
        return await _retrieve(
            deps, tenant=tenant, user_id=user_id, query=query, k=k, filters=filters,
            as_of=as_of, overrides=overrides, watch=watch,
        )  # fmt: skip


async def _retrieve(
    deps: RetrievalDeps,
    *,
    tenant: str,
    user_id: str,
    query: str,
    k: int | None,
    filters: SearchFilters | None,
    as_of: datetime | None,
    overrides: Overrides | None,
    watch: Stopwatch | None,
) -> list[MemoryHit]:
    start = time.perf_counter()
    # No connection is held while the query waits for, and runs on, the CPU: requests
    # holding one while queued for the embedder would empty the pool under load.
    embedder = await query_embedder(deps, tenant, user_id)
    vector = await embed_query(deps, query, embedder)
    if watch:
        start = watch.lap("embed", start)
    model = embedder.model_name
    # Both reads run as `memwell_app` for this tenant (row-level security).
    ann_dims = await deps.ann.dims_for(deps.reads, tenant, user_id, model)
    params = params_from_settings(
        deps.settings,
        tenant=tenant,
        user_id=user_id,
        query_vector=vector,
        embedding_model=model,
        query_text=query,
        k=k,
        filters=filters,
        as_of=as_of,
        overrides=overrides,
        ann_dims=ann_dims,
    )
    hits = await search_pooled(deps.reads, params)
    if watch:
        watch.lap("retrieve", start)
    if deps.access is not None and as_of is None:
        record_access_in_background(deps.access, tenant=tenant, ids=[h.id for h in hits])
    return hits
