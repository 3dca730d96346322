"""The re-embed tests' stack: a 768-d fake embedding endpoint (the target model), a
worker of their own on the maintenance queue (the tests kill it), and retrieve() as
the API runs it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import get_settings
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.db.tenancy import make_tenant_sessionmaker
from memwell.local.worker_process import WorkerProcess
from memwell.retrieval.service import RetrievalDeps, build_retrieval, retrieve
from tests.support.fake_openai import FakeOpenAI
from tests.support.reembed_factories import ANN_THRESHOLD, TARGET_DIMS


@pytest.fixture(scope="module")
def fake_768() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embedding_dim=TARGET_DIMS) as server:
        yield server


@pytest.fixture(scope="module")
def reembed_env(stack_env: dict[str, str]) -> dict[str, str]:
    return stack_env | {"MEMWELL_ANN_THRESHOLD": str(ANN_THRESHOLD)}


@pytest.fixture(scope="module")
def maintenance_worker(reembed_env: dict[str, str]) -> Iterator[WorkerProcess]:
    """A worker of its own (the test kills it), on the maintenance queue only."""
    process = WorkerProcess(reembed_env, concurrency=1, name="reembed", queues="maintenance")
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def sessions(stack_env: dict[str, str]) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(stack_env["DATABASE_URL"], pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def tenant_sessions(stack_env: dict[str, str]) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(stack_env["DATABASE_URL"], pool_size=2)
    yield make_tenant_sessionmaker(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def search(stack_env: dict[str, str], loop: asyncio.AbstractEventLoop) -> Iterator[Any]:
    """retrieve() as the API runs it (per-user query model routing included)."""
    deps: RetrievalDeps = build_retrieval(
        get_settings(), database_url=stack_env["DATABASE_URL"], access=None
    )

    def run(tenant: str, user_id: str, query: str) -> list[Any]:
        return loop.run_until_complete(
            retrieve(deps, tenant=tenant, user_id=user_id, query=query, k=5)
        )

    yield run
    loop.run_until_complete(deps.reads.close())
