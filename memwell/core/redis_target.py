"""Which Redis a URL names: one server, or the primary that Sentinel elects.

REDIS_URL takes either form, so every process (API, workers, beat, the enqueue client,
the CLI) reaches Redis through one string and follows a failover the same way:

    redis://[:password@]host:port/db
    sentinel://[:password@]host:port[,host:port...]/db?master_name=NAME[&sentinel_password=PW]

A `sentinel://` URL lists the sentinels, not Redis: every new connection asks them
which server is the primary now (redis-py's SentinelConnectionPool), and a
connection to a server that was demoted fails (READONLY, or the socket closes) and is
replaced by one to the new primary. So no process needs a restart after a failover.
The password is the data servers' (`requirepass`); `sentinel_password` is the
sentinels' own, when they have one (else the sentinels are asked without one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from memwell.core.errors import ConfigurationError
from memwell.core.url_rules import PORT_RULE, check_port, port_of

SENTINEL_SCHEME = "sentinel"
DEFAULT_SENTINEL_PORT = 26379
REDIS_SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)
DB_RULE = "the database must be a number from 0 (the path, or ?db=)"


@dataclass(frozen=True)
class SentinelTarget:
    """A Redis deployment behind Sentinel, parsed from a `sentinel://` URL."""

    sentinels: tuple[tuple[str, int], ...]
    master_name: str
    db: int = 0
    password: str | None = None
    sentinel_password: str | None = None

    def sentinel_kwargs(self) -> dict[str, Any]:
        """Connection options for the sentinels themselves."""
        return {"password": self.sentinel_password} if self.sentinel_password else {}

    def kombu_url(self) -> str:
        """Kombu's sentinel transport spelling: one `sentinel://` URL per sentinel,
        joined by `;`, each carrying the data servers' password and the db."""
        auth = f":{self.password}@" if self.password else ""
        return ";".join(f"sentinel://{auth}{h}:{p}/{self.db}" for h, p in self.sentinels)

    def kombu_options(self) -> dict[str, Any]:
        """The transport options Kombu's sentinel channel needs beside the URL."""
        options: dict[str, Any] = {"master_name": self.master_name}
        if self.sentinel_password:
            options["sentinel_kwargs"] = self.sentinel_kwargs()
        return options


def is_sentinel(url: str) -> bool:
    return url.startswith(f"{SENTINEL_SCHEME}://")


def parse_sentinel(url: str) -> SentinelTarget:
    """The deployment a `sentinel://` URL names; a clear error for a malformed one."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ConfigurationError(f"not a sentinel:// URL: {parts.scheme}://...")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    master_name = query.get("master_name", "").strip()
    if not master_name:
        raise ConfigurationError("a sentinel:// URL needs ?master_name=<the monitored name>")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    password = unquote(userinfo.partition(":")[2]) if userinfo else None
    sentinels = tuple(_host_port(item) for item in hostlist.split(",") if item.strip())
    if not sentinels:
        raise ConfigurationError("a sentinel:// URL needs at least one host:port")
    return SentinelTarget(
        sentinels=sentinels,
        master_name=master_name,
        db=_database(parts.path.strip("/") or "0"),
        password=password or None,
        sentinel_password=query.get("sentinel_password") or None,
    )


def _host_port(item: str) -> tuple[str, int]:
    host, _, port = item.strip().rpartition(":")
    if not host:
        return item.strip(), DEFAULT_SENTINEL_PORT
    if not port.isdigit():
        raise ConfigurationError(f"sentinel:// URL: {PORT_RULE}")
    check_port(int(port))
    return host.strip("[]"), int(port)


def _database(text: str) -> int:
    # redis-py takes "-1" and then retries SELECT forever.
    if not text.isdigit():
        raise ConfigurationError(DB_RULE)
    return int(text)


def check_redis_url(url: str) -> None:
    """A REDIS_URL every client can use: a known scheme, a usable port, a database
    number from 0; for sentinel://, what `parse_sentinel` needs too."""
    parts = urlsplit(url)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigurationError("must be a redis://, rediss://, unix:// or sentinel:// URL")
    if parts.scheme == SENTINEL_SCHEME:
        parse_sentinel(url)
        return
    port_of(parts)
    if parts.scheme != "unix":  # a unix socket's path is the socket's
        _database(parts.path.strip("/") or "0")
    for value in parse_qs(parts.query).get("db", []):
        _database(value)


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """(broker URL, extra transport options) for Celery, for either form of URL."""
    if not is_sentinel(url):
        return url, {}
    target = parse_sentinel(url)
    return target.kombu_url(), target.kombu_options()
