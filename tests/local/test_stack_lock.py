"""One `memwell up` per data dir, and the orphans of a dead one: real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from memwell.core.errors import ConfigurationError
from memwell.local.reaper import alive
from memwell.local.stack_lock import PidRecord, StackLock, clean_orphans

# A "worker": a group leader with a child of its own, like Celery and its pool.
LEADER = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        for child in psutil.Process(process.pid).children() if alive_pid(process.pid) else []:
            child.kill()
        process.kill()
        process.wait()


def alive_pid(pid: int) -> bool:
    try:
        return alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _spawn(started: list[subprocess.Popen[bytes]], code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    started.append(process)
    return process


def test_the_lock_refuses_a_second_holder_until_released(tmp_path: Path) -> None:
    first, second = StackLock(tmp_path), StackLock(tmp_path)
    first.acquire()
    with pytest.raises(ConfigurationError, match=r"another `memwell up` \(pid \d+\) is running"):
        second.acquire()
    first.release()
    second.acquire()  # the lock is free again
    second.release()


def test_orphans_of_a_dead_stack_are_stopped_group_and_all(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    leader = _spawn(spawned, LEADER)
    record = PidRecord(tmp_path)
    record.add("worker", leader.pid, group=True)
    pool = psutil.Process(leader.pid)
    from memwell.local.waiting import wait_for

    children = wait_for(lambda: pool.children(), timeout=20, what="the pool child")

    assert clean_orphans(record) == [f"worker (pid {leader.pid})"]

    leader.wait(timeout=20)
    wait_for(lambda: not any(map(alive, children)), timeout=20, what="the pool child to end")
    assert not record.path.exists()


def test_a_recycled_pid_is_never_signalled(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    stranger = _spawn(spawned, "import time; time.sleep(600)")
    record = PidRecord(tmp_path)
    record.add("api", stranger.pid)
    # The recorded process started at another time: this pid now names someone else.
    entry = record.read()[0]
    record.path.write_text(
        record.path.read_text().replace(str(entry.create_time), str(entry.create_time - 100))
    )

    assert clean_orphans(record) == []
    assert stranger.poll() is None
