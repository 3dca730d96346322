"""Where a process tree keeps prometheus-client's multiprocess files.

Multiprocess mode needs a directory of its own per run, before any process imports
prometheus-client: files left by an earlier run would be summed into this one's
counters. It lives under the data directory, not the system's temp directory, named by
the host and the process that own it. `memwell worker` hands its process over to Celery
and cannot remove its folder when it stops, so each new one removes the folders of this
host's owners that are gone; nothing piles up. Another host's folders (a data directory
shared between containers) are left to that host.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import psutil

#: under the data directory
METRICS_FOLDER = "metrics"


def fresh_metrics_dir(data_dir: Path) -> Path:
    """An empty folder for this process's multiprocess files, after removing the
    folders of processes that no longer run."""
    root = data_dir / METRICS_FOLDER
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    for folder in root.iterdir():
        owner, _, pid = folder.name.rpartition("-")
        if owner == host and not _runs(pid):
            shutil.rmtree(folder, ignore_errors=True)
    mine = root / f"{host}-{os.getpid()}"
    shutil.rmtree(mine, ignore_errors=True)  # a reused pid's leftovers
    mine.mkdir()
    return mine


def _runs(pid: str) -> bool:
    """Another process of this host with that id runs (a folder of our own id is a
    leftover of an earlier process that had it)."""
    return pid.isdigit() and int(pid) != os.getpid() and psutil.pid_exists(int(pid))
