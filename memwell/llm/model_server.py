"""Whether an OpenAI-compatible model server answers, and which models it serves.

One probe, GET {base}/models, shared by `memwell up` (which waits on it before the
stack starts), `memwell status` and /readyz (which report it). A server that is down
or still loading its weights does not answer, or answers without a model list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ModelServerState:
    url: str
    up: bool
    #: the model ids it serves (empty while down)
    models: tuple[str, ...] = ()
    port: int | None = None
    #: why it counts as down: the error's type and first line
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        state = asdict(self)
        state["status"] = "up" if self.up else "down"
        state["models"] = list(self.models)
        return state


def _models(payload: Any) -> tuple[str, ...] | None:
    """The ids of an OpenAI `list` of models; None when the body is not one."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None
    return tuple(str(m["id"]) for m in payload["data"] if isinstance(m, dict) and "id" in m)


def _state(url: str, response: httpx.Response | None, error: Exception | None) -> ModelServerState:
    port = urlsplit(url).port
    if response is None:
        first = str(error).splitlines()[0] if error is not None and str(error) else ""
        return ModelServerState(url, False, port=port, error=f"{type(error).__name__}: {first}")
    if response.status_code != 200:
        return ModelServerState(url, False, port=port, error=f"HTTP {response.status_code}")
    try:
        models = _models(response.json())
    except ValueError:
        models = None
    if not models:
        return ModelServerState(url, False, port=port, error="no model listed")
    return ModelServerState(url, True, models=models, port=port)


def _models_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/models"


def probe_model_server(base_url: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> ModelServerState:
    """One probe of the server at `base_url` (its /v1 root); never raises."""
    try:
        response = httpx.get(_models_url(base_url), timeout=timeout_s)
    except httpx.HTTPError as exc:
        return _state(base_url, None, exc)
    return _state(base_url, response, None)


async def probe_model_server_async(
    base_url: str, *, timeout_s: float = PROBE_TIMEOUT_S
) -> ModelServerState:
    """`probe_model_server` for an event loop."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(_models_url(base_url))
    except httpx.HTTPError as exc:
        return _state(base_url, None, exc)
    return _state(base_url, response, None)
