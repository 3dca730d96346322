"""The `memwell` command as an operator meets it: `--help` loads no heavy module, a
failure is one line on standard error (`--debug` shows the traceback), and `status`
names the URLs a foreign producer needs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memwell.core.errors import NotFound
from memwell.core.settings import get_settings
from memwell.local.cli import main
from memwell.maintenance.status import StackStatus, masked_url, render

HEAVY = {"torch", "onnxruntime", "transformers", "sqlalchemy", "celery", "kombu", "fastapi"}
HEAVY |= {"uvicorn", "redis", "psycopg", "numpy", "httpx", "pydantic", "structlog"}


def test_help_loads_no_heavy_module(repo_root: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memwell", "--help"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "status" in done.stdout and "--debug" in done.stdout
    # importtime lines: "import time: <self> | <cumulative> | <indent><module>"
    loaded = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "click" in loaded and "memwell" in loaded
    assert loaded & HEAVY == set()


@pytest.fixture
def unreachable() -> Iterator[None]:
    """Postgres and Redis URLs on a port where nothing listens."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DATABASE_URL", "postgresql+psycopg://memwell@127.0.0.1:1/memwell")
        env.setenv("REDIS_URL", "redis://:s3cret@127.0.0.1:1/0")
        get_settings.cache_clear()
        yield
    get_settings.cache_clear()


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    return lines[0]


def test_domain_error_is_one_line(stack_env: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["keys", "revoke", "no-such-prefix"])
    assert result.exit_code == 1
    assert _one_error_line(result.stderr) == "Error: no single live key matches 'no-such-prefix'"


def test_debug_lets_the_traceback_through(stack_env: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["--debug", "keys", "revoke", "no-such-prefix"])
    assert result.exit_code == 1
    assert isinstance(result.exception, NotFound)


@pytest.mark.usefixtures("unreachable")
def test_unreachable_database_is_one_line() -> None:
    result = CliRunner().invoke(main, ["keys", "list"])
    assert result.exit_code == 1
    line = _one_error_line(result.stderr)
    assert line.startswith("Error: cannot reach the database: ") and "port 1" in line, line


@pytest.mark.usefixtures("unreachable")
def test_status_shows_what_is_down_and_fails() -> None:
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "UNAVAILABLE redis: ConnectionError: " in result.stdout
    assert "UNAVAILABLE postgres: OperationalError: " in result.stdout
    assert "Broker          redis://:***@127.0.0.1:1/0" in result.stdout
    assert "s3cret" not in result.stdout


def test_status_names_the_producer_urls_with_the_password_masked() -> None:
    assert masked_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert masked_url("rediss://user:pw@h/1?ssl=1") == "rediss://user:***@h/1?ssl=1"
    assert masked_url("redis://h:6379/0") == "redis://h:6379/0"
    report = StackStatus.for_stack(broker_url="redis://:pw@h:6379/0", api_url="http://h:8420")
    text = render(report)
    assert text.splitlines()[:3] == [
        "Broker          redis://:***@h:6379/0",
        "  producers send memwell.ingest_turns to queue ingest",
        "API             http://h:8420",
    ]
    assert report.as_dict()["broker_url"] == "redis://:***@h:6379/0"
