"""`memwell up` as an operator runs it: a real process with its embedded Postgres and
Valkey in a fresh data dir, its API, beat and worker.

- "ready" comes only once the API answers and a worker consumes;
- a second `up` on the same data dir refuses with one line;
- Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it) stops API,
  beat, worker, Valkey and Postgres in that order, and the worker sees no broker
  error on its way out;
- a restart keeps its ports; `kill -9` of `up` leaves nothing running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memwell.local.reaper import alive
from memwell.local.waiting import wait_for
from tests.support.up_process import FOREIGN, READY, Up

# `memwell up` takes the usual ports when free: one such module runs at a time.
pytestmark = pytest.mark.usefixtures("one_stack_at_a_time")

STOP_LINES = ("stopped api", "stopped beat", "stopped worker", "stopped valkey", "stopped postgres")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("up-stack") / "data"


@pytest.fixture(scope="module")
def first_up(data_dir: Path, repo_root: Path) -> Iterator[Up]:
    up = Up(data_dir, repo_root, "first")
    yield up
    up.kill()


def test_ready_means_the_api_answers_and_a_worker_consumes(first_up: Up) -> None:
    url = first_up.wait_ready()
    body = httpx.get(f"{url}/readyz", timeout=5).json()
    assert body["status"] == "ready"
    assert body["workers"] >= 1
    text = first_up.text()
    # The worker's consumer had connected to the broker before "ready" was printed.
    assert text.index("Connected to") < READY.search(text).start()  # type: ignore[union-attr]


def test_a_second_up_on_the_same_data_dir_refuses(first_up: Up, repo_root: Path) -> None:
    first_up.wait_ready()
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env["MEMWELL_DATA_DIR"] = str(first_up.data_dir)
    second = subprocess.run(
        [sys.executable, "-m", "memwell", "up"],
        env=env,
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode != 0
    errors = [line for line in second.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: another `memwell up` (pid {first_up.process.pid}) is running on "
        f"{first_up.data_dir}; stop it first, or set MEMWELL_DATA_DIR to another directory"
    ]
    assert "Traceback" not in second.stderr
    assert first_up.process.poll() is None  # the first one is untouched


def test_ctrl_c_stops_api_beat_worker_valkey_postgres_in_order(first_up: Up) -> None:
    first_up.wait_ready()
    owned = first_up.owned()
    assert len(owned) >= 6
    os.killpg(first_up.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    assert first_up.process.wait(timeout=120) == 0
    text = first_up.text()
    positions = [text.index(line) for line in STOP_LINES]
    assert positions == sorted(positions), text[-3000:]
    shutdown = text[text.index("received SIGINT") :]
    assert "Cannot connect to" not in shutdown
    assert "Connection to broker lost" not in shutdown
    try:
        wait_for(lambda: not any(map(alive, owned)), timeout=30, what="every process to end")
    except TimeoutError:
        left = [(p.pid, p.cmdline()[:1]) for p in owned if alive(p)]
        raise AssertionError(f"still running: {left}\n{text[-3000:]}") from None
    assert not (first_up.data_dir / "up.pids.json").exists()


def test_a_restart_keeps_its_ports_and_kill_9_leaves_nothing(
    first_up: Up, data_dir: Path, repo_root: Path
) -> None:
    first_up.process.wait(timeout=120)
    ports_before = json.loads((data_dir / "ports.json").read_text())
    up = Up(data_dir, repo_root, "second")
    try:
        url = up.wait_ready()
        assert json.loads((data_dir / "ports.json").read_text()) == ports_before
        assert url.endswith(f":{ports_before['api']}")
        owned = up.owned()
        roles = {str(e["role"]) for e in up.recorded()}
        assert {"up", "postgres", "valkey", "api", "beat", "worker"} <= roles
        os.kill(up.process.pid, signal.SIGKILL)
        up.process.wait()
        wait_for(
            lambda: not any(map(alive, owned)),
            timeout=60,
            interval=0.2,
            what="the killed stack's processes to end",
        )
    finally:
        up.kill()
