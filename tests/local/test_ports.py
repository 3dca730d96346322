"""The embedded stack's ports: stable per data dir, configurable, never colliding."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings
from memwell.local.ports import DEFAULTS, StackPorts, is_free, stack_ports


def _settings(data_dir: Path, **env: str) -> Settings:
    return Settings(MEMWELL_DATA_DIR=data_dir, **env)  # type: ignore[arg-type]


@pytest.fixture
def taken() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_ports_are_recorded_and_reused(tmp_path: Path) -> None:
    first = stack_ports(_settings(tmp_path))
    recorded = json.loads((tmp_path / "ports.json").read_text())
    assert recorded == {
        "redis": first.redis,
        "api": first.api,
        "worker_metrics": first.worker_metrics,
    }
    for name, port in recorded.items():
        assert DEFAULTS[name] <= port < DEFAULTS[name] + 200
    assert stack_ports(_settings(tmp_path)) == first


def test_a_recorded_port_now_taken_moves_to_a_free_one(tmp_path: Path, taken: int) -> None:
    (tmp_path / "ports.json").write_text(json.dumps({"redis": taken, "api": 8420}))
    ports = stack_ports(_settings(tmp_path))
    assert ports.redis != taken and is_free(ports.redis)
    assert json.loads((tmp_path / "ports.json").read_text())["redis"] == ports.redis


def _free() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_environment_wins_and_is_recorded(tmp_path: Path) -> None:
    redis_port, api_port = _free(), _free()
    (tmp_path / "ports.json").write_text(json.dumps({"redis": 16390, "api": 8430}))
    ports = stack_ports(
        _settings(
            tmp_path,
            MEMWELL_REDIS_PORT=str(redis_port),
            MEMWELL_API_PORT=str(api_port),
            MEMWELL_WORKER_METRICS_PORT="0",
        )  # fmt: skip
    )
    assert ports == StackPorts(redis=redis_port, api=api_port, worker_metrics=0)
    again = stack_ports(_settings(tmp_path))  # kept for next time; 0 (off) is not a port
    assert (again.redis, again.api) == (redis_port, api_port)
    assert again.worker_metrics >= DEFAULTS["worker_metrics"]


def test_a_configured_port_in_use_is_a_one_line_error(tmp_path: Path, taken: int) -> None:
    with pytest.raises(ConfigurationError, match=f"port {taken} for api is in use"):
        stack_ports(_settings(tmp_path, MEMWELL_API_PORT=str(taken)))
