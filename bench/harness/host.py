"""What machine a benchmark ran on: the CPU model and its vector extensions, which move
embedding and scan times 3-5x between hosts of the same kind, and how the local model
runs (precision, threads, graph optimisation, sequence cap).

Every figure prints both lines above its table, and `python -m bench.report` writes them
into the results block of docs/performance.md: two runs are comparable only as ratios to floors
measured in the same run, and only when these lines say why the floors differ.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memwell.core.settings import Settings

#: AVX-512 VNNI (or AVX-VNNI) runs onnxruntime's int8 matrix products in one instruction
#: per 4 multiply-adds: int8 is ~2.3x fp32 with it, ~1.5-1.8x on AVX2 alone.
VECTOR_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
)


def cpu_flags() -> tuple[str, set[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo."""
    model, flags = "unknown CPU", set[str]()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    return model, flags


def describe_host() -> str:
    """One line: CPU model, cores, and which vector extensions it has."""
    model, flags = cpu_flags()
    have = [f for f in VECTOR_FLAGS if f in flags] or ["none of " + "/".join(VECTOR_FLAGS)]
    vnni = "avx512_vnni" in flags or "avx_vnni" in flags
    note = "int8 via VNNI" if vnni else "no VNNI: int8 gains less"
    return f"{model}, {os.cpu_count()} cores, vector extensions: {', '.join(have)} ({note})"


def describe_onnx(settings: Settings | None = None, *, worker_processes: int = 2) -> str:
    """One line: how the local model runs for memories (worker) and for queries (API)."""
    import onnxruntime as ort

    from memwell.core.settings import Settings
    from memwell.embeddings.local_onnx import MAX_LENGTH

    s = settings or Settings()
    if s.embed_threads is not None:
        threads = s.embed_threads
    else:  # worker/runtime.py embedder_threads, without importing the worker
        threads = max(1, (os.cpu_count() or 1) // max(1, worker_processes))
    return (
        f"onnxruntime {ort.__version__} CPU; memories {s.local_embedding_precision} "
        f"(worker: {worker_processes} process(es) x {threads} intra-op thread(s), batch "
        f"{s.embedding_batch_size}); queries {s.local_query_precision} (API: 1 intra-op "
        f"thread, batch 1 alone, up to {s.query_batch_size} under load); inter-op 1; graph "
        f"optimisation ORT_ENABLE_ALL at load; sequence cap {MAX_LENGTH} tokens, padding "
        "to each chunk's longest text"
    )


def host_block(settings: Settings | None = None) -> str:
    """The two lines every figure prints first."""
    return f"host: {describe_host()}\nonnx: {describe_onnx(settings)}"


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds so far of these processes and their descendants (reaped ones too:
    a child's time moves to its parent's children_* once reaped, as Postgres reaps its
    backends). On a host that other work shares, CPU time moves far less than wall
    time, so figures print CPU per request or per turn beside their latencies."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                t = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total
