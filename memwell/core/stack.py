"""Where the running services are.

An explicit DATABASE_URL / REDIS_URL always wins. Otherwise the URLs come from the
stack file that `memwell up` writes while its embedded services run, so `memwell
demo`, `memwell worker` or a test started by hand find the same stack.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings


@dataclass(frozen=True)
class StackInfo:
    database_url: str
    redis_url: str
    api_url: str
    pid: int
    #: the local model server `memwell up` supervises (its /v1 root); None: none
    model_server_url: str | None = None


def stack_file(settings: Settings) -> Path:
    return settings.data_dir / "stack.json"


def write_stack(settings: Settings, info: StackInfo) -> None:
    path = stack_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(info), indent=2))
    os.replace(tmp, path)


def clear_stack(settings: Settings) -> None:
    stack_file(settings).unlink(missing_ok=True)


def read_stack(settings: Settings) -> StackInfo | None:
    """The stack file, if its owner process is still alive."""
    path = stack_file(settings)
    try:
        info = StackInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return info


def _resolve(settings: Settings, explicit: str | None, field: str) -> str | None:
    """The explicit setting, else the running stack's value, else None."""
    if explicit:
        return explicit
    info = read_stack(settings)
    return str(getattr(info, field)) if info else None


def _required(settings: Settings, explicit: str | None, field: str, env_name: str) -> str:
    if url := _resolve(settings, explicit, field):
        return url
    raise ConfigurationError(
        f"{env_name} is not set and no embedded stack is running. "
        f"Set {env_name}, or start the embedded stack with `memwell up`."
    )


def database_url(settings: Settings) -> str:
    return _required(settings, settings.database_url, "database_url", "DATABASE_URL")


def redis_url(settings: Settings) -> str:
    return _required(settings, settings.redis_url, "redis_url", "REDIS_URL")


def model_server_url(settings: Settings) -> str | None:
    """The running stack's local model server, None when it has none."""
    info = read_stack(settings)
    return info.model_server_url if info else None


def api_url(settings: Settings) -> str:
    return _resolve(settings, settings.api_url, "api_url") or settings.resolved_api_url
