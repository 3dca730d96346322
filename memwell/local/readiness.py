"""When the embedded stack is ready: the API answers /readyz (Postgres and Redis up)
and at least one worker consumes (its presence key, memwell/core/worker_presence.py,
counted by /readyz). Before that, a chat's turns would wait in the queue and the
first searches would find nothing, so `memwell up` does not say "ready" earlier."""

from __future__ import annotations

import httpx

PROBE_TIMEOUT_S = 1.0


def stack_ready(api_url: str) -> bool:
    """One probe; False on any error (the API may not listen yet)."""
    try:
        response = httpx.get(f"{api_url.rstrip('/')}/readyz", timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    try:
        workers = response.json().get("workers", 0)
    except ValueError:
        return False
    return isinstance(workers, int) and workers >= 1
