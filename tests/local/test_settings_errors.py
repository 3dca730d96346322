"""Settings that cannot work stop every entry point with one line on standard error:
the setting and the rule, no traceback, no value. Run as an operator runs them, as
subprocesses, with secrets in the environment that must never be shown: the `memwell`
commands (api, worker, beat, up, mcp, migrate, status, keys), Celery's own command on
the worker app, and uvicorn on the API's app factory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CANARIES = {
    "OPENAI_API_KEY": "sk-secret-canary",
    "MEMWELL_METRICS_TOKEN": "metrics-canary-0123456789",
    "MEMWELL_API_KEY": "mw_key-canary",
}
BAD_DATABASE = "postgresql+psycopg://memwell:db-canary@db.internal:port/memwell"
BAD = {
    "sentinel": (
        {"REDIS_URL": "sentinel://:redis-canary@s1:26379/0"}, "REDIS_URL", "master_name",
    ),
    "redis db -1": (
        {"REDIS_URL": "redis://:redis-canary@127.0.0.1:6379/-1"}, "REDIS_URL", "database",
    ),
    "unparseable database": ({"DATABASE_URL": BAD_DATABASE}, "DATABASE_URL", "SQLAlchemy"),
    "replica port": (
        {"MEMWELL_DATABASE_READ_URL": "postgresql+psycopg://u:replica-canary@r:99999/m"},
        "MEMWELL_DATABASE_READ_URL", "port",
    ),
    "short token": ({"MEMWELL_METRICS_TOKEN": "canary"}, "MEMWELL_METRICS_TOKEN", "16"),
}  # fmt: skip
MEMWELL = Path(sys.executable).with_name("memwell")


def _env(bad: dict[str, str]) -> dict[str, str]:
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMWELL_", "OPENAI_")) and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**kept, **CANARIES, **bad, "MEMWELL_LOG_LEVEL": "INFO"}


def _assert_one_line(argv: list[str], case: str, tmp_path: Path) -> str:
    bad, setting, rule = BAD[case]
    done = subprocess.run(
        argv, env=_env(bad), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"Error: invalid settings: {setting}: ") and rule in line, line
    secrets = [*CANARIES.values(), *bad.values(), "canary", "input_value"]
    assert not [s for s in secrets if s in line], line
    return line


@pytest.mark.parametrize(
    ("command", "case"),
    [
        (["status"], "sentinel"),
        (["worker", "--queues", "ingest"], "unparseable database"),
        (["worker"], "redis db -1"),
        (["beat"], "redis db -1"),
        (["api"], "replica port"),
        (["up"], "sentinel"),
        (["mcp"], "unparseable database"),
        (["migrate"], "short token"),
        (["keys", "list"], "sentinel"),
    ],
)
def test_memwell_commands_say_one_line(command: list[str], case: str, tmp_path: Path) -> None:
    _assert_one_line([str(MEMWELL), *command], case, tmp_path)


def test_celery_worker_on_the_app_exits_with_one_line(repo_root: Path, tmp_path: Path) -> None:
    # Celery's own command, as a deployment without the `memwell` wrapper runs it; the
    # app module is found through PYTHONPATH, as from the repository root.
    argv = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "ingest"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", str(repo_root))
        _assert_one_line(argv, "unparseable database", tmp_path)


def test_uvicorn_on_the_app_factory_exits_with_one_line(repo_root: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", str(repo_root))
        _assert_one_line(argv, "sentinel", tmp_path)
