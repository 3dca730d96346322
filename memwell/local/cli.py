"""The `memwell` command: run the stack, its parts, migrations and the demo."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import click
from sqlalchemy.orm import Session, sessionmaker

from memwell.core import stack
from memwell.core.errors import MemwellError
from memwell.core.logs import configure_logging, wants_json
from memwell.core.metrics import MULTIPROC_ENV
from memwell.core.settings import get_settings
from memwell.local.maintenance_cli import maintenance

log = logging.getLogger("memwell")


def _setup_logging() -> None:
    settings = get_settings()
    configure_logging(settings.log_level, json=wants_json(settings.log_format))


@click.group()
def main() -> None:
    """Memwell: memory for AI agents."""
    _setup_logging()


@main.command()
def migrate() -> None:
    """Apply database migrations (alembic upgrade head)."""
    from memwell.db.migrate import upgrade

    upgrade(stack.database_url(get_settings()))
    click.echo("database is at the latest migration")


@main.command()
@click.option("--host", default=None, help="Bind address (default MEMWELL_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default MEMWELL_API_PORT).")
@click.option("--workers", type=int, default=1, show_default=True, help="Uvicorn worker processes.")
def api(host: str | None, port: int | None, workers: int) -> None:
    """Serve the HTTP API."""
    import uvicorn

    settings = get_settings()
    if workers > 1 and not os.environ.get(MULTIPROC_ENV):
        # Several processes answer /metrics in turn: aggregate them (multiprocess mode).
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="memwell-api-metrics-")
    uvicorn.run(
        "api.main:create_app",
        factory=True,
        host=host or settings.api_host,
        port=port or settings.api_port,
        workers=workers,
        log_level=settings.log_level.lower(),
        log_config=None,  # keep memwell.core.logs' JSON handler; uvicorn's would replace it
        access_log=False,  # the request middleware logs each request, with its id
    )


def _celery(*args: str) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "worker.celery_app", *args])


@main.command()
@click.option("--queues", default="ingest,embed,llm,maintenance", show_default=True)
@click.option(
    "--concurrency", type=int, default=None, help="Processes (default MEMWELL_WORKER_CONCURRENCY)."
)
@click.option("--events", is_flag=True, help="Send task events (for Flower's task views).")
def worker(queues: str, concurrency: int | None, events: bool) -> None:
    """Run a Celery worker consuming the given queues.

    Prometheus multiprocess mode needs its directory before any process imports
    prometheus-client: set here, inherited by the pool children."""
    n = concurrency or get_settings().worker_concurrency
    if not os.environ.get(MULTIPROC_ENV):
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="memwell-metrics-")
    _celery(
        "worker",
        "-Q",
        queues,
        "-c",
        str(n),
        "--loglevel",
        get_settings().log_level,
        "--without-gossip",
        "--without-mingle",
        *(["--events"] if events else []),
    )


@main.command()
def beat() -> None:
    """Run the beat scheduler (exactly one per deployment)."""
    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule = str(settings.data_dir / "celerybeat-schedule")
    _celery("beat", "--loglevel", settings.log_level, "--schedule", schedule)


@main.command()
@click.option("--api-url", default=None, help="Default: the running stack's API.")
def demo(api_url: str | None) -> None:
    """Replay a two-session conversation against a running stack and show recall."""
    from memwell.local.demo import run_demo

    settings = get_settings()
    key = settings.api_key.get_secret_value() if settings.api_key else None
    checks = run_demo(api_url or stack.api_url(settings), api_key=key)
    if not all(c.found for c in checks):
        raise SystemExit(1)


@main.command()
@click.option(
    "--demo/--no-demo", "with_demo", default=False, help="Run the demo once the stack is up."
)
@click.option("--exit-after-demo", is_flag=True, help="Stop the stack when the demo ends.")
def up(with_demo: bool, exit_after_demo: bool) -> None:
    """Start embedded services (unless URLs are set), migrate, and supervise api,
    worker and beat until Ctrl-C."""
    from memwell.local.up import run_up

    raise SystemExit(
        run_up(
            get_settings(),
            with_demo=with_demo,
            exit_after_demo=exit_after_demo,
            python=Path(sys.executable),
        )
    )


@main.group()
def dlq() -> None:
    """Dead letters: tasks that failed for good."""


@dlq.command("list")
@click.option("--all", "include_replayed", is_flag=True, help="Include replayed letters.")
@click.option("--limit", type=int, default=50, show_default=True)
def dlq_list(include_replayed: bool, limit: int) -> None:
    """Show dead letters, newest first."""
    from memwell.intake.dead_letters import list_dead_letters

    with _sessions().begin() as session:
        letters = list_dead_letters(session, include_replayed=include_replayed, limit=limit)
        if not letters:
            click.echo("no dead letters")
        for d in letters:
            state = f"replayed {d.replayed_at:%Y-%m-%d %H:%M}" if d.replayed_at else "open"
            click.echo(
                f"{d.id:>6}  {d.created_at:%Y-%m-%d %H:%M:%S}  {d.task_name}  "
                f"tenant={d.tenant or '-'}  {state}\n        {d.error[:200]}"
            )


@dlq.command("replay")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "replay_all", is_flag=True, help="Replay every open letter.")
def dlq_replay(ids: tuple[int, ...], replay_all: bool) -> None:
    """Re-send dead letters (by id, or --all) to their tasks."""
    from memwell.intake.dead_letters import replay_dead_letters
    from memwell.intake.dispatch import send_by_name

    if not ids and not replay_all:
        raise click.UsageError("give dead-letter ids, or --all")
    with _sessions().begin() as session:
        done = replay_dead_letters(session, send_by_name, ids=list(ids) if ids else None)
    click.echo(f"replayed {len(done)}: {', '.join(map(str, done)) or '-'}")


def _sessions() -> sessionmaker[Session]:
    from memwell.db.engine import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(stack.database_url(get_settings()), pool_size=1))


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

    run(get_settings(), transport=transport, host=host, port=port, tenant=tenant)


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "locomo"]), default="jsonl", show_default=True
)
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Turns per task (default MEMWELL_EMBED_BATCH, so one consolidation batch covers "
    "each task's turns).",
)
@click.option("--wait/--no-wait", default=True, help="Follow consolidation to the end.")
@click.option("--timeout", type=float, default=3600.0, show_default=True, help="Seconds to wait.")
def import_(
    file: Path, fmt: str, tenant: str | None, batch_size: int | None, wait: bool, timeout: float
) -> None:
    """Import turns from FILE (JSONL of turns, or a LoCoMo file) through the workers."""
    from memwell.db.engine import make_engine, make_sessionmaker
    from memwell.local.bulk_import import load, run_import

    settings = get_settings()
    try:
        turns = load(file, fmt)
    except MemwellError as exc:
        raise click.ClickException(str(exc)) from exc
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


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Queue depths, workers alive, backlog age, dead letters and store counts."""
    import json

    from memwell.db.engine import make_engine, make_sessionmaker
    from memwell.maintenance.status import StackStatus, read_broker, read_store, render

    settings = get_settings()
    report = StackStatus()
    read_broker(report, stack.redis_url(settings))
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        read_store(report, make_sessionmaker(engine))
    finally:
        engine.dispose()
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else render(report))


main.add_command(maintenance)


@main.group()
def keys() -> None:
    """Manage API keys (stored hashed; a key's secret is shown only when created)."""


@keys.command("create")
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
@click.option("--name", required=True, help="What the key is for, e.g. 'billing-app prod'.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(["read", "write", "admin"]),
    default=("read", "write"),
    show_default=True,
)
def keys_create(tenant: str | None, name: str, scopes: tuple[str, ...]) -> None:
    """Create a key bound to one tenant and print it (once)."""
    from memwell.auth.keys import create_key

    with _sessions().begin() as session:
        created = create_key(
            session, tenant=tenant or get_settings().default_tenant, name=name, scopes=scopes
        )
    click.echo(created.key)
    click.echo(
        f"id {created.id}  tenant {created.tenant}  scopes {','.join(created.scopes)}  "
        "(store the key now: only its hash is kept)",
        err=True,
    )


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
def keys_list(tenant: str | None) -> None:
    """List keys: id, display prefix, tenant, name, scopes, created, revoked."""
    from memwell.auth.keys import list_keys

    with _sessions()() as session:
        for k in list_keys(session, tenant=tenant):
            revoked = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live"
            click.echo(
                f"{k.id}  {k.prefix}…  {k.tenant}  {k.name!r}  {','.join(k.scopes)}  "
                f"created {k.created_at:%Y-%m-%d %H:%M}  {revoked}"
            )


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke a key by id or display prefix; it stops working at once."""
    from memwell.auth.keys import revoke_key

    with _sessions().begin() as session:
        when = revoke_key(session, key_id=key_id)
    click.echo(f"revoked at {when.isoformat()}")


@main.command("erase-user")
@click.argument("user_id")
@click.option("--tenant", default=None, help="Default: MEMWELL_DEFAULT_TENANT.")
def erase_user_cmd(user_id: str, tenant: str | None) -> None:
    """Erase a user everywhere (turns, memories, history, sessions, dead letters,
    Redis buffers); queued turns are dropped when a worker picks them up. Prints
    the receipt as JSON."""
    import json

    import redis

    from memwell.db.engine import make_engine
    from memwell.db.tenancy import make_tenant_sessionmaker, tenant_transaction
    from memwell.memories.erasure import erase_user

    settings = get_settings()
    resolved = tenant or settings.default_tenant
    sessions = make_tenant_sessionmaker(make_engine(stack.database_url(settings), pool_size=1))
    client = redis.Redis.from_url(stack.redis_url(settings))
    with tenant_transaction(sessions, resolved) as session:
        receipt = erase_user(session, client, tenant=resolved, user_id=user_id)
    click.echo(json.dumps(receipt.as_dict(), indent=2))


if __name__ == "__main__":
    main()
