"""The rules every URL setting obeys, checked when the settings load.

A URL that no client can use must stop the process at startup, with the rule it
breaks: a worker with an unparseable DATABASE_URL said "ready" and failed every task,
and a Redis database -1 was retried forever. Each message names the rule and never
quotes the URL, which may hold a password.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from memwell.core.errors import ConfigurationError

PORT_RULE = "the port must be a number from 1 to 65535"
HTTP_RULE = "must be an http(s) URL with a host, such as https://host:port/path"
DATABASE_RULE = (
    "must be a SQLAlchemy Postgres URL, such as "
    "postgresql+psycopg://user:password@host:port/database"
)


def check_port(port: int | None) -> None:
    """A port, when the URL names one, in 1..65535."""
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(PORT_RULE)


def port_of(parts: SplitResult) -> int | None:
    """The port of a split URL, checked; None when it names none."""
    try:
        port = parts.port  # its own error quotes the port text
    except ValueError:
        raise ConfigurationError(PORT_RULE) from None
    check_port(port)
    return port


def check_http_url(url: str) -> None:
    """An http(s) URL with a host and a usable port."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(HTTP_RULE)
    port_of(parts)


def check_database_url(url: str) -> None:
    """A URL SQLAlchemy parses, for Postgres, with a usable port."""
    # Imported here: the settings load in processes that never touch Postgres (the
    # enqueue client), and SQLAlchemy is slow to import.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)  # its errors may quote the URL
    except (ArgumentError, ValueError):
        raise ConfigurationError(DATABASE_RULE) from None
    if parsed.get_backend_name() != "postgresql":
        raise ConfigurationError(DATABASE_RULE)
    check_port(parsed.port)
