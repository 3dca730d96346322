"""`memwell up`: the embedded one-machine stack.

Takes the data dir's lock (one `up` per data dir) and stops what a killed previous
`up` left running (memwell/local/stack_lock.py). Starts Postgres+pgvector and Valkey
unless DATABASE_URL / REDIS_URL are set, on ports stable for the data dir
(memwell/local/ports.py), prepares the local model, migrates, then supervises api,
beat and worker; with a GGUF file (--llm-gguf, MEMWELL_LOCAL_LLM_GGUF) it first starts
llama.cpp's server on it and points them at it (memwell/local/llm_server.py). It
prints "ready" once the API answers /readyz and a worker consumes; the demo, if asked
for, starts then. On Ctrl-C everything it started stops in order: API, beat, workers,
the model server, Valkey, Postgres.

The API runs as many uvicorn processes as `memwell api` does by default
(MEMWELL_API_WORKERS, else one per two cores: api/server.py default_workers): on a
2-core machine one, which under load keeps about one core busy while Postgres, Valkey
and the workers share the other; a second process served about as many chats at a
worse p95 (docs/operations.md, "API processes").
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import replace
from pathlib import Path

from memwell.core.metrics import MULTIPROC_ENV
from memwell.core.metrics_dir import fresh_metrics_dir
from memwell.core.queues import NON_LLM_QUEUES, Queue
from memwell.core.settings import Settings
from memwell.core.stack import StackInfo, clear_stack, write_stack
from memwell.db import migrate
from memwell.local.embedded import EmbeddedPostgres, EmbeddedRedis
from memwell.local.llm_server import LocalLlmServer, planned_server
from memwell.local.ports import StackPorts, stack_ports
from memwell.local.readiness import stack_ready
from memwell.local.reaper import reaper
from memwell.local.stack_lock import PidRecord, StackLock, clean_orphans
from memwell.local.supervisor import Child, Readiness, Supervisor

log = logging.getLogger(__name__)


def _prepare_local_model(settings: Settings) -> None:
    if settings.resolved_embedding_provider != "local":
        return
    from memwell.embeddings.local_models import local_model
    from memwell.embeddings.onnx_export import ensure_onnx_model

    spec = local_model(settings.local_model)
    log.info("preparing the local embedding model in %s", settings.model_cache_dir)
    # Memories and queries may use different weights (int8 queries by default).
    precisions = {settings.local_embedding_precision, settings.local_query_precision}
    for precision in sorted(precisions):
        ensure_onnx_model(
            settings.model_cache_dir,
            quantized=precision == "int8",
            progress=lambda msg: log.info("model: %s", msg),
            spec=spec,
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


def _child_env(
    settings: Settings, *, database_url: str, redis_url: str, ports: StackPorts, with_demo: bool
) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "MEMWELL_DATA_DIR": str(settings.data_dir.resolve()),
        "MEMWELL_API_PORT": str(ports.api),
        "MEMWELL_WORKER_METRICS_PORT": str(ports.worker_metrics),
        "HF_HUB_OFFLINE": "1",
    }
    env.update(_auth_env(settings, database_url, with_demo=with_demo))
    if with_demo and "MEMWELL_LOG_LEVEL" not in os.environ:
        # Keep the demo's story readable; errors from the services still show.
        env["MEMWELL_LOG_LEVEL"] = "WARNING"
    return env


def _workers(cli: list[str], *, llm_pipeline: bool, data: Path) -> list[Child]:
    """One worker on every queue; in LLM mode, the llm queue gets a worker of its own
    with one process, so a slow model call never holds up ingest, embedding or the
    maintenance jobs, and a single-slot local model server gets one request at a time.
    Both workers share one metrics directory, so the first one's /metrics port also
    shows the model worker's counters (its fallbacks)."""
    if not llm_pipeline:
        return [Child("worker", [*cli, "worker"])]
    shared = {MULTIPROC_ENV: str(fresh_metrics_dir(data))}
    return [
        Child("worker", [*cli, "worker", "--queues", NON_LLM_QUEUES], env=shared),
        Child(
            "worker-llm",
            [*cli, "worker", "--queues", Queue.LLM.value, "--concurrency", "1"],
            env={**shared, "MEMWELL_WORKER_METRICS_PORT": "0"},
        ),
    ]


def _children(
    python: Path,
    api_url: str,
    *,
    with_demo: bool,
    llm: LocalLlmServer | None,
    llm_pipeline: bool,
    data: Path,
) -> list[Child]:
    """In stop order: the API stops taking requests first, the workers go next, the
    model server they call last (it starts first: see the supervisor)."""
    cli = [str(python), "-m", "memwell"]
    children = [
        Child("api", [*cli, "api"]),
        Child("beat", [*cli, "beat"]),
        *_workers(cli, llm_pipeline=llm_pipeline, data=data),
    ]
    if llm is not None:
        children.append(llm.child(python, data))
    if with_demo:
        demo = Child("demo", [*cli, "demo", "--api-url", api_url], restart=False, after_ready=True)
        children.insert(0, demo)
    return children


def _announce_ready(api_url: str) -> None:
    log.info("ready: serving at %s; press Ctrl-C to stop", api_url)
    # On stdout, whatever the log format: the line an operator or a script waits for.
    print(f"ready: serving at {api_url}", flush=True)
    print(f"console: {api_url}/console", flush=True)


def run_up(settings: Settings, *, with_demo: bool, exit_after_demo: bool, python: Path) -> int:
    llm = planned_server(settings)  # a bad model file or a missing extra: one line, first
    data = settings.data_dir.resolve()
    lock = StackLock(data)
    lock.acquire()  # a second `up` on this data dir stops here, with one line
    try:
        return _run_locked(settings, with_demo=with_demo, exit_after_demo=exit_after_demo,
                           python=python, llm=llm)  # fmt: skip
    finally:
        lock.release()


def _run_locked(
    settings: Settings,
    *,
    with_demo: bool,
    exit_after_demo: bool,
    python: Path,
    llm: LocalLlmServer | None,
) -> int:
    data = settings.data_dir.resolve()
    record = PidRecord(data)
    clean_orphans(record)
    ports = stack_ports(settings)
    if llm is not None:
        llm = replace(llm, port=ports.llm)
    pg = None if settings.database_url else EmbeddedPostgres(pgdata=data / "pgdata")
    rd = None if settings.redis_url else EmbeddedRedis(data_dir=data / "valkey", port=ports.redis)
    try:
        record.add("up", os.getpid())
        database_url = pg.start() if pg else settings.database_url
        if pg and pg.pid:
            record.add("postgres", pg.pid)
            reaper().watch(pg.pid, signum=signal.SIGINT)  # SIGINT: Postgres' fast shutdown
        redis_url = rd.start() if rd else settings.redis_url
        if rd and rd.pid:
            record.add("valkey", rd.pid)
            reaper().watch(rd.pid)
        assert database_url and redis_url
        log.info("postgres: %s", "embedded" if pg else "external")
        log.info("redis: %s (%s)", redis_url, "embedded" if rd else "external")
        _prepare_local_model(settings)
        migrate.upgrade(database_url)
        api_url = settings.api_url or f"http://{settings.api_host}:{ports.api}"
        model_server = llm.base_url if llm else None
        write_stack(
            settings, StackInfo(database_url, redis_url, api_url, os.getpid(), model_server)
        )
        env = _child_env(
            settings, database_url=database_url, redis_url=redis_url, ports=ports,
            with_demo=with_demo,
        )  # fmt: skip
        if llm is not None:
            env.update(llm.client_env(settings))
            log.info("local model server: %s as %r at %s", llm.gguf.name, llm.alias, model_server)
        log.info('starting at %s; "ready" follows once a worker consumes', api_url)
        supervisor = Supervisor(
            _children(
                python,
                api_url,
                with_demo=with_demo,
                llm=llm,
                data=data,
                # With --llm-gguf, the children's endpoint is the local server: `auto`
                # leaves consolidation to local mode there (Settings.resolved_pipeline_mode).
                llm_pipeline=settings.pipeline_mode in ("llm", "hybrid")
                if llm is not None
                else settings.pipeline_uses_llm,
            ),  # fmt: skip
            env=env,
            exit_after_oneshots=exit_after_demo,
            readiness=Readiness(
                probe=lambda: stack_ready(api_url), on_ready=lambda: _announce_ready(api_url)
            ),
            on_start=lambda child: _record_child(record, child),
        )
        return supervisor.run()
    finally:
        clear_stack(settings)
        _stop_service(rd, "valkey")
        _stop_service(pg, "postgres")
        record.clear()


def _record_child(record: PidRecord, child: Child) -> None:
    if child.process is not None:
        record.add(child.name, child.process.pid, group=True)


def _stop_service(service: EmbeddedPostgres | EmbeddedRedis | None, name: str) -> None:
    """Stop an embedded service after the children that used it; the reaper need not."""
    if service is None:
        return
    pid = service.pid
    service.stop()
    if pid is not None:
        reaper().forget(pid)
    log.info("stopped %s", name)
