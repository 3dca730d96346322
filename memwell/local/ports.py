"""The ports of one data dir's embedded stack: chosen once, recorded, reused.

A client configured against `memwell up` (a foreign producer's REDIS_URL, a
Prometheus scrape, a bookmarked API URL) keeps working across restarts only if the
ports do not move; two stacks on one machine (two data dirs) must not collide. So
each port is, in order: the one set in the environment; the one this data dir used
last time, if it is free; the usual default, if free; the next free one after it.
The choice is written to MEMWELL_DATA_DIR/ports.json.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings

PORTS_FILE = "ports.json"
DEFAULTS = {"redis": 16379, "api": 8420, "worker_metrics": 9808, "llm": 8430}
_SEARCH = 200  # ports tried after a default that is taken


@dataclass(frozen=True)
class StackPorts:
    redis: int
    api: int
    #: 0: the worker serves no metrics
    worker_metrics: int
    #: the local model server's; 0: none (no MEMWELL_LOCAL_LLM_GGUF)
    llm: int = 0


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _recorded(path: Path) -> dict[str, int]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, int) and 0 < v < 65536}


def _explicit(settings: Settings) -> dict[str, int | None]:
    chosen = settings.model_fields_set
    return {
        "redis": settings.redis_port,
        "api": settings.api_port if "api_port" in chosen else None,
        "worker_metrics": settings.worker_metrics_port if "worker_metrics_port" in chosen else None,
        "llm": settings.local_llm_port,
    }


def _choose(name: str, explicit: int | None, recorded: int | None, host: str) -> int:
    if explicit is not None:
        if explicit and not is_free(explicit, host):
            raise ConfigurationError(
                f"port {explicit} for {name.replace('_', ' ')} is in use on {host}; "
                "free it or choose another"
            )
        return explicit
    if recorded is not None and is_free(recorded, host):
        return recorded
    start = DEFAULTS[name]
    for port in range(start, start + _SEARCH):
        if is_free(port, host):
            return port
    raise ConfigurationError(f"no free port for {name} in {start}..{start + _SEARCH - 1}")


def stack_ports(settings: Settings) -> StackPorts:
    """This data dir's ports (see the module doc), recorded for next time."""
    path = settings.data_dir / PORTS_FILE
    recorded = _recorded(path)
    explicit = _explicit(settings)
    hosts = {
        "redis": "127.0.0.1",
        "api": settings.api_host,
        "worker_metrics": settings.worker_metrics_host,
    }
    if settings.local_llm_gguf is not None:
        hosts["llm"] = "127.0.0.1"
    ports = StackPorts(
        **{name: _choose(name, explicit[name], recorded.get(name), hosts[name]) for name in hosts}
    )
    # A port not used this time stays recorded for the next run that needs it.
    record = asdict(ports)
    if not ports.llm:
        del record["llm"]
        if "llm" in recorded:
            record["llm"] = recorded["llm"]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, path)
    return ports
