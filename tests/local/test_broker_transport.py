"""The worker's Redis transport keeps a channel usable after Kombu closed its
connection: a late acknowledgement and a late restore of unacknowledged messages
reach Redis. Kombu's own transport fails both with the AttributeError that used to
stop the worker's main process ("Unrecoverable error") after a broker outage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection, Exchange, Message, Queue

from memwell.local.embedded import EmbeddedRedis
from worker.broker_transport import TRANSPORT_PATH, transport_for

QUEUE = Queue("outage-test", Exchange("outage-test"), "outage-test")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    valkey = EmbeddedRedis(data_dir=tmp_path / "valkey", appendonly=True)
    valkey.start()
    yield valkey
    valkey.stop()


@pytest.fixture
def valkey(server: EmbeddedRedis) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def _consume_then_lose_connection(url: str, transport: str | None) -> tuple[Connection, Message]:
    """Deliver one message unacknowledged, then close the connection under its channel
    the way Celery's consumer does on a broker error."""
    conn = Connection(url, transport=transport)
    with conn.Producer() as producer:
        for i in range(3):
            producer.publish({"i": i}, exchange=QUEUE.exchange, routing_key="outage-test",
                             declare=[QUEUE])  # fmt: skip
    got: list[Message] = []
    channel = conn.default_channel
    channel.basic_qos(0, 1, False)
    consumer = conn.Consumer([QUEUE], callbacks=[lambda _b, m: got.append(m)], accept=["json"])
    consumer.consume()
    conn.drain_events(timeout=5)
    assert len(got) == 1
    conn._do_close_transport()  # what Connection.collect() and close() end with
    channel._disconnect_pools()  # the channel's pool went with the broken socket
    return conn, got[0]


def _unacked(url: str) -> int:
    return _count(url, "hlen", "unacked")


def _count(url: str, command: str, key: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(getattr(client, command)(key))
    finally:
        client.close()


def test_kombu_transport_fails_after_its_connection_closed(valkey: str) -> None:
    _, message = _consume_then_lose_connection(valkey, None)
    with pytest.raises(AttributeError, match="hostname"):
        message.ack()
    assert message.channel is not None
    # Its restore at garbage collection would fail the same way, noisily.
    message.channel.qos.restore_at_shutdown = False


def test_late_ack_on_a_closed_connection_reaches_redis(valkey: str) -> None:
    _, message = _consume_then_lose_connection(valkey, TRANSPORT_PATH)
    assert _unacked(valkey) == 1
    message.ack()
    assert _unacked(valkey) == 0


def test_late_restore_on_a_closed_connection_requeues(valkey: str) -> None:
    _, message = _consume_then_lose_connection(valkey, TRANSPORT_PATH)
    assert message.channel is not None
    message.channel.qos.restore_unacked()
    assert _unacked(valkey) == 0
    assert _count(valkey, "llen", "outage-test") == 3  # the delivered one is back


def test_messages_a_closed_channel_could_not_restore_come_back_on_reconnect(
    server: EmbeddedRedis, valkey: str
) -> None:
    conn = Connection(valkey, transport=TRANSPORT_PATH)
    with conn.Producer() as producer:
        producer.publish({"i": 0}, exchange=QUEUE.exchange, routing_key="outage-test",
                         declare=[QUEUE])  # fmt: skip
    got: list[Message] = []
    conn.default_channel.basic_qos(0, 1, False)
    conn.Consumer([QUEUE], callbacks=[lambda _b, m: got.append(m)], accept=["json"]).consume()
    conn.drain_events(timeout=5)
    assert len(got) == 1
    server.stop()  # the outage: closing the connection cannot restore the message
    conn.collect(socket_timeout=0.5)
    server.start()
    assert _unacked(valkey) == 1 and _count(valkey, "llen", "outage-test") == 0

    with Connection(valkey, transport=TRANSPORT_PATH) as again:
        assert again.default_channel is not None  # connecting restores what was held

    assert _unacked(valkey) == 0
    assert _count(valkey, "llen", "outage-test") == 1


def test_transport_applies_to_redis_urls_only() -> None:
    assert transport_for("redis://127.0.0.1:6379/0") == TRANSPORT_PATH
    assert transport_for("rediss://cache:6380/0") == TRANSPORT_PATH
    assert transport_for("amqp://guest@localhost//") is None
