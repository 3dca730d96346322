"""The `memwell` command: run the stack, its parts, migrations and the demo."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from memwell import __version__
from memwell.local.admin_cli import dlq, keys
from memwell.local.cli_errors import BadOption, OneLineErrors
from memwell.local.maintenance_cli import maintenance
from memwell.local.reembed_cli import reembed

# Only click and the command modules load at the top: every command imports what it
# needs (settings, the database, Celery) in its body, so `memwell --help` answers at
# once (tests/local/test_cli.py checks what it loads).


@click.group(cls=OneLineErrors)
@click.version_option(__version__, "--version", "-V", prog_name="memwell")
@click.option(
    "--debug", is_flag=True, envvar="MEMWELL_DEBUG", help="Show the traceback of a failure."
)
def main(debug: bool) -> None:
    """Memwell: memory for AI agents."""
    from memwell.core.logs import configure_logging, wants_json
    from memwell.core.settings import get_settings

    settings = get_settings()
    configure_logging(settings.log_level, json=wants_json(settings.log_format))


@main.command()
def migrate() -> None:
    """Apply database migrations (alembic upgrade head)."""
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.migrate import upgrade

    upgrade(stack.database_url(get_settings()))
    click.echo("database is at the latest migration")


@main.command()
@click.option("--host", default=None, help="Bind address (default MEMWELL_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default MEMWELL_API_PORT).")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Uvicorn worker processes (default MEMWELL_API_WORKERS, else one per two cores).",
)
def api(host: str | None, port: int | None, workers: int | None) -> None:
    """Serve the HTTP API."""
    from uvicorn.importer import import_from_string

    from memwell.core.settings import get_settings

    # By name, as uvicorn names the app: the CLI sits below the doors and never
    # imports them (import-linter's layers).
    run = import_from_string("api.server:run")
    run(get_settings(), host=host, port=port, workers=workers)


def _celery(*args: str) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "worker.celery_app", *args])


@main.command()
@click.option("--queues", default="ingest,embed,llm,maintenance", show_default=True)
@click.option(
    "--concurrency", type=int, default=None, help="Processes (default MEMWELL_WORKER_CONCURRENCY)."
)
@click.option("--events", is_flag=True, help="Send task events (for Flower's task views).")
@click.option(
    "--autoscale",
    default=None,
    metavar="MAX,MIN",
    help="Grow to MAX processes under backlog, shrink to MIN idle (Celery's autoscaler; "
    "replaces --concurrency). For I/O-bound queues (llm); see docs/scaling.md.",
)
def worker(queues: str, concurrency: int | None, events: bool, autoscale: str | None) -> None:
    """Run a Celery worker consuming the given queues.

    Prometheus multiprocess mode needs its directory before any process imports
    prometheus-client: set here, inherited by the pool children."""
    from memwell.core.metrics import MULTIPROC_ENV
    from memwell.core.metrics_dir import fresh_metrics_dir
    from memwell.core.settings import get_settings

    n = concurrency or get_settings().worker_concurrency
    if not os.environ.get(MULTIPROC_ENV):
        os.environ[MULTIPROC_ENV] = str(fresh_metrics_dir(get_settings().data_dir))
    _celery(
        "worker",
        "-Q",
        queues,
        *(["--autoscale", autoscale] if autoscale else ["-c", str(n)]),
        "--loglevel",
        get_settings().log_level,
        "--without-gossip",
        "--without-mingle",
        *(["--events"] if events else []),
    )


@main.command()
def beat() -> None:
    """Run the beat scheduler (exactly one per deployment)."""
    from memwell.core.settings import get_settings

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule = str(settings.data_dir / "celerybeat-schedule")
    _celery("beat", "--loglevel", settings.log_level, "--schedule", schedule)


@main.command()
@click.option("--api-url", default=None, help="Default: the running stack's API.")
def demo(api_url: str | None) -> None:
    """Replay a two-session conversation against a running stack and show recall."""
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.local.demo import run_demo

    settings = get_settings()
    key = settings.api_key.get_secret_value() if settings.api_key else None
    checks = run_demo(api_url or stack.api_url(settings), api_key=key)
    if not all(c.found for c in checks):
        raise SystemExit(1)


def _gguf_file(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """--llm-gguf, checked as it is parsed: only an existing, readable regular file in
    GGUF passes, before anything starts."""
    if value is None:
        return None
    from memwell.core.errors import ConfigurationError
    from memwell.local.llm_server import gguf_path

    try:
        return gguf_path(value)
    except ConfigurationError as exc:
        raise BadOption(f"--llm-gguf: {exc}") from None


@main.command()
@click.option(
    "--demo/--no-demo", "with_demo", default=False, help="Run the demo once the stack is up."
)
@click.option("--exit-after-demo", is_flag=True, help="Stop the stack when the demo ends.")
@click.option(
    "--llm-gguf",
    default=None,
    callback=_gguf_file,
    metavar="PATH",
    help="Serve this GGUF model with llama.cpp (the llm-local extra) and use it for chat "
    "and LLM mode (default MEMWELL_LOCAL_LLM_GGUF).",
)
def up(with_demo: bool, exit_after_demo: bool, llm_gguf: Path | None) -> None:
    """Start embedded services (unless URLs are set), migrate, and supervise api,
    worker and beat until Ctrl-C; says "ready" once a worker consumes. One per data
    dir."""
    from memwell.core.settings import get_settings
    from memwell.local.up import run_up

    settings = get_settings()
    if llm_gguf is not None:
        settings = settings.model_copy(update={"local_llm_gguf": llm_gguf})
    raise SystemExit(
        run_up(
            settings,
            with_demo=with_demo,
            exit_after_demo=exit_after_demo,
            python=Path(sys.executable),
        )
    )


@main.command()
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=int, default=8421, show_default=True, help="HTTP port (path /mcp).")
@click.option("--tenant", default=None, help="Tenant the tools act for (default: the default).")
def mcp(transport: str, host: str, port: int, tenant: str | None) -> None:
    """Serve the MCP tools remember, recall, forget and get_context."""
    from memwell.agents.mcp_server import run
    from memwell.core.settings import get_settings

    run(get_settings(), transport=transport, host=host, port=port, tenant=tenant)


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "locomo", "memwell"]),
    default="jsonl",
    show_default=True,
    help="jsonl, locomo: turns, consolidated by the workers; memwell: a `memwell export` "
    "file, whose live memories are added directly.",
)
@click.option(
    "--tenant", default=None, help="Default: the file's (memwell), else MEMWELL_DEFAULT_TENANT."
)
@click.option("--user", "user_id", default=None, help="memwell: import as this user.")
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Turns per task (default MEMWELL_EMBED_BATCH, so one consolidation batch covers "
    "each task's turns); memwell: memories per transaction (at most 500).",
)
@click.option("--wait/--no-wait", default=True, help="Follow consolidation to the end.")
@click.option("--timeout", type=float, default=3600.0, show_default=True, help="Seconds to wait.")
def import_(
    file: Path,
    fmt: str,
    tenant: str | None,
    user_id: str | None,
    batch_size: int | None,
    wait: bool,
    timeout: float,
) -> None:
    """Import turns from FILE (JSONL of turns, or a LoCoMo file) through the workers, or
    a user's memories from a `memwell export` file."""
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine, make_sessionmaker
    from memwell.local.bulk_import import load, run_import

    if fmt == "memwell":
        _import_memories(file, tenant=tenant, user_id=user_id, batch_size=batch_size)
        return
    if user_id is not None:
        raise click.UsageError("--user applies to --format memwell only")
    settings = get_settings()
    turns = load(file, fmt)
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        summary = run_import(
            turns,
            tenant=tenant or settings.default_tenant,
            sessions=make_sessionmaker(engine),
            broker_url=stack.redis_url(settings),
            batch_size=batch_size or settings.embedding_batch_size,
            wait=wait,
            timeout_s=timeout,
        )
    finally:
        engine.dispose()
    click.echo(summary.render())
    if summary.failed:
        raise SystemExit(1)


def _import_memories(
    file: Path, *, tenant: str | None, user_id: str | None, batch_size: int | None
) -> None:
    from memwell.core.settings import get_settings
    from memwell.local.memory_files import import_file

    summary = import_file(
        get_settings(), file, tenant=tenant, user_id=user_id, batch_size=batch_size
    )
    click.echo(summary.render())


@main.command()
@click.option("--user", "user_id", required=True, help="Whose memories.")
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
@click.option(
    "--include-superseded",
    is_flag=True,
    help="Also superseded and deleted memories (their `state` says which).",
)
def export(user_id: str, tenant: str | None, include_superseded: bool) -> None:
    """Write a user's memories to standard output as JSON Lines: a header, then one
    memory per line with its state and history. Progress goes to standard error."""
    from memwell.core.settings import get_settings
    from memwell.local.memory_files import export_file

    settings = get_settings()
    resolved = tenant or settings.default_tenant
    header = export_file(
        settings, sys.stdout, tenant=resolved, user_id=user_id,
        include_superseded=include_superseded,
    )  # fmt: skip
    click.echo(f"exported {header.count} memories of {resolved}/{user_id}", err=True)


@main.command()
@click.argument("user_id")
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
@click.option("--entities-limit", "entities_limit", default=10, show_default=True,
              help="How many of the most mentioned entities.")  # fmt: skip
@click.option("--relations-limit", "relations_limit", default=20, show_default=True,
              help="Relations shown per entity.")  # fmt: skip
def profile(user_id: str, tenant: str | None, entities_limit: int, relations_limit: int) -> None:
    """Print what a user's entity memory holds now, as JSON: the current single-valued
    facts by entity and the top entities with their relations (GET
    /v1/users/{id}/profile)."""
    import asyncio

    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_async_engine
    from memwell.db.tenancy import async_tenant_session, make_async_tenant_sessionmaker
    from memwell.users.profile import get_profile

    settings = get_settings()
    resolved = tenant or settings.default_tenant

    async def read() -> str:
        engine = make_async_engine(stack.database_url(settings), pool_size=1)
        try:
            sessions = make_async_tenant_sessionmaker(engine)
            async with async_tenant_session(sessions, resolved) as session:
                found = await get_profile(
                    session, tenant=resolved, user_id=user_id,
                    entities_limit=entities_limit, relations_limit=relations_limit,
                )  # fmt: skip
            return found.model_dump_json(indent=2)
        finally:
            await engine.dispose()

    click.echo(asyncio.run(read()))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Queue depths, workers alive, backlog age, dead letters and store counts."""
    import json

    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine, make_sessionmaker
    from memwell.maintenance.status import (
        StackStatus,
        read_broker,
        read_model_server,
        read_store,
        render,
    )

    settings = get_settings()
    broker_url = stack.redis_url(settings)
    report = StackStatus.for_stack(broker_url=broker_url, api_url=stack.api_url(settings))
    read_broker(report, broker_url)
    if model_server := stack.model_server_url(settings):
        read_model_server(report, model_server)
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        read_store(report, make_sessionmaker(engine))
    finally:
        engine.dispose()
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else render(report))
    if report.errors:  # the screen is shown, and a script or healthcheck sees the failure
        raise SystemExit(1)


main.add_command(maintenance)
main.add_command(dlq)
main.add_command(keys)
main.add_command(reembed)


@main.command("erase-user")
@click.argument("user_id")
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
def erase_user_cmd(user_id: str, tenant: str | None) -> None:
    """Erase a user everywhere (turns, memories, history, sessions, dead letters,
    Redis buffers); queued turns are dropped when a worker picks them up. Prints
    the receipt as JSON."""
    import json

    from memwell.core import stack
    from memwell.core.redis_clients import sync_client
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine
    from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
    from memwell.memories.erasure import erase_user

    settings = get_settings()
    resolved = tenant or settings.default_tenant
    sessions = make_tenant_sessionmaker(make_engine(stack.database_url(settings), pool_size=1))
    client = sync_client(stack.redis_url(settings))
    with tenant_transaction(sessions, resolved) as session:
        receipt = erase_user(session, client, tenant=resolved, user_id=user_id)
    click.echo(json.dumps(receipt.as_dict(), indent=2))


if __name__ == "__main__":
    main()
