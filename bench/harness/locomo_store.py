"""A throwaway stack holding the LoCoMo conversations as memories, for figures that ask
real questions of real users.

The turns go through the real pipeline (`bench.evals.locomo.ingest`: enqueued as
`memwell import --format locomo` would, consolidated by a real worker), one user per
conversation in the tenant `locomo`. The worker is stopped once every turn is
processed, so nothing but the figure's own load runs while it measures; a read key of
that tenant is made as `memwell keys create` does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from bench.evals.locomo import TENANT, ingest
from bench.harness.locomo_data import Conversation, load
from bench.harness.stack import BenchStack, service_env, services, worker_process
from memwell.auth.keys import create_key
from memwell.db.engine import make_engine, make_sessionmaker


@dataclass(frozen=True)
class LocomoStore:
    stack: BenchStack
    conversations: list[Conversation]
    #: a key of the `locomo` tenant with the given scopes
    api_key: str
    #: live memories per user (sample id)
    memories: dict[str, int]
    ingest_s: float


def _memories_per_user(database_url: str) -> dict[str, int]:
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT user_id, count(*) FROM memories WHERE tenant = :t "
                    "AND deleted_at IS NULL GROUP BY user_id ORDER BY user_id"
                ),
                {"t": TENANT},
            ).all()
    finally:
        engine.dispose()
    return {str(user): int(n) for user, n in rows}


def _key(database_url: str, scopes: list[str]) -> str:
    engine = make_engine(database_url, pool_size=1)
    try:
        with make_sessionmaker(engine).begin() as session:
            return create_key(session, tenant=TENANT, name="bench", scopes=scopes).key
    finally:
        engine.dispose()


@contextmanager
def locomo_store(
    data: Path,
    *,
    scopes: list[str] | None = None,
    conversations: int | None = None,
    shared_buffers_mb: int | None = None,
) -> Iterator[LocomoStore]:
    """Postgres + Valkey with every conversation of `data` (or its first
    `conversations`) consolidated; no worker left."""
    loaded = load(data)[:conversations]
    with services(shared_buffers_mb=shared_buffers_mb) as stack:
        assert stack.redis_url is not None
        env = service_env(stack)
        # In-process code of the benchmark (settings, enqueue) finds the same stack.
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "MEMWELL_DATA_DIR")})
        os.environ["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        n_turns = sum(len(c.turns) for c in loaded)
        print(f"ingesting {len(loaded)} LoCoMo conversations ({n_turns} turns) through "
              "a real worker", file=sys.stderr)  # fmt: skip
        with worker_process(stack):
            seconds = ingest(loaded, stack.database_url, stack.redis_url)
        yield LocomoStore(
            stack=stack,
            conversations=loaded,
            api_key=_key(stack.database_url, scopes or ["read"]),
            memories=_memories_per_user(stack.database_url),
            ingest_s=seconds,
        )
