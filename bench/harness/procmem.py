"""Resident memory of processes, from /proc: VmRSS (now), VmHWM (peak) and Pss.

RSS counts shared pages in full for every process that maps them, so the RSS of a
forked pool (Celery prefork) summed over its processes overstates what it costs; Pss
(from smaps_rollup) splits each shared page between its sharers and sums correctly.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class ProcMem:
    pid: int
    name: str
    rss_mb: float
    hwm_mb: float
    pss_mb: float


def _kb_field(text: str, field: str) -> float:
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return 0.0


def proc_mem(pid: int, name: str = "") -> ProcMem:
    status = Path(f"/proc/{pid}/status").read_text()
    try:
        pss = _kb_field(Path(f"/proc/{pid}/smaps_rollup").read_text(), "Pss")
    except OSError:
        pss = 0.0
    return ProcMem(
        pid=pid,
        name=name or _kb_name(status),
        rss_mb=_kb_field(status, "VmRSS") / 1024,
        hwm_mb=_kb_field(status, "VmHWM") / 1024,
        pss_mb=pss / 1024,
    )


def _kb_name(status: str) -> str:
    return status.splitlines()[0].split(":", 1)[1].strip()


def tree_mem(pid: int) -> list[ProcMem]:
    """The process and every descendant (a Celery prefork pool, uvicorn's workers)."""
    children = psutil.Process(pid).children(recursive=True)
    return [proc_mem(pid, "main")] + [proc_mem(c.pid, f"child {c.pid}") for c in children]


def empty_interpreter_hwm_mb() -> float:
    """Peak RSS of a bare `python -c pass`-like interpreter: the floor of any process."""
    code = "import pathlib; print(pathlib.Path('/proc/self/status').read_text())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return _kb_field(out.stdout, "VmHWM") / 1024
