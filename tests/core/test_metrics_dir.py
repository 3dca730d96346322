"""The multiprocess metrics folder lives under the data directory, and a new one
removes what stopped processes of this host left there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from memwell.core.metrics_dir import METRICS_FOLDER, fresh_metrics_dir


def _gone_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def test_a_fresh_folder_removes_only_the_leftovers_of_stopped_processes(tmp_path: Path) -> None:
    host = socket.gethostname()
    root = tmp_path / METRICS_FOLDER
    stopped = root / f"{host}-{_gone_pid()}"
    running = root / f"{host}-{os.getppid()}"
    elsewhere = root / f"another-host-{_gone_pid()}"
    mine = root / f"{host}-{os.getpid()}"
    for folder in (stopped, running, elsewhere, mine):
        folder.mkdir(parents=True)
        (folder / "counter_1.db").write_bytes(b"x")

    made = fresh_metrics_dir(tmp_path)

    assert made == mine and made.is_dir()
    assert list(made.iterdir()) == []  # an earlier process with this id left its samples
    assert not stopped.exists()
    assert (running / "counter_1.db").exists()
    assert (elsewhere / "counter_1.db").exists()  # that host's to clean
