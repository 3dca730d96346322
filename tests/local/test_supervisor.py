"""`memwell up`'s supervisor: restarts crashed children and leaves no orphans."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import psutil

from memwell.local.supervisor import Child, Readiness, Supervisor
from memwell.local.waiting import wait_for

# A child that starts a grandchild (like a Celery pool) and records both pids.
PARENT = """
import subprocess, sys, time, pathlib
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path(sys.argv[1]).write_text(f"{__import__('os').getpid()} {grandchild.pid}")
time.sleep(600)
"""


def test_stop_leaves_no_orphans(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    supervisor = Supervisor(
        [Child("parent", [sys.executable, "-c", PARENT, str(pid_file)])], env=os.environ
    )
    runner = threading.Thread(target=supervisor.run)
    # The supervisor installs signal handlers, which only the main thread may do;
    # drive its loop pieces directly instead.
    for child in supervisor.children:
        supervisor._start(child)
    pids = [
        int(p)
        for p in wait_for(lambda: pid_file.exists() and pid_file.read_text().split(), timeout=20)
    ]
    assert all(psutil.pid_exists(p) for p in pids)
    supervisor.stop_all()
    wait_for(lambda: not any(_alive(p) for p in pids), timeout=20, what="children to exit")
    assert not runner.is_alive()


def test_crashed_child_is_restarted(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    script = f"open({str(counter)!r}, 'a').write('x'); raise SystemExit(3)"
    supervisor = Supervisor([Child("crasher", [sys.executable, "-c", script])], env=os.environ)
    for child in supervisor.children:
        supervisor._start(child)

    def restarted() -> bool:
        supervisor._poll()
        return counter.exists() and len(counter.read_text()) >= 2

    wait_for(restarted, timeout=20, what="a restart")
    assert supervisor.children[0].restarts >= 1
    supervisor.stop_all()


def test_exit_after_oneshots_returns_their_exit_code() -> None:
    supervisor = Supervisor(
        [
            Child("server", [sys.executable, "-c", "import time; time.sleep(600)"]),
            Child("job", [sys.executable, "-c", "raise SystemExit(4)"], restart=False),
        ],
        env=os.environ,
        exit_after_oneshots=True,
    )
    assert supervisor.run() == 4
    assert all(c.process is None for c in supervisor.children)


# Notes its start, and on SIGTERM takes a moment to shut down, noting both ends.
SLOW_TO_STOP = """
import pathlib, signal, sys, time
log, name = pathlib.Path(sys.argv[1]), sys.argv[2]
def stop(*_):
    with log.open("a") as f: f.write(f"{name} stopping\\n")
    time.sleep(0.3)
    with log.open("a") as f: f.write(f"{name} stopped\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with log.open("a") as f: f.write(f"{name} up\\n")
while True: time.sleep(1)
"""


def test_children_stop_one_after_another_in_the_given_order(tmp_path: Path) -> None:
    log = tmp_path / "log"
    names = ["api", "beat", "worker"]
    supervisor = Supervisor(
        [Child(n, [sys.executable, "-c", SLOW_TO_STOP, str(log), n]) for n in names],
        env=os.environ,
    )
    for child in supervisor.children:
        supervisor._start(child)
    wait_for(lambda: log.exists() and log.read_text().count(" up") == 3, timeout=30)
    supervisor.stop_all()
    lines = [line for line in log.read_text().splitlines() if not line.endswith(" up")]
    assert lines == [f"{n} {what}" for n in names for what in ("stopping", "stopped")]


def test_after_ready_children_wait_for_readiness(tmp_path: Path) -> None:
    ready = {"now": False, "announced": 0}
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]

    def announce() -> None:
        ready["announced"] += 1

    supervisor = Supervisor(
        [Child("server", sleeper), Child("demo", sleeper, restart=False, after_ready=True)],
        env=os.environ,
        readiness=Readiness(probe=lambda: bool(ready["now"]), on_ready=announce),
    )
    server, demo = supervisor.children
    supervisor._start(server)
    try:
        supervisor._poll()
        supervisor._check_ready()
        assert demo.process is None and not supervisor.ready
        ready["now"] = True
        wait_for(lambda: (supervisor._check_ready(), supervisor.ready)[1], timeout=5)
        assert demo.process is not None
        supervisor._check_ready()
        assert ready["announced"] == 1
    finally:
        supervisor.stop_all()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


assert signal.SIGTERM  # the module relies on POSIX signals
