"""`memwell reembed start|status|pause|resume|finish|abort`: move the store to another
embedding model in the background (memwell/reembed/). A thin skin: each command calls
one service function; `start --wait` and `status --watch` draw a progress bar by
reading the migration's row, nothing else.

Heavy modules are imported inside the commands: `memwell --help` loads none of them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from memwell.core.settings import Settings
    from memwell.reembed.lifecycle import Dispatch
    from memwell.reembed.progress import MigrationStatus

REFRESH_S = 0.5  # how often a progress bar redraws
DONE_STATES = ("ready", "finished", "aborted", "paused")


@contextmanager
def _database() -> Iterator[tuple[sessionmaker[Session], Settings]]:
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine, make_sessionmaker

    settings = get_settings()
    engine = make_engine(stack.database_url(settings), pool_size=1)
    try:
        yield make_sessionmaker(engine), settings
    finally:
        engine.dispose()


def _sender(settings: Settings) -> Dispatch:
    from memwell.core import stack
    from memwell.reembed.sender import step_sender

    return step_sender(stack.redis_url(settings))


def _echo(status: MigrationStatus, as_json: bool = False) -> None:
    if as_json:
        click.echo(status.model_dump_json(indent=2))
        return
    scope = status.tenant or "every tenant"
    if status.user_id:
        scope += f"/{status.user_id}"
    click.echo(
        f"re-embed {status.id} to {status.target_spec} ({status.target_dims}-d), {scope}: "
        f"{status.state}, {status.embedded}/{status.total} memories walked, "
        f"{status.switched_users} users switched"
    )
    if status.error:
        click.echo(f"last error: {status.error}", err=True)


def _watch(sessions: sessionmaker[Session], migration_id: int) -> MigrationStatus:
    """A progress bar until the re-embed stops moving on its own (ready, or done)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from memwell.reembed.lifecycle import get_status

    status = get_status(sessions, migration_id=migration_id)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    ) as bar:
        task = bar.add_task(f"re-embed {migration_id}", total=max(status.total, 1))
        while True:
            status = get_status(sessions, migration_id=migration_id)
            bar.update(
                task,
                completed=min(status.embedded, status.total)
                if status.state == "running"
                else status.total,
                description=f"re-embed {migration_id} ({status.state})",
            )
            if status.state in DONE_STATES:
                return status
            time.sleep(REFRESH_S)


@click.group()
def reembed() -> None:
    """Re-embed every memory with another model, without downtime."""


@reembed.command()
@click.option(
    "--to", "target", required=True, help="provider:model, e.g. openai:text-embedding-3-small."
)
@click.option(
    "--base-url",
    default=None,
    help="The target's OpenAI-compatible endpoint (stored with the job).",
)
@click.option("--tenant", default=None, help="Only this tenant (default: the whole store).")
@click.option("--user", "user_id", default=None, help="Only this user (needs --tenant).")
@click.option("--batch", "batch_size", type=int, default=None, help="Memories per batch.")
@click.option("--rate", type=float, default=None, help="Memories per second at most (0: no cap).")
@click.option("--wait/--no-wait", default=True, help="Show a progress bar until it is ready.")
def start(
    target: str,
    base_url: str | None,
    tenant: str | None,
    user_id: str | None,
    batch_size: int | None,
    rate: float | None,
    wait: bool,
) -> None:
    """Start a re-embed on the maintenance queue; searches keep working throughout."""
    from memwell.reembed.lifecycle import start_migration
    from memwell.reembed.specs import build_target_embedder, parse_spec

    with _database() as (sessions, settings):
        try:
            spec = parse_spec(target, base_url=base_url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--to") from exc
        status = start_migration(
            sessions,
            target=spec,
            embedder=build_target_embedder(settings, spec),
            tenant=tenant,
            user_id=user_id,
            batch_size=batch_size or settings.reembed_batch_size,
            rate_per_s=settings.reembed_rate_per_s if rate is None else rate,
            dispatch=_sender(settings),
        )
        _echo(_watch(sessions, status.id) if wait else status)


@reembed.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--watch", is_flag=True, help="A progress bar until it stops moving.")
@click.option("--id", "migration_id", type=int, default=None, help="Default: the newest.")
def status(as_json: bool, watch: bool, migration_id: int | None) -> None:
    """The newest re-embed (or --id): state and progress."""
    from memwell.reembed.lifecycle import get_status

    with _database() as (sessions, _):
        current = get_status(sessions, migration_id=migration_id)
        _echo(_watch(sessions, current.id) if watch else current, as_json)


@reembed.command()
def pause() -> None:
    """Stop after the current batch; `resume` continues from the cursor."""
    from memwell.reembed.lifecycle import pause_migration

    with _database() as (sessions, _):
        _echo(pause_migration(sessions))


@reembed.command()
def resume() -> None:
    """Continue a paused re-embed (or re-send a stalled one's step)."""
    from memwell.reembed.lifecycle import resume_migration

    with _database() as (sessions, settings):
        _echo(resume_migration(sessions, dispatch=_sender(settings)))


@reembed.command()
@click.option(
    "--grace",
    "grace_s",
    type=float,
    default=None,
    help="Seconds to keep the previous vectors (default MEMWELL_REEMBED_GRACE_S; 0: drop now).",
)
def finish(grace_s: float | None) -> None:
    """Make the target the default; drop the previous vectors after the grace period."""
    from memwell.reembed.lifecycle import finish_migration, get_status
    from memwell.reembed.specs import build_target_embedder, parse_spec

    with _database() as (sessions, settings):
        current = get_status(sessions)
        spec = parse_spec(current.target_spec, base_url=current.target_base_url)
        status = finish_migration(
            sessions,
            embedder=build_target_embedder(settings, spec),
            grace=timedelta(seconds=settings.reembed_grace_s if grace_s is None else grace_s),
            dispatch=_sender(settings),
        )
        _echo(status)
        click.echo(
            f"set the workers' and API's embedding model to {status.target_spec} and restart "
            "them: until then each write is embedded twice",
            err=True,
        )


@reembed.command()
@click.option("--wait/--no-wait", default=False, help="Wait until the store is as it was.")
def abort(wait: bool) -> None:
    """Put every user back on the previous model and drop the target's vectors."""
    from memwell.reembed.lifecycle import abort_migration

    with _database() as (sessions, settings):
        status = abort_migration(sessions, dispatch=_sender(settings))
        _echo(_watch(sessions, status.id) if wait else status)
