"""Per-process resources of a worker: the database engine and the embedder.

Created lazily in the process that uses them (after the prefork fork), never at
import: a connection pool or an ONNX session shared across a fork is corrupt.
`worker_process_init` warms them up so the first task does not pay the load.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from celery.signals import worker_process_init
from sqlalchemy.orm import Session, sessionmaker

from memwell import stack
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.tenancy import make_tenant_sessionmaker
from memwell.embeddings import Embedder, build_embedder
from memwell.settings import Settings, get_settings


@dataclass
class Runtime:
    settings: Settings
    #: the connecting role: cross-tenant maintenance (sweep, dead letters)
    sessions: sessionmaker[Session]
    #: `memwell_app` under row-level security: everything done for one tenant
    tenant_sessions: sessionmaker[Session]
    embedder: Embedder
    pid: int


_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            settings = get_settings()
            # Threads inside one process share this pool; prefork processes each own one.
            engine = make_engine(stack.database_url(settings), pool_size=2)
            _runtime = Runtime(
                settings=settings,
                sessions=make_sessionmaker(engine),
                tenant_sessions=make_tenant_sessionmaker(engine),
                embedder=build_embedder(settings),
                pid=os.getpid(),
            )
        return _runtime


@worker_process_init.connect
def _warm_up(**_: object) -> None:
    get_runtime()
