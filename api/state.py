"""Process-wide resources of the API, built once in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memwell import stack
from memwell.buffer import SessionBuffer
from memwell.chat import ChatDeps
from memwell.db.engine import make_async_engine, make_async_sessionmaker
from memwell.db.tenancy import make_async_tenant_sessionmaker
from memwell.embeddings import CachedQueryEmbedder, build_embedder
from memwell.enqueue import send_payload
from memwell.llm import build_chat_model
from memwell.ratelimit import RateLimiter
from memwell.settings import Settings


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    redis: aioredis.Redis
    chat: ChatDeps
    chat_broker_url: str
    #: the connecting role, for what precedes a tenant: API key lookups
    system_sessions: async_sessionmaker[AsyncSession]
    limiter: RateLimiter | None

    async def aclose(self) -> None:
        await self.redis.aclose()
        await self.engine.dispose()


def build_state(settings: Settings) -> AppState:
    engine = make_async_engine(stack.database_url(settings))
    redis_url = stack.redis_url(settings)
    client = aioredis.Redis.from_url(redis_url)
    deps = ChatDeps(
        settings=settings,
        # Every request's queries run as `memwell_app` under row-level security.
        sessions=make_async_tenant_sessionmaker(engine),
        buffer=SessionBuffer(
            client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
        ),
        embedder=CachedQueryEmbedder(build_embedder(settings), capacity=settings.query_cache_size),
        model=build_chat_model(settings),
        send=partial(send_payload, broker_url=redis_url),
    )
    limiter = (
        RateLimiter(client, rate_per_s=settings.rate_limit_per_s, burst=settings.rate_limit_burst)
        if settings.rate_limit_per_s > 0
        else None
    )
    return AppState(
        settings=settings,
        engine=engine,
        redis=client,
        chat=deps,
        chat_broker_url=redis_url,
        system_sessions=make_async_sessionmaker(engine),
        limiter=limiter,
    )
