"""`memwell up`: the embedded one-machine stack.

Starts Postgres+pgvector and Valkey unless DATABASE_URL / REDIS_URL are set, prepares
the local model, migrates, then supervises api, worker and beat (and the demo, once)
until Ctrl-C. Everything it started is stopped on the way out.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from memwell.core.settings import Settings
from memwell.core.stack import StackInfo, clear_stack, write_stack
from memwell.db import migrate
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.local.supervisor import Child, Supervisor

log = logging.getLogger(__name__)

DEFAULT_WORKER_METRICS_PORT = 9808


def _prepare_local_model(settings: Settings) -> None:
    if settings.resolved_embedding_provider != "local":
        return
    from memwell.embeddings.onnx_export import ensure_onnx_model

    log.info("preparing the local embedding model in %s", settings.model_cache_dir)
    # Memories and queries may use different weights (int8 queries by default).
    precisions = {settings.local_embedding_precision, settings.local_query_precision}
    for precision in sorted(precisions):
        ensure_onnx_model(
            settings.model_cache_dir,
            quantized=precision == "int8",
            progress=lambda msg: log.info("model: %s", msg),
        )


def _auth_env(settings: Settings, database_url: str, *, with_demo: bool) -> dict[str, str]:
    """The one-machine stack serves without keys unless told otherwise, so the README's
    first command and its curl examples work with no setup; the API logs a warning.
    With MEMWELL_AUTH_DISABLED=false, the demo gets a fresh read/write key instead."""
    if "auth_disabled" not in settings.model_fields_set:
        log.warning(
            "auth is disabled for this local stack; set MEMWELL_AUTH_DISABLED=false to "
            "require API keys (`memwell keys create`)"
        )
        return {"MEMWELL_AUTH_DISABLED": "true"}
    if settings.auth_disabled or not with_demo or settings.api_key is not None:
        return {}
    from memwell.auth.keys import create_key
    from memwell.db.engine import make_engine, make_sessionmaker

    engine = make_engine(database_url, pool_size=1)
    try:
        with make_sessionmaker(engine).begin() as session:
            created = create_key(
                session,
                tenant=settings.default_tenant,
                name="memwell up demo",
                scopes=["read", "write"],
            )
    finally:
        engine.dispose()
    log.info("created API key %s… for the demo", created.prefix)
    return {"MEMWELL_API_KEY": created.key}


def run_up(settings: Settings, *, with_demo: bool, exit_after_demo: bool, python: Path) -> int:
    data = settings.data_dir.resolve()
    pg = None if settings.database_url else EmbeddedPostgres(pgdata=data / "pgdata")
    rd = None if settings.redis_url else EmbeddedRedis(data_dir=data / "valkey")
    try:
        database_url = pg.start() if pg else settings.database_url
        redis_url = rd.start() if rd else settings.redis_url
        assert database_url and redis_url
        log.info("postgres: %s", "embedded" if pg else "external")
        log.info("redis: %s (%s)", redis_url, "embedded" if rd else "external")
        _prepare_local_model(settings)
        migrate.upgrade(database_url)
        api_url = settings.resolved_api_url
        write_stack(settings, StackInfo(database_url, redis_url, api_url, os.getpid()))
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "MEMWELL_DATA_DIR": str(data),
            "HF_HUB_OFFLINE": "1",
        }
        env.setdefault("MEMWELL_WORKER_METRICS_PORT", str(DEFAULT_WORKER_METRICS_PORT))
        env.update(_auth_env(settings, database_url, with_demo=with_demo))
        if with_demo and "MEMWELL_LOG_LEVEL" not in os.environ:
            # Keep the demo's story readable; errors from the services still show.
            env["MEMWELL_LOG_LEVEL"] = "WARNING"
        cli = [str(python), "-m", "memwell"]
        children = [
            Child("api", [*cli, "api"]),
            Child("worker", [*cli, "worker"]),
            Child("beat", [*cli, "beat"]),
        ]
        if with_demo:
            children.append(Child("demo", [*cli, "demo", "--api-url", api_url], restart=False))
        log.info("serving at %s; press Ctrl-C to stop", api_url)
        supervisor = Supervisor(children, env=env, exit_after_oneshots=exit_after_demo)
        return supervisor.run()
    finally:
        clear_stack(settings)
        if rd:
            rd.stop()
        if pg:
            pg.stop()
