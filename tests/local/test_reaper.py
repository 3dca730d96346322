"""A test process killed with SIGKILL takes its services with it: embedded Postgres,
Valkey and a Celery worker, started by the harness's own helpers in a child process
that is then killed, end within 30 s (memwell/local/reaper.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from memwell.local.reaper import alive
from memwell.local.waiting import wait_for

# Starts the services as conftest.py does, prints every pid it owns, then waits to die.
HARNESS = """
import json, os, sys, tempfile
import psutil
from memwell.local import session_services
from memwell.local.worker_process import WorkerProcess

with session_services.postgres() as pg, session_services.redis_url() as redis_url:
    env = dict(os.environ, DATABASE_URL=pg.url, REDIS_URL=redis_url,
               MEMWELL_DATA_DIR=tempfile.mkdtemp(), HF_HUB_OFFLINE="1")
    worker = WorkerProcess(env, concurrency=2, name="orphan")
    worker.start()
    postmaster = psutil.Process(pg.pid)
    owned = [postmaster, *postmaster.children(), *psutil.Process().children(recursive=True)]
    print(json.dumps([p.pid for p in owned]), flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def harness(repo_root: Path) -> Iterator[subprocess.Popen[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_DATABASE_URL", "TEST_REDIS_URL")}
    process = subprocess.Popen(
        [sys.executable, "-c", HARNESS],
        cwd=repo_root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_services_die_with_a_killed_test_process(harness: subprocess.Popen[str]) -> None:
    assert harness.stdout is not None
    line = harness.stdout.readline()  # returns at once if the harness fails to start
    assert line, f"the harness exited with {harness.wait()} before starting its services"
    owned = [psutil.Process(pid) for pid in json.loads(line)]
    commands = " ".join(" ".join(p.cmdline()) for p in owned)
    assert all(name in commands for name in ("postgres", "valkey", "celery")), commands

    os.kill(harness.pid, signal.SIGKILL)
    harness.wait()
    try:
        wait_for(
            lambda: not any(map(alive, owned)),
            timeout=30,
            interval=0.2,
            what="the killed harness's services to stop",
        )
    finally:
        for process in filter(alive, owned):  # never leak them into the rest of the run
            process.kill()
