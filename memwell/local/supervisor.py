"""Run child processes under supervision: restart the ones that crash, announce
readiness once the stack really serves, and on Ctrl-C / SIGTERM stop them one by
one in the order given (API first, workers last), whole process groups included,
so that no orphan (a Celery pool child, a uvicorn worker) outlives `memwell up`.

A child may be a service the others need (the local model server): it starts first,
and the others start only once its `start_probe` answers; a service that exits or
stays silent past its timeout stops `memwell up` with one line naming its log.

Each child leads a session of its own: the terminal's Ctrl-C reaches only this
process, which then stops the children in order. Each is also asked to receive
SIGTERM if this process dies without stopping it (Linux's parent-death signal), and
its group is watched by the reaper (memwell/local/reaper.py) for the same case.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from memwell.core.errors import ConfigurationError
from memwell.local.reaper import parent_death_signal, reaper

log = logging.getLogger(__name__)

STOP_GRACE_S = 15.0
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
STABLE_AFTER_S = 60.0  # a child up this long starts its backoff from the beginning again
READY_PROBE_EVERY_S = 0.5
START_PROBE_EVERY_S = 0.25


@dataclass
class Child:
    name: str
    argv: Sequence[str]
    #: a one-shot child (the demo) is not restarted when it exits
    restart: bool = True
    #: started only once the stack is ready (the demo needs a consuming worker)
    after_ready: bool = False
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    exit_code: int | None = field(default=None)
    #: where its standard output and error go (appended); None: this process's own
    log_path: Path | None = None
    #: a service the others need: started before them, which wait until this answers
    start_probe: Callable[[], bool] | None = None
    start_timeout_s: float = 60.0
    #: how the start error names it, e.g. "the local model server at http://..."
    label: str = ""
    #: added to the supervisor's environment for this child alone
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Readiness:
    """`probe` is polled until it answers True; then `on_ready` runs, once."""

    probe: Callable[[], bool]
    on_ready: Callable[[], None]


class Supervisor:
    def __init__(
        self,
        children: Sequence[Child],
        *,
        env: Mapping[str, str],
        exit_after_oneshots: bool = False,
        readiness: Readiness | None = None,
        on_start: Callable[[Child], None] | None = None,
    ) -> None:
        """`children` in stop order: each stops only after the one before it ended."""
        self.children = list(children)
        self.env = dict(env)
        self.exit_after_oneshots = exit_after_oneshots
        self.readiness = readiness
        self.ready = readiness is None
        self.on_start = on_start
        self._stopping = False
        self._next_probe = 0.0

    def _start(self, child: Child) -> None:
        # A new session makes the child a process-group leader: on stop we signal the
        # whole group, which reaches the grandchildren too.
        with contextlib.ExitStack() as files:
            out = None
            if child.log_path is not None:
                child.log_path.parent.mkdir(parents=True, exist_ok=True)
                out = files.enter_context(child.log_path.open("ab"))
            child.process = subprocess.Popen(
                list(child.argv),
                env={**self.env, **child.env},
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True,
                preexec_fn=parent_death_signal(),
            )
        child.started_at = time.monotonic()
        reaper().watch(child.process.pid, group=True)
        if self.on_start is not None:
            self.on_start(child)
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
                if child.start_probe is not None:
                    self._start(child)
                    self._await_answer(child)
            for child in self.children:
                if not child.after_ready and child.process is None and not self._stopping:
                    self._start(child)
            while not self._stopping:
                self._poll()
                self._check_ready()
                if self._oneshots_done():
                    break
                time.sleep(0.2)
        finally:
            self.stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return max((c.exit_code or 0 for c in self.children if not c.restart), default=0)

    def _await_answer(self, child: Child) -> None:
        """Until a service's start probe answers; ConfigurationError if it exits first
        or stays silent past its timeout (a missing library, a model that fails to load)."""
        assert child.process is not None and child.start_probe is not None
        label = child.label or child.name
        deadline = time.monotonic() + child.start_timeout_s
        while not self._stopping:
            code = child.process.poll()
            if code is not None:
                raise ConfigurationError(
                    f"{label} exited with code {code} before answering{_last_words(child)}"
                )
            if child.start_probe():
                log.info("%s answers", label)
                return
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"{label} did not answer within {child.start_timeout_s:.0f} s"
                    f"{_last_words(child)}"
                )
            time.sleep(START_PROBE_EVERY_S)

    def _oneshots_done(self) -> bool:
        oneshots = [c for c in self.children if not c.restart]
        return (
            self.exit_after_oneshots
            and bool(oneshots)
            and all(c.process is None and c.exit_code is not None for c in oneshots)
        )

    def _check_ready(self) -> None:
        if self.ready or self.readiness is None or time.monotonic() < self._next_probe:
            return
        self._next_probe = time.monotonic() + READY_PROBE_EVERY_S
        if not self.readiness.probe():
            return
        self.ready = True
        self.readiness.on_ready()
        for child in self.children:
            if child.after_ready and child.process is None:
                self._start(child)

    def _poll(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.process is None:
                waiting = child.after_ready and not self.ready
                if child.restart and not waiting and now >= child.next_start:
                    self._start(child)
                continue
            code = child.process.poll()
            if code is None:
                continue
            reaper().forget(child.process.pid)
            _signal_group(child, signal.SIGKILL)  # a pool child left behind
            child.process = None
            child.exit_code = code
            if not child.restart:
                log.info("%s finished with exit code %d", child.name, code)
                continue
            if now - child.started_at > STABLE_AFTER_S:
                child.restarts = 0
            delay = RESTART_BACKOFF_S[min(child.restarts, len(RESTART_BACKOFF_S) - 1)]
            child.restarts += 1
            child.next_start = now + delay
            log.warning("%s exited with %d; restarting in %.0f s", child.name, code, delay)

    def stop_all(self) -> None:
        """Stop the children one by one, in order: each gets SIGTERM (the group leader
        only: Celery and uvicorn then shut down warmly, finishing running tasks and
        stopping their own pool) and up to STOP_GRACE_S, then its group is killed."""
        for child in self.children:
            if child.process is not None:
                _stop_one(child)


def _stop_one(child: Child) -> None:
    assert child.process is not None
    with contextlib.suppress(ProcessLookupError):
        child.process.send_signal(signal.SIGTERM)
    try:
        child.process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        log.warning("%s did not stop in %.0f s; killing it", child.name, STOP_GRACE_S)
    # The leader may be gone while its group lives on (a pool child): kill the group.
    _signal_group(child, signal.SIGKILL)
    child.process.wait()
    reaper().forget(child.process.pid)
    log.info("stopped %s", child.name)
    child.process = None


def _last_words(child: Child) -> str:
    """The last line of the child's log, and where the log is: the reason, in one line."""
    if child.log_path is None:
        return ""
    try:
        with child.log_path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return f" (its log: {child.log_path})"
    last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
    where = f" (its log: {child.log_path})"
    return f": {last[:300]}{where}" if last else where


def _signal_group(child: Child, sig: signal.Signals) -> None:
    assert child.process is not None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, sig)
