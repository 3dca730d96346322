"""Run child processes under supervision: restart the ones that crash, and on
Ctrl-C / SIGTERM stop every one of them, whole process groups included, so that no
orphan (a Celery pool child, a uvicorn worker) outlives `memwell up`."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger(__name__)

STOP_GRACE_S = 15.0
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


@dataclass
class Child:
    name: str
    argv: Sequence[str]
    #: a one-shot child (the demo) is not restarted when it exits
    restart: bool = True
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    exit_code: int | None = field(default=None)


class Supervisor:
    def __init__(
        self,
        children: Sequence[Child],
        *,
        env: Mapping[str, str],
        exit_after_oneshots: bool = False,
    ) -> None:
        self.children = list(children)
        self.env = dict(env)
        self.exit_after_oneshots = exit_after_oneshots
        self._stopping = False

    def _start(self, child: Child) -> None:
        # A new session makes the child a process-group leader: on stop we signal the
        # whole group, which reaches the grandchildren too.
        child.process = subprocess.Popen(list(child.argv), env=self.env, start_new_session=True)
        log.info("started %s (pid %d)", child.name, child.process.pid)

    def _request_stop(self, signum: int, _frame: FrameType | None) -> None:
        if not self._stopping:
            log.info("received %s, stopping", signal.Signals(signum).name)
        self._stopping = True

    def run(self) -> int:
        """Supervise until SIGINT/SIGTERM (or, with exit_after_oneshots, until every
        one-shot child has finished); returns the worst one-shot exit code."""
        previous = {
            s: signal.signal(s, self._request_stop) for s in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for child in self.children:
                self._start(child)
            while not self._stopping:
                self._poll()
                oneshots = [c for c in self.children if not c.restart]
                if (
                    self.exit_after_oneshots
                    and oneshots
                    and all(c.process is None for c in oneshots)
                ):
                    break
                time.sleep(0.2)
        finally:
            self.stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return max((c.exit_code or 0 for c in self.children if not c.restart), default=0)

    def _poll(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.process is None:
                if child.restart and now >= child.next_start:
                    self._start(child)
                continue
            code = child.process.poll()
            if code is None:
                continue
            child.process = None
            child.exit_code = code
            if not child.restart:
                log.info("%s finished with exit code %d", child.name, code)
                continue
            delay = RESTART_BACKOFF_S[min(child.restarts, len(RESTART_BACKOFF_S) - 1)]
            child.restarts += 1
            child.next_start = now + delay
            log.warning("%s exited with %d; restarting in %.0f s", child.name, code, delay)

    def stop_all(self) -> None:
        """SIGTERM each child (the group leader only: Celery and uvicorn then shut down
        warmly, finishing running tasks and stopping their own pool), wait, then SIGKILL
        the whole group so nothing outlives us."""
        running = [c for c in self.children if c.process is not None]
        for child in running:
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in running:
            assert child.process is not None
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0f s; killing it", child.name, STOP_GRACE_S)
            # The leader may be gone while its group lives on (a pool child): kill the group.
            _signal_group(child, signal.SIGKILL)
            child.process.wait()
            child.process = None


def _signal_group(child: Child, sig: signal.Signals) -> None:
    assert child.process is not None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, sig)
