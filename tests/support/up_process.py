"""One `memwell up` process as an operator starts it, for the tests that run the
embedded stack whole (tests/local/test_up_stack.py, the real-model tier)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import psutil

from memwell.local.waiting import wait_for

READY = re.compile(r"^ready: serving at (?P<url>http://\S+)$", re.MULTILINE)
# What would point `up` at another stack, or pin its ports.
FOREIGN = ("DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL", "TEST_REDIS_URL", "MEMWELL_API_URL",
           "MEMWELL_API_PORT", "MEMWELL_REDIS_PORT", "MEMWELL_WORKER_METRICS_PORT",
           "OPENAI_BASE_URL", "MEMWELL_LOCAL_LLM_PORT")  # fmt: skip


class Up:
    """One `memwell up` process, leading its own process group like a shell job."""

    def __init__(
        self,
        data_dir: Path,
        repo_root: Path,
        name: str,
        *args: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`memwell up ARGS` on `data_dir`, with `env` added to this environment (less
        what would point it at another stack); its output goes to NAME.log beside it."""
        self.data_dir = data_dir
        self.out = data_dir.parent / f"{name}.log"
        environment = {k: v for k, v in os.environ.items() if k not in FOREIGN}
        environment.update({"MEMWELL_DATA_DIR": str(data_dir), "MEMWELL_LOG_FORMAT": "console"})
        environment.update(env or {})
        with self.out.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memwell", "up", *args],
                cwd=repo_root,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_ready(self, timeout: float = 300) -> str:
        def ready() -> str | None:
            if self.process.poll() is not None:
                raise AssertionError(f"memwell up exited early:\n{self.text()[-4000:]}")
            found = READY.search(self.text())
            return found.group("url") if found else None

        return wait_for(ready, timeout=timeout, interval=0.2, what="memwell up to say ready")

    def recorded(self) -> list[dict[str, object]]:
        return list(json.loads((self.data_dir / "up.pids.json").read_text()))

    def owned(self) -> list[psutil.Process]:
        """Every process of the stack: the recorded ones and their descendants."""
        found: dict[int, psutil.Process] = {}
        for entry in self.recorded():
            try:
                process = psutil.Process(int(str(entry["pid"])))
                found[process.pid] = process
                for child in process.children(recursive=True):
                    found[child.pid] = child
            except psutil.NoSuchProcess:
                continue
        return list(found.values())

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
