"""Process-wide resources of the API, built once in the lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import redis.asyncio as aioredis
from sqlalchemy import Engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from memwell.auth.failed_auth import FailedAuthLimiter
from memwell.auth.key_cache import KeyCache
from memwell.auth.rate_limit import RateLimiter
from memwell.buffer.session_buffer import SessionBuffer
from memwell.chat.completions import CompletionsDeps
from memwell.chat.exchange import DeadLetter
from memwell.chat.service import ChatDeps
from memwell.core import stack
from memwell.core.queues import TaskName
from memwell.core.redaction import describe
from memwell.core.redis_clients import async_client
from memwell.core.settings import Settings
from memwell.db.engine import (
    make_async_engine,
    make_async_sessionmaker,
    make_engine,
    make_sessionmaker,
)
from memwell.db.replicas import REPLICA_TIMEOUT_S
from memwell.db.tenancy import make_async_tenant_sessionmaker
from memwell.embeddings import Embedder, build_embedder
from memwell.embeddings.lazy import LazyEmbedder
from memwell.intake.dead_letters import record_dead_letter
from memwell.intake.dispatch import send_ingest_async, send_summarize_async
from memwell.intake.postgres_outbox import accept_turns
from memwell.intake.turns import IngestPayload
from memwell.llm import build_chat_model
from memwell.llm.factory import build_upstream
from memwell.pipeline.consolidate import ConsolidationConfig
from memwell.pipeline.reconcile import ReconcilePolicy
from memwell.retrieval.service import RetrievalDeps, build_retrieval

log = logging.getLogger(__name__)


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    redis: aioredis.Redis
    #: every request's queries run as `memwell_app` under row-level security
    sessions: async_sessionmaker[AsyncSession]
    retrieval: RetrievalDeps
    chat: ChatDeps
    #: embeds memories a client adds or edits directly; loaded on first use
    documents: Embedder
    #: the reconcile rule of consolidation, for memories added directly
    reconcile_policy: ReconcilePolicy
    #: the OpenAI-compatible door and the model behind it
    completions: CompletionsDeps
    chat_broker_url: str
    # Sync pool for the outbox: accepted turns are persisted (in a worker thread)
    # before the API answers; see memwell/intake/postgres_outbox.py.
    outbox_engine: Engine
    accept: Callable[[IngestPayload], None]

    async def warm_up(self) -> None:
        """Pay first-use costs at startup, not on the first user's request: the ONNX
        session's first run, and one pooled connection to Postgres and to Redis."""
        await asyncio.to_thread(self.retrieval.embedder.inner.embed, ["warm up"])
        await self.retrieval.reads.open()
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        await self.redis.ping()

    #: the connecting role, for what precedes a tenant: API key lookups
    system_sessions: async_sessionmaker[AsyncSession]
    #: the first read replica, and tenant sessions on it for listings (None: no replica)
    read_engine: AsyncEngine | None
    read_sessions: async_sessionmaker[AsyncSession] | None
    limiter: RateLimiter | None
    #: failed authentications per client address, shared by every door that takes keys
    failed_auth: FailedAuthLimiter | None
    key_cache: KeyCache

    async def aclose(self) -> None:
        await self.completions.upstream.aclose()
        await self.retrieval.reads.close()
        await self.redis.aclose()
        await self.engine.dispose()
        if self.read_engine is not None:
            await self.read_engine.dispose()
        self.outbox_engine.dispose()


async def _send_to_outbox(
    accept: Callable[[IngestPayload], object], payload: IngestPayload
) -> None:
    # A synchronous Postgres transaction: on a thread, so the loop keeps serving.
    await asyncio.to_thread(accept, payload)


async def _send_to_broker(client: aioredis.Redis, broker_url: str, payload: IngestPayload) -> None:
    await send_ingest_async(client, [payload], broker_url=broker_url)


async def _summarize(
    client: aioredis.Redis, tenant: str, user_id: str, session_id: str, turn_ids: list[str]
) -> None:
    await send_summarize_async(
        client, tenant=tenant, user_id=user_id, session_id=session_id, turn_ids=turn_ids
    )


def _dead_letter_writer(sessions: sessionmaker[Session]) -> DeadLetter:
    """Keeps an exchange the API could not send as an ingest dead letter, which
    `memwell dlq replay` sends again."""

    def record(payload: IngestPayload, why: str) -> None:
        with sessions.begin() as session:
            record_dead_letter(
                session,
                task_name=TaskName.INGEST_TURNS,
                payload={"payload": payload.model_dump(mode="json")},
                error=why,
                tenant=payload.tenant,
            )

    async def write(payload: IngestPayload, why: str) -> None:
        try:
            await asyncio.to_thread(record, payload, why)
        except Exception as exc:  # Postgres too: all that is left is to say so
            log.error("an exchange was lost: no dead letter could be written: %s", describe(exc))

    return write


def _replica_engine(settings: Settings) -> AsyncEngine | None:
    if not settings.database_read_urls:
        return None
    return make_async_engine(
        settings.database_read_urls[0], pool_size=4, connect_timeout_s=REPLICA_TIMEOUT_S
    )


def build_state(settings: Settings) -> AppState:
    engine = make_async_engine(stack.database_url(settings))
    read_engine = _replica_engine(settings)
    redis_url = stack.redis_url(settings)
    outbox_engine = make_engine(stack.database_url(settings), pool_size=4)
    accept = partial(accept_turns, make_sessionmaker(outbox_engine), broker_url=redis_url)
    client = async_client(redis_url)
    buffer = SessionBuffer(
        client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
    )
    retrieval = build_retrieval(settings, database_url=stack.database_url(settings), access=client)
    deps = ChatDeps(
        settings=settings,
        retrieval=retrieval,
        buffer=buffer,
        model=build_chat_model(settings),
        # The chat path's own durability (docs/durability.md): the broker, like its
        # buffer, or the Postgres outbox at about 10 ms more per exchange.
        send=partial(_send_to_outbox, accept)
        if settings.chat_durability == "outbox"
        else partial(_send_to_broker, client, redis_url),
        summarize=partial(_summarize, client),
        dead_letter=_dead_letter_writer(make_sessionmaker(outbox_engine)),
    )
    limiter = (
        RateLimiter(
            client,
            rate_per_s=settings.rate_limit_per_s,
            burst=settings.rate_limit_burst,
            lease_s=settings.rate_limit_lease_s,
        )
        if settings.rate_limit_per_s > 0
        else None
    )
    failed_auth = (
        FailedAuthLimiter(
            RateLimiter(client, rate_per_s=settings.auth_fail_per_s, burst=settings.auth_fail_burst)
        )
        if settings.auth_fail_per_s > 0
        else None
    )
    return AppState(
        settings=settings,
        engine=engine,
        redis=client,
        sessions=make_async_tenant_sessionmaker(engine),
        retrieval=retrieval,
        chat=deps,
        documents=LazyEmbedder(partial(build_embedder, settings, threads=1)),
        reconcile_policy=ConsolidationConfig.from_settings(settings).policy,
        completions=CompletionsDeps(
            retrieval=retrieval,
            buffer=buffer,
            upstream=build_upstream(settings),
            redis=client,
            send=deps.send,
            summarize=deps.summarize,
            context_budget=settings.context_token_budget,
            dead_letter=deps.dead_letter,
        ),
        chat_broker_url=redis_url,
        outbox_engine=outbox_engine,
        accept=accept,
        system_sessions=make_async_sessionmaker(engine),
        read_engine=read_engine,
        read_sessions=make_async_tenant_sessionmaker(read_engine) if read_engine else None,
        limiter=limiter,
        failed_auth=failed_auth,
        key_cache=KeyCache(settings.auth_cache_s),
    )
