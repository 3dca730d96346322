"""How a `memwell` command fails: one line on standard error, not a traceback.

An operator who mistypes a key prefix or points at a stopped database needs the
reason, not forty lines of stack. Settings that cannot work (named by
memwell/core/settings_errors.py, never with their values), a domain error
(`MemwellError`) or a failure to reach Postgres, Redis, the broker or the API becomes
`Error: <message>` and exit code 1; `memwell --debug` (or MEMWELL_DEBUG=1) lets the
traceback through. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Any

import click

from memwell.core.errors import MemwellError


def _one_line(text: str) -> str:
    """The first non-empty line, without the driver's indentation."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _unreachable(exc: BaseException) -> str | None:
    """Which service `exc` says could not be reached, or None. The client libraries
    are imported here, on the failure path only, so the CLI starts without them."""
    import psycopg
    import redis.exceptions
    from kombu.exceptions import OperationalError as BrokerError
    from sqlalchemy import exc as sa_exc

    from memwell.sdk.errors import TransportError

    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | psycopg.OperationalError):
        return "the database"
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return "Redis"
    if isinstance(exc, BrokerError):
        return "the broker"
    if isinstance(exc, TransportError):
        return "the API"
    if isinstance(exc, ConnectionError | TimeoutError):
        return "a service"
    return None


def describe(exc: BaseException) -> str | None:
    """The one-line message for an expected failure; None for a bug."""
    from memwell.core.settings_errors import describe_settings_error

    if (settings_problem := describe_settings_error(exc)) is not None:
        return settings_problem
    if isinstance(exc, MemwellError):
        return _one_line(str(exc)) or type(exc).__name__
    service = _unreachable(exc)
    if service is None:
        return None
    # SQLAlchemy wraps the driver's error; the driver's first line says why.
    reason = _one_line(str(getattr(exc, "orig", None) or exc)) or type(exc).__name__
    return f"cannot reach {service}: {reason}"


class BadOption(click.ClickException):
    """An option value refused before anything runs: `Error: <message>` alone, and
    click's exit code for bad usage, 2 (click's own BadParameter adds the usage text,
    four lines for one mistake)."""

    exit_code = 2


class OneLineErrors(click.Group):
    """A group whose commands (and sub-groups') fail with one line, see the module doc."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except Exception as exc:
            message = describe(exc)
            if message is None or ctx.params.get("debug"):
                raise
            raise click.ClickException(message) from exc
