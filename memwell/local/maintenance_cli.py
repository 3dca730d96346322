"""`memwell maintenance decay|prune|sweep|close-idle [--dry-run]`: the beat jobs by
hand, through the same functions the scheduled tasks call. A run walks to the end
(no batch cap), printing what it did; --dry-run changes nothing. `cluster` is the one
command that is no beat job (see memwell/maintenance/layout.py).

The jobs, the database and Redis are imported inside the commands: `memwell --help`
loads none of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    import redis
    from sqlalchemy.orm import Session, sessionmaker

    from memwell.core.settings import Settings
    from memwell.maintenance.batches import JobReport

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Report what would change; change nothing."
)


@contextmanager
def _database() -> Iterator[tuple[sessionmaker[Session], Settings]]:
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine, make_sessionmaker

    settings = get_settings()
    # No batch cap by hand: the operator asked for the whole job.
    settings = settings.model_copy(update={"maintenance_max_batches": 10**9})
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        yield make_sessionmaker(engine), settings
    finally:
        engine.dispose()


def _redis(settings: Settings) -> redis.Redis:
    from memwell.core import stack
    from memwell.core.redis_clients import sync_client

    return sync_client(stack.redis_url(settings))


def _echo(report: JobReport) -> None:
    click.echo(json.dumps(report.as_dict(), sort_keys=True))


def _run(job: Callable[[sessionmaker[Session], Settings, datetime], JobReport]) -> None:
    with _database() as (sessions, settings):
        _echo(job(sessions, settings, datetime.now(UTC)))


@click.group()
def maintenance() -> None:
    """Run a beat job by hand."""


@maintenance.command()
@dry_run_option
def decay(dry_run: bool) -> None:
    """Store the retention strength of every live memory."""
    from memwell.maintenance.jobs import run_decay

    _run(lambda s, cfg, now: run_decay(s, cfg, now=now, dry_run=dry_run))


@maintenance.command()
@dry_run_option
def prune(dry_run: bool) -> None:
    """Tombstone expired and faded memories; hard-delete old tombstones."""
    from memwell.maintenance.jobs import run_prune

    _run(lambda s, cfg, now: run_prune(s, cfg, now=now, dry_run=dry_run))


@maintenance.command("close-idle")
@dry_run_option
def close_idle(dry_run: bool) -> None:
    """Summarize, close and flush the buffers of idle sessions."""
    from memwell.maintenance.jobs import run_close_idle

    _run(lambda s, cfg, now: run_close_idle(s, cfg, _redis(cfg), now=now, dry_run=dry_run))


@maintenance.command()
@dry_run_option
def sweep(dry_run: bool) -> None:
    """Re-dispatch turns stuck in pending; report dead letters."""
    from memwell.core import stack
    from memwell.maintenance.jobs import run_sweep

    _run(
        lambda s, cfg, now: run_sweep(
            s, cfg, _redis(cfg), broker_url=stack.redis_url(cfg), now=now, dry_run=dry_run
        )
    )


@maintenance.command()
@dry_run_option
@click.option(
    "--lock-timeout",
    default=5.0,
    show_default=True,
    help="Seconds to wait for the table lock before giving up.",
)
def cluster(dry_run: bool, lock_timeout: float) -> None:
    """Rewrite memories so each user's rows sit together (locks the table; not a beat job)."""
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine
    from memwell.maintenance.layout import cluster_memories

    settings = get_settings()
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        report = cluster_memories(engine, lock_timeout_s=lock_timeout, dry_run=dry_run)
    finally:
        engine.dispose()
    click.echo(json.dumps(report.as_dict(), sort_keys=True))
