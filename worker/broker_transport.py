"""Kombu's Redis transport, made safe to use after its connection was closed.

When the broker goes away, Celery closes the consumer's connection, and Kombu then
clears the transport's link to it (`transport.client = None`). A channel of that
connection can still be used afterwards: a task that was running during the outage
acknowledges its message on it, or a late close restores its unacknowledged
messages. Each of these builds a new Redis pool from `transport.client`, so it fails
with `AttributeError: 'NoneType' object has no attribute 'hostname'`. Celery does
not count an AttributeError as a connection error: the worker's main process stopped
with "Unrecoverable error" and the backlog waited for a human.

Here each channel remembers the connection details it was created with and builds
its pool from them when the transport has forgotten its own. The late
acknowledgement or restore then reaches Redis (or fails with a Redis connection
error, which Celery handles by reconnecting).

Second gap: a channel closed while Redis is down cannot put its delivered but
unacknowledged messages back in their queues (the prefetched ones that never ran
among them). Kombu gives up, and they wait in the `unacked` hash for the visibility
timeout, an hour by default. Here such a channel is remembered, and the next channel
that connects, once Redis answers again, restores them at once. A message whose
task was still running is then delivered twice, which idempotent tasks allow.

Third gap: an item on a queue's list that is not a message envelope (pushed there by a
raw producer) made Kombu's read of it raise, and the worker stopped. Here the channel's
Redis clients screen what BRPOP pops before Kombu reads it: such an item is kept as a
dead letter (worker/poison_items.py) and the pop reads as empty, so the worker goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str

from worker.poison_items import keep_item, problem_of

log = logging.getLogger(__name__)

#: Celery's `broker_transport` setting for Redis broker URLs, and for Sentinel ones.
TRANSPORT_PATH = "worker.broker_transport:Transport"
SENTINEL_TRANSPORT_PATH = "worker.broker_transport:SentinelTransport"


class _SafeChannel:
    """What both channels add to Kombu's: pools built after the transport closed, and
    the restore of messages a channel closed during an outage left behind."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Set before the parent's __init__, which may already connect (it pings).
        connection = args[0] if args else kwargs.get("connection")
        self._conninfo = getattr(connection, "client", None)
        self._default_port = getattr(connection, "default_port", None)
        super().__init__(*args, **kwargs)  # pings Redis: past it, Redis answers
        _restore_left_behind(cast(Channel, self))

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc]
        except Exception:
            qos = self.__dict__.get("_qos")
            if qos is not None and qos._delivered:
                with _left_behind_lock:
                    _left_behind.append(qos)
            raise

    def _create_client(self, asynchronous: bool = False) -> Any:
        client = super()._create_client(asynchronous=asynchronous)  # type: ignore[misc]
        _screen_pops(client, self)
        return client

    def _kept_as_poison(self, key: bytes | str, item: bytes | str) -> bool:
        """Whether the popped `item` is not a message, and was kept as a dead letter."""
        problem = problem_of(item, lambda envelope: cast(Any, self).Message(envelope, channel=self))
        if problem is None:
            return False
        # The list's key, less the global prefix and the priority suffix: the queue.
        name = bytes_to_str(key)
        prefix = cast(Any, self).global_keyprefix or ""
        name = name.removeprefix(prefix).rsplit(cast(Any, self).sep, 1)[0]
        keep_item(name, item, problem)
        return True

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        parent = super()._connparams  # type: ignore[misc]
        return dict(self._with_transport(lambda: parent(asynchronous=asynchronous)))

    def _with_transport(self, build: Any) -> Any:
        """`build()`, with a stand-in for the transport if it was closed under us."""
        transport = cast(Any, self).connection
        if transport is not None and transport.client is not None:
            return build()
        # The transport was closed under us: build the pool from what we remember.
        stand_in = _ClosedTransport(self._conninfo, self._default_port)
        cast(Any, self).connection = stand_in
        try:
            return build()
        finally:
            cast(Any, self).connection = transport


class Channel(_SafeChannel, kombu_redis.Channel):
    """Kombu's Redis channel, safe after its transport closed."""


class SentinelChannel(_SafeChannel, kombu_redis.SentinelChannel):
    """Kombu's Sentinel channel, safe after its transport closed. Each new connection
    asks the sentinels for the primary, so after a failover the reconnect that Celery
    makes anyway reaches the new primary."""

    def _sentinel_managed_pool(self, asynchronous: bool = False) -> Any:
        # Reads the sentinel list from the transport's client, like `_connparams`.
        parent = super()._sentinel_managed_pool  # type: ignore[misc]
        return self._with_transport(lambda: parent(asynchronous=asynchronous))


def _screen_pops(client: Any, channel: _SafeChannel) -> None:
    """Make `client`'s BRPOP reply read as empty when the popped item is poison.

    The reply's own parser is the one place that holds the popped bytes before Kombu
    parses them, on every version of Kombu's read loop; this channel's clients serve
    only Kombu, whose BRPOP is the consuming pop."""
    parse = client.response_callbacks.get("BRPOP")

    def screened(response: Any, **options: Any) -> Any:
        popped = parse(response, **options) if parse is not None else response
        if popped and channel._kept_as_poison(popped[0], popped[1]):
            return None  # Kombu reads an empty pop, as after its timeout
        return popped

    client.set_response_callback("BRPOP", screened)


_left_behind: list[Any] = []  # the QoS of channels that closed with Redis down
_left_behind_lock = threading.Lock()


def _restore_left_behind(channel: Channel) -> None:
    """Put the messages of channels closed during an outage back in their queues.
    Through the new channel: a closed one has dropped its exchange tables."""
    with _left_behind_lock:
        pending, _left_behind[:] = list(_left_behind), []
    for index, qos in enumerate(pending):
        try:
            tags = list(qos._delivered)
            for tag in tags:
                cast(Any, channel.qos).restore_by_tag(tag, client=channel.client)
            qos._delivered.clear()
            log.info("restored %d message(s) left unacknowledged by the outage", len(tags))
        except Exception:  # Redis went away again: the next channel tries again
            with _left_behind_lock:
                _left_behind.extend(pending[index:])
            return


class _ClosedTransport:
    """What `_connparams` reads from a transport: its Kombu connection and port."""

    def __init__(self, client: Any, default_port: int | None) -> None:
        self.client = client
        self.default_port = default_port


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel


def transport_for(broker_url: str) -> str | None:
    """The transport to configure for this broker URL (None: Kombu's own choice)."""
    scheme = broker_url.split("://", 1)[0]
    if scheme == "sentinel":
        return SENTINEL_TRANSPORT_PATH
    return TRANSPORT_PATH if scheme in ("redis", "rediss") else None
