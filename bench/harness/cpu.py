"""CPU time of the processes a figure measures, by name, each with its descendants
(uvicorn's workers, Postgres' backends: bench/harness/host.py `tree_cpu_s`), beside the
whole machine's busy time and the wall clock. Deltas between two samples are what each
spent on the requests in between, and what the rest of a shared host took meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from bench.harness.host import tree_cpu_s


def host_busy_s() -> float:
    """CPU seconds the whole machine has been busy (every core, every process). Guest
    time is inside user time already; steal is the hypervisor's, not this machine's."""
    t = psutil.cpu_times()
    fields = ("user", "nice", "system", "irq", "softirq")
    return float(sum(getattr(t, f, 0.0) for f in fields))


@dataclass(frozen=True)
class CpuSample:
    by_name: dict[str, float]
    host_busy_s: float
    #: wall clock (a point in time; after `minus`, the window's length)
    wall_s: float

    def minus(self, earlier: CpuSample) -> CpuSample:
        return CpuSample(
            {name: cpu - earlier.by_name.get(name, 0.0) for name, cpu in self.by_name.items()},
            self.host_busy_s - earlier.host_busy_s,
            self.wall_s - earlier.wall_s,
        )

    @property
    def total_s(self) -> float:
        """The named processes together."""
        return sum(self.by_name.values())


@dataclass(frozen=True)
class CpuMeter:
    """Named root pids; `sample()` reads each tree's CPU seconds so far."""

    pids: Mapping[str, int]

    def sample(self) -> CpuSample:
        by_name = {n: tree_cpu_s([pid]) for n, pid in self.pids.items()}
        return CpuSample(by_name, host_busy_s(), time.perf_counter())
