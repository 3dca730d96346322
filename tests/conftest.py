"""Session-wide real services: embedded Postgres+pgvector (migrated with Alembic),
Redis, a Celery worker subprocess and the API app. Tests stay independent by using
unique tenant/user ids, made by the `ids` fixture.

Under pytest-xdist each worker process is a session of its own, so each gets its own
stack: nothing in it is shared between workers. Files are the unit of distribution
(`--dist loadfile`): module-scoped workers and servers start once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from memwell.auth.keys import create_key
from memwell.core.settings import get_settings
from memwell.db import migrate
from memwell.db.engine import make_engine, make_sessionmaker
from memwell.local import session_services
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: The run's scratch space, inside the checkout (ignored by git): pytest's basetemp and
#: the temporary directory of every process the tests start, so a run leaves nothing in
#: the system's /tmp and a killed run's leftovers go with the next run.
SCRATCH = ".pytest-tmp"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its basetemp and TMPDIR come from the controller
    scratch = config.rootpath / SCRATCH
    if config.option.basetemp is None:
        config.option.basetemp = str(scratch / "basetemp")
    tmp = scratch / "tmp"
    if os.environ.get("TMPDIR") == str(tmp):
        return  # a pytest that a test of this run started: the run's scratch is in use
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Set before any worker, server or subprocess starts: they all inherit it.
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None


@pytest.fixture(scope="module")
def one_stack_at_a_time() -> Iterator[None]:
    """Held by a module that runs `memwell up`: up takes the usual ports when they are
    free, so two at once (two xdist workers) could pick the same one. A lock file in the
    run's TMPDIR, which every worker shares, lets one such module run at a time."""
    with (Path(tempfile.gettempdir()) / "memwell-up.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
        fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Under basetemp, not TMPDIR: the servers' data lives as long as the session.
    with session_services.redis_url(tmp_path_factory.mktemp("services")) as url:
        yield url


@pytest.fixture(scope="session")
def postgres(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[session_services.PostgresService]:
    with session_services.postgres(tmp_path_factory.mktemp("services")) as service:
        yield service


@pytest.fixture(scope="session")
def database_url(postgres: session_services.PostgresService) -> str:
    migrate.upgrade(postgres.url)
    return postgres.url


@pytest.fixture(scope="session")
def stack_env(
    database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment every process of the test stack runs with (local mode)."""
    overrides = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "MEMWELL_DATA_DIR": str(tmp_path_factory.mktemp("memwell-data")),
        "MEMWELL_EMBEDDING_PROVIDER": "local",
        "HF_HUB_OFFLINE": "1",
        # Auth stays on (the default); the limiter is on but roomy, so only the
        # rate-limit tests, with their own app, ever see a 429.
        "MEMWELL_RATE_LIMIT_PER_S": "1000",
        "MEMWELL_RATE_LIMIT_BURST": "100000",
        # What a Prometheus scrape of the API sends (tests/api/test_observability.py).
        "MEMWELL_METRICS_TOKEN": "test-metrics-scrape-token",
        # The smallest per-user ANN threshold the settings allow, in every worker: a
        # job that builds a user's index decides by the settings of whichever worker
        # takes it, and a test user of 1,000 memories must qualify in all of them.
        "MEMWELL_ANN_THRESHOLD": "1000",
    }
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    os.environ.update(overrides)
    get_settings.cache_clear()
    return dict(os.environ)


@pytest.fixture(scope="session")
def worker(stack_env: dict[str, str]) -> Iterator[WorkerProcess]:
    process = WorkerProcess(stack_env)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def make_key(db: sessionmaker[Session]) -> Callable[..., dict[str, str]]:
    """Create an API key; returns the Authorization header that carries it."""

    def make(tenant: str = "default", scopes: tuple[str, ...] = ("admin",)) -> dict[str, str]:
        with db.begin() as session:
            created = create_key(session, tenant=tenant, name="test", scopes=scopes)
        return {"Authorization": f"Bearer {created.key}"}

    return make


@pytest.fixture(scope="session")
def auth_headers(make_key: Callable[..., dict[str, str]]) -> dict[str, str]:
    """An admin key of the default tenant: what the `api` client sends."""
    return make_key("default", ("admin",))


@pytest.fixture(scope="session")
def api(stack_env: dict[str, str], auth_headers: dict[str, str]) -> Iterator[TestClient]:
    from api.main import create_app

    with TestClient(create_app(get_settings()), headers=auth_headers) as client:
        yield client


@pytest.fixture(scope="session")
def db(stack_env: dict[str, str]) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(stack_env["DATABASE_URL"], pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def ids() -> dict[str, str]:
    """Fresh tenant/user/session ids: a per-test namespace in the shared stores."""
    tag = uuid.uuid4().hex[:10]
    return {"tenant": f"t-{tag}", "user": f"u-{tag}", "session": f"s-{tag}"}


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAI]:
    """The tests' OpenAI-compatible server, one per module: an LLM-mode app or worker
    of the module binds its URL."""
    with FakeOpenAI() as server:
        yield server
