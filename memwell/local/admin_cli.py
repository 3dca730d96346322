"""Operator commands on the store: API keys and dead letters."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


def operator_sessions() -> sessionmaker[Session]:
    """Sessions as the connecting role: these commands span tenants."""
    from memwell.core import stack
    from memwell.core.settings import get_settings
    from memwell.db.engine import make_engine, make_sessionmaker

    return make_sessionmaker(make_engine(stack.database_url(get_settings()), pool_size=1))


@click.group()
def dlq() -> None:
    """Dead letters: tasks that failed for good."""


@dlq.command("list")
@click.option("--all", "include_replayed", is_flag=True, help="Include replayed letters.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--payload", "show_payload", is_flag=True, help="Print each payload as JSON.")
def dlq_list(include_replayed: bool, limit: int, show_payload: bool) -> None:
    """Show dead letters, newest first: the whole error, the turn ids they carry and,
    with --payload, what they carry."""
    import json
    import textwrap

    from memwell.intake.dead_letters import list_dead_letters, replayable, turn_ids_of
    from memwell.intake.raw_letters import raw_not_kept

    with operator_sessions().begin() as session:
        letters = list_dead_letters(session, include_replayed=include_replayed, limit=limit)
        not_kept = raw_not_kept(session)
        if not_kept is not None:
            click.echo(
                f"{not_kept.count} unreadable messages not kept (raw letters at their bound, "
                f"MEMWELL_DEAD_LETTER_RAW_MAX_OPEN) since {not_kept.first_at:%Y-%m-%d %H:%M:%S}, "
                f"last {not_kept.last_at:%Y-%m-%d %H:%M:%S}: {not_kept.last_error}; "
                "`memwell dlq discard --raw` makes room"
            )
        if not letters:
            click.echo("no dead letters")
        for d in letters:
            state = f"replayed {d.replayed_at:%Y-%m-%d %H:%M}" if d.replayed_at else "open"
            if not replayable(d.payload):
                state += " (raw bytes: not replayable)"
            turns = ", ".join(turn_ids_of(d.payload)) or "-"
            click.echo(
                f"{d.id:>6}  {d.created_at:%Y-%m-%d %H:%M:%S}  {d.task_name}  "
                f"tenant={d.tenant or '-'}  {state}  turns: {turns}"
            )
            click.echo(textwrap.indent(textwrap.fill(d.error, 92), " " * 8))
            if show_payload:
                click.echo(textwrap.indent(json.dumps(d.payload, indent=2), " " * 8))


@dlq.command("replay")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "replay_all", is_flag=True, help="Replay every open letter.")
def dlq_replay(ids: tuple[int, ...], replay_all: bool) -> None:
    """Re-send dead letters (by id, or --all) to their tasks. Letters kept as raw bytes
    (a message no worker could read) are not tasks, and are skipped."""
    from memwell.intake.dead_letters import replay_dead_letters
    from memwell.intake.dispatch import send_by_name

    if not ids and not replay_all:
        raise click.UsageError("give dead-letter ids, or --all")
    with operator_sessions().begin() as session:
        done = replay_dead_letters(session, send_by_name, ids=list(ids) if ids else None)
    click.echo(f"replayed {len(done)}: {', '.join(map(str, done)) or '-'}")


@dlq.command("discard")
@click.argument("ids", nargs=-1, type=int)
@click.option(
    "--raw",
    "every_raw",
    is_flag=True,
    help="Every open letter of an unreadable message, and the count of those not kept.",
)
def dlq_discard(ids: tuple[int, ...], every_raw: bool) -> None:
    """Delete open dead letters (by id, or --raw): for letters an operator has read and
    will not replay, such as raw ones, whose number is bounded."""
    from memwell.intake.raw_letters import discard_dead_letters

    if not ids and not every_raw:
        raise click.UsageError("give dead-letter ids, or --raw")
    with operator_sessions().begin() as session:
        done = discard_dead_letters(session, ids=ids, every_raw=every_raw)
    click.echo(f"discarded {len(done)}: {', '.join(map(str, done)) or '-'}")


@click.group()
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
    from memwell.core.settings import get_settings

    with operator_sessions().begin() as session:
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

    with operator_sessions()() as session:
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

    with operator_sessions().begin() as session:
        when = revoke_key(session, key_id=key_id)
    click.echo(f"revoked at {when.isoformat()}")
