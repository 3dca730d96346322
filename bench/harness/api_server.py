"""The real API as a subprocess (`python -m memwell api`, uvicorn) on a loopback port.

A subprocess, not a thread of the benchmark: the load generator and the server must not
share one GIL, or the client's own Python time would show up as server latency.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from bench.harness.stack import REPO_ROOT, BenchStack, service_env, stop_group


@dataclass(frozen=True)
class ApiProcess:
    url: str
    pid: int  # uvicorn's main process (the only one with --workers 1)
    workers: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the API exited early; see {log}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API did not answer /healthz in {timeout:.0f} s; see {log}")
        time.sleep(0.2)


@contextmanager
def serve_api(
    stack: BenchStack, *, workers: int = 1, env: Mapping[str, str] | None = None
) -> Iterator[ApiProcess]:
    """Serve `api.main:create_app` on this stack until the block ends."""
    port = free_port()
    log_path = stack.root / f"api-{port}.log"
    log = log_path.open("ab")
    print(f"  starting the API ({workers} worker process(es)) on :{port}", file=sys.stderr)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memwell", "api", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers)],
        env={**service_env(stack), "MEMWELL_LOG_LEVEL": "WARNING", **(env or {})},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO_ROOT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, str(log_path), timeout=120)
        yield ApiProcess(url=url, pid=proc.pid, workers=workers)
    finally:
        stop_group(proc)
        log.close()
