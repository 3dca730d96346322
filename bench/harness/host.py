"""What machine a benchmark ran on: the CPU model and its vector extensions, which move
embedding and scan times 3-5x between hosts of the same kind."""

from __future__ import annotations

import os
from pathlib import Path

VECTOR_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile")


def describe_host() -> str:
    """One line: CPU model, cores, and which vector extensions it has."""
    model, flags = "unknown CPU", set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    have = [f for f in VECTOR_FLAGS if f in flags] or ["none of " + "/".join(VECTOR_FLAGS)]
    return f"{model}, {os.cpu_count()} cores, vector extensions: {', '.join(have)}"
