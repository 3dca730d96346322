"""The parent-death signal is armed only for children started from the main thread:
Linux sends it when the forking *thread* ends, so a worker restarted from a chaos
loop's thread would get SIGTERM the moment that loop finished (which emptied the
chaos bench's workers mid-drain). The reaper covers the other children."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from memwell.local.reaper import parent_death_signal

# Prints the signal this process gets when its parent dies (prctl PR_GET_PDEATHSIG).
REPORT = (
    "import ctypes; v = ctypes.c_int(); "
    "ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"
)


def _armed_with() -> int:
    out = subprocess.run(
        [sys.executable, "-c", REPORT],
        preexec_fn=parent_death_signal(),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def test_children_of_the_main_thread_get_sigterm_when_we_die() -> None:
    assert _armed_with() == signal.SIGTERM


def test_children_of_another_thread_are_left_to_the_reaper() -> None:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(_armed_with()))
    thread.start()
    thread.join()
    assert seen == [0]
