"""Per-process resources of a worker: the database engine, the embedder, Redis and
the pipeline steps (local or LLM mode).

Created lazily in the process that uses them (after the prefork fork), never at
import: a connection pool or an ONNX session shared across a fork is corrupt.
`worker_process_init` warms them up so the first task does not pay the load.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import redis
from celery.signals import celeryd_after_setup, worker_process_init
from sqlalchemy.orm import Session, sessionmaker

from memwell.buffer.session_buffer import SyncSessionBuffer
from memwell.core import stack
from memwell.core.redis_clients import sync_client
from memwell.core.settings import Settings, get_settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.tenancy import make_tenant_sessionmaker
from memwell.embeddings import Embedder, build_embedder
from memwell.embeddings.metered import MeteredEmbedder
from memwell.pipeline.factory import PipelineSteps, build_steps


@dataclass
class Runtime:
    settings: Settings
    #: the connecting role: cross-tenant maintenance (sweep, dead letters)
    sessions: sessionmaker[Session]
    #: `memwell_app` under row-level security: everything done for one tenant
    tenant_sessions: sessionmaker[Session]
    embedder: Embedder
    redis: redis.Redis
    buffer: SyncSessionBuffer
    steps: PipelineSteps
    pid: int


_runtime: Runtime | None = None
_lock = threading.Lock()
# Set in the worker's main process before it forks its pool: children inherit it.
_pool_processes = 1


@celeryd_after_setup.connect
def _remember_pool_size(instance: object = None, **_: object) -> None:
    global _pool_processes
    # Unset, Celery starts one process per core.
    _pool_processes = max(1, int(getattr(instance, "concurrency", None) or os.cpu_count() or 1))


def embedder_threads(settings: Settings, pool_processes: int) -> int:
    """Intra-op threads of each process's local embedder: the cores shared out.

    Why: every pool process embeds at once under load, and each ONNX session spins as
    many threads as it is given; two processes of two threads on 2 cores embedded 156
    texts/s, against 184 with one thread each (raw embedder, LoCoMo turns).
    """
    if settings.embed_threads is not None:
        return settings.embed_threads
    return max(1, (os.cpu_count() or 1) // max(1, pool_processes))


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            settings = get_settings()
            # Threads inside one process share this pool; prefork processes each own one.
            engine = make_engine(stack.database_url(settings), pool_size=2)
            sessions = make_sessionmaker(engine)
            client = sync_client(stack.redis_url(settings))
            _runtime = Runtime(
                settings=settings,
                sessions=sessions,
                embedder=MeteredEmbedder(
                    build_embedder(settings, threads=embedder_threads(settings, _pool_processes)),
                    use="memory",
                ),
                redis=client,
                buffer=SyncSessionBuffer(
                    client, token_budget=settings.buffer_token_budget, ttl_s=settings.buffer_ttl_s
                ),
                steps=build_steps(settings, sessions=sessions, redis_client=client),
                tenant_sessions=make_tenant_sessionmaker(engine),
                pid=os.getpid(),
            )
        return _runtime


_redis: redis.Redis | None = None


def get_redis() -> redis.Redis:
    """This process's Redis client (locks, the enqueue inbox, session buffers)."""
    global _redis
    with _lock:
        if _redis is None:
            _redis = sync_client(stack.redis_url(get_settings()))
        return _redis


@worker_process_init.connect
def _warm_up(**_: object) -> None:
    get_runtime()
