"""Stop the services a process started when it dies without stopping them.

A test run killed from outside (a CI timeout sends SIGKILL) runs no `finally`, so its
embedded Postgres, Valkey and Celery workers would run on. Two guards:

- `parent_death_signal()`, a `preexec_fn` asking Linux to signal a direct child when
  its parent dies (`prctl(PR_SET_PDEATHSIG)`): a Celery worker gets SIGTERM at once;
- the reaper, a small process (`python -m memwell.local.reaper`) reading commands
  from a pipe whose only writer is its parent. However the parent dies, the kernel
  closes that end; on end of file the reaper signals every process still registered,
  waits up to `GRACE_S`, then kills what is left. It covers what is not our direct
  child (the postmaster `pg_ctl` starts) or was started by a library (Valkey).

A service stopped the normal way is forgotten first, so the reaper acts only when the
parent died with it still running.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from memwell.local.waiting import wait_for

GRACE_S = 15.0  # Postgres' fast shutdown and a Celery warm shutdown take far less
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def parent_death_signal(signum: int = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` that has the child sent `signum` when this process dies (Linux; a
    no-op elsewhere). Linux ties the signal to the thread that forks, not the process:
    a child started from a short-lived thread (a chaos loop restarting a killed
    worker) would be stopped when that thread ends. So it is armed only from the main
    thread; elsewhere the reaper alone covers the child."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not (
        threading.main_thread()
    ):
        return lambda: None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded before the fork
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os.kill(os.getpid(), signum)

    return arm


class Reaper:
    """This process's reaper: `watch` a pid to have it stopped if we die first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "memwell.local.reaper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        atexit.register(self.close)

    def watch(self, pid: int, *, signum: int = signal.SIGTERM, group: bool = False) -> None:
        """Send `signum` to `pid` (to its process group when `group`) if we die."""
        self._send(f"watch {pid} {int(signum)} {int(group)}")

    def forget(self, pid: int) -> None:
        """`pid` was stopped the normal way: nothing to do for it any more."""
        self._send(f"forget {pid}")

    def close(self) -> None:
        """Exiting: the reaper stops whatever is still watched, then exits."""
        if os.getpid() != self._owner:  # a forked child inherited the hook
            return
        with self._lock:
            if self._process.stdin is not None and not self._process.stdin.closed:
                self._process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=GRACE_S + 5)

    def _send(self, line: str) -> None:
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(f"{line}\n".encode())
            self._process.stdin.flush()


_reaper: Reaper | None = None
_reaper_pid = 0
_reaper_lock = threading.Lock()


def reaper() -> Reaper:
    """The reaper of this process, started on first use (again in a forked child)."""
    global _reaper, _reaper_pid
    with _reaper_lock:
        if _reaper is None or _reaper_pid != os.getpid():
            _reaper, _reaper_pid = Reaper(), os.getpid()
        return _reaper


@dataclass(frozen=True)
class _Watched:
    process: psutil.Process  # holds the start time: a reused pid is not mistaken for it
    signum: int
    group: bool


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an orphan's new parent may never reap it)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _members(target: _Watched) -> list[psutil.Process]:
    """The watched process, and for a group everything in it (Celery's pool children)."""
    if not target.group:
        return [target.process]
    found = [target.process]
    for process in psutil.process_iter():
        try:
            if process.pid != target.process.pid and os.getpgid(process.pid) == target.process.pid:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def _signal(target: _Watched, signum: int) -> None:
    if not alive(target.process) and not target.group:
        return
    try:
        if target.group:
            os.killpg(target.process.pid, signum)
        else:
            target.process.send_signal(signum)
    except (ProcessLookupError, psutil.NoSuchProcess):
        pass


def stop_all(targets: Iterable[_Watched], *, grace_s: float = GRACE_S) -> None:
    """Signal every target, wait for them all to end, then kill the stragglers."""
    targets = list(targets)
    processes = [p for t in targets for p in _members(t)]
    for target in targets:
        _signal(target, target.signum)
    try:
        wait_for(lambda: not any(map(alive, processes)), timeout=grace_s, interval=0.1)
    except TimeoutError:
        for target in targets:
            _signal(target, signal.SIGKILL)
        for process in processes:
            if alive(process):
                process.kill()


def serve(lines: Iterable[bytes]) -> None:
    """Record watch/forget commands until end of file (the parent is gone), then stop
    what is still watched."""
    watched: dict[int, _Watched] = {}
    for line in lines:
        verb, *args = line.decode().split()
        if verb == "watch":
            pid, signum, group = (int(a) for a in args)
            try:
                watched[pid] = _Watched(psutil.Process(pid), signum, bool(group))
            except psutil.NoSuchProcess:
                continue
        elif verb == "forget":
            watched.pop(int(args[0]), None)
    if watched:
        stop_all(watched.values())


if __name__ == "__main__":
    # Ctrl-C reaches the whole foreground group: the parent handles it and forgets
    # what it stops; the reaper must outlive it to see the end of file.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer)
