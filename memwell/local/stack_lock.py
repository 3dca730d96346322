"""One `memwell up` per data dir, and no orphans of a dead one.

- The lock: `memwell up` holds an exclusive `flock` on MEMWELL_DATA_DIR/up.lock for
  its whole life. The kernel drops it when the process dies, however it dies, so a
  second `up` on the same data dir is refused while the first lives, and allowed the
  moment it is gone (a second Valkey over the same AOF directory would corrupt it).
- The pid record, MEMWELL_DATA_DIR/up.pids.json: every process the stack started,
  with its start time and command line. A stack killed with SIGKILL leaves the file
  behind; the next `up` stops each recorded process that is still running, after
  checking that the pid still names the same process (start time and command line),
  so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import psutil

from memwell.core.errors import ConfigurationError
from memwell.local.reaper import alive
from memwell.local.waiting import wait_for

log = logging.getLogger(__name__)

LOCK_FILE = "up.lock"
PIDS_FILE = "up.pids.json"
#: The order a stack stops in: nothing that needs a service outlives the service.
STOP_ORDER = ("demo", "api", "beat", "worker", "valkey", "postgres")
STOP_GRACE_S = 15.0


@dataclass(frozen=True)
class Recorded:
    role: str
    pid: int
    create_time: float
    cmdline: list[str]
    #: signal the whole process group (a Celery pool, uvicorn's workers)
    group: bool


class StackLock:
    """The data dir's `up.lock`, held while this process runs the stack."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or fail with one line naming the running stack."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            handle.close()
            raise ConfigurationError(
                f"another `memwell up` (pid {owner}) is running on {self.path.parent}; "
                "stop it first, or set MEMWELL_DATA_DIR to another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class PidRecord:
    """The data dir's `up.pids.json`: what this stack started, by role."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / PIDS_FILE

    def read(self) -> list[Recorded]:
        try:
            raw = json.loads(self.path.read_text())
            return [Recorded(**entry) for entry in raw]
        except (OSError, ValueError, TypeError):
            return []

    def _write(self, entries: list[Recorded]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(e) for e in entries], indent=2))
        os.replace(tmp, self.path)

    def add(self, role: str, pid: int, *, group: bool = False) -> None:
        """Record `pid` under `role`, replacing that role's previous process."""
        try:
            process = psutil.Process(pid)
            entry = Recorded(role, pid, process.create_time(), process.cmdline(), group)
        except psutil.Error:
            return  # already gone: nothing to clean up later
        self._write([e for e in self.read() if e.role != role] + [entry])

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _same(entry: Recorded) -> psutil.Process | None:
    """The recorded process, if that pid still names it."""
    try:
        process = psutil.Process(entry.pid)
        if abs(process.create_time() - entry.create_time) > 0.01:
            return None
        if process.cmdline() != entry.cmdline or not alive(process):
            return None
        return process
    except psutil.Error:
        return None


def _group_members(entry: Recorded) -> list[psutil.Process]:
    """Processes left in the entry's group, its leader gone or not (a Celery pool
    child outlives its main process), started no earlier than the leader."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == entry.pid and process.create_time() >= entry.create_time:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def _stop(entry: Recorded) -> list[psutil.Process]:
    """Signal what is left of one recorded process; returns what was signalled."""
    leader = _same(entry)
    targets = ([leader] if leader else []) + (_group_members(entry) if entry.group else [])
    # SIGINT is Postgres' fast shutdown; everything else stops warmly on SIGTERM.
    signum = signal.SIGINT if entry.role == "postgres" else signal.SIGTERM
    for process in {p.pid: p for p in targets}.values():
        with contextlib.suppress(psutil.Error):
            process.send_signal(signum)
    return targets


def _wait_or_kill(targets: list[psutil.Process]) -> None:
    try:
        wait_for(lambda: not any(map(alive, targets)), timeout=STOP_GRACE_S, interval=0.1)
    except TimeoutError:
        for process in filter(alive, targets):
            with contextlib.suppress(psutil.Error):
                process.kill()


def clean_orphans(record: PidRecord) -> list[str]:
    """Stop the survivors of a stack that died without stopping them, in stop order.
    Only called with the lock held: their owner is certainly gone."""
    entries = sorted(
        record.read(),
        key=lambda e: STOP_ORDER.index(e.role) if e.role in STOP_ORDER else 0,
    )
    stopped = []
    for entry in entries:
        targets = _stop(entry)
        if not targets:
            continue
        _wait_or_kill(targets)
        stopped.append(f"{entry.role} (pid {entry.pid})")
    if stopped:
        log.warning("stopped what a previous `memwell up` left running: %s", ", ".join(stopped))
    record.clear()
    return stopped
