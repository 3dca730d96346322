"""A real Celery worker in a subprocess, consuming the real broker. It dies with the
process that started it: SIGTERM from Linux when that process dies, and the reaper
(memwell/local/reaper.py) for the whole process group, pool children included."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import redis.exceptions
from kombu.exceptions import OperationalError

from memwell.intake.dispatch import producer_app
from memwell.local.reaper import parent_death_signal, reaper
from memwell.local.waiting import wait_for

ALL_QUEUES = "ingest,embed,llm,maintenance"


class WorkerProcess:
    def __init__(
        self,
        env: Mapping[str, str],
        *,
        concurrency: int = 2,
        name: str = "test",
        queues: str = ALL_QUEUES,
    ) -> None:
        self.env = dict(env)
        self.queues = queues
        self.concurrency = concurrency
        self.hostname = f"{name}-{os.getpid()}@localhost"
        # Beside the stack's data when it has a data dir: it goes when the data goes.
        logs = self.env.get("MEMWELL_DATA_DIR")
        self.log_path = Path(tempfile.mkstemp(prefix="memwell-worker-", suffix=".log", dir=logs)[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 90.0) -> None:
        argv = [
            sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
            "-Q", self.queues, "-c", str(self.concurrency), "-n", self.hostname,
            "--loglevel", "INFO", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=parent_death_signal(),
            )
        reaper().watch(self.process.pid, group=True)
        app = producer_app(self.env["REDIS_URL"])

        def answers_ping() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.log()}")
            try:
                return bool(app.control.ping(destination=[self.hostname], timeout=0.5))
            except (redis.exceptions.ConnectionError, OperationalError, OSError):
                return False  # a pooled connection from before a broker restart: try again

        wait_for(answers_ping, timeout=timeout, interval=0.2, what="the worker to answer ping")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker and its pool children at once, as a crash would: nothing
        acknowledges, nothing cleans up."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        reaper().forget(self.process.pid)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass
        reaper().forget(self.process.pid)
        self.process = None
