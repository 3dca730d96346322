"""Process-wide resources of the API, built once in the lifespan."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

import redis.asyncio as aioredis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memwell import stack
from memwell.buffer import SessionBuffer
from memwell.chat import ChatDeps
from memwell.db.engine import make_async_engine, make_async_sessionmaker
from memwell.embeddings import CachedQueryEmbedder, build_embedder
from memwell.embeddings.metered import MeteredEmbedder
from memwell.enqueue import send_payload, send_summarize
from memwell.llm import build_chat_model
from memwell.settings import Settings


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    redis: aioredis.Redis
    chat: ChatDeps
    chat_broker_url: str

    async def warm_up(self) -> None:
        """Pay first-use costs at startup, not on the first user's request: the ONNX
        session's first run, and one pooled connection to Postgres and to Redis."""
        await asyncio.to_thread(self.chat.embedder.inner.embed, ["warm up"])
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        await self.redis.ping()

    async def aclose(self) -> None:
        await self.redis.aclose()
        await self.engine.dispose()


def _summarize(
    broker_url: str, tenant: str, user_id: str, session_id: str, turn_ids: list[str]
) -> None:
    send_summarize(
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        turn_ids=turn_ids,
        broker_url=broker_url,
    )


def build_state(settings: Settings) -> AppState:
    engine = make_async_engine(stack.database_url(settings))
    redis_url = stack.redis_url(settings)
    client = aioredis.Redis.from_url(redis_url)
    deps = ChatDeps(
        settings=settings,
        sessions=make_async_sessionmaker(engine),
        buffer=SessionBuffer(
            client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
        ),
        embedder=CachedQueryEmbedder(
            MeteredEmbedder(build_embedder(settings), use="query"),
            capacity=settings.query_cache_size,
        ),
        model=build_chat_model(settings),
        send=partial(send_payload, broker_url=redis_url),
        summarize=partial(_summarize, redis_url),
        access=client,
    )
    return AppState(
        settings=settings, engine=engine, redis=client, chat=deps, chat_broker_url=redis_url
    )
