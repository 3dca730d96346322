"""What the sync and async clients share around one HTTP exchange: headers, the
retry policy, and turning an error response into the right exception."""

from __future__ import annotations

import os
import random
from typing import Any

import httpx

from memwell.sdk.errors import APIError, TransportError, error_class

DEFAULT_BASE_URL = "http://127.0.0.1:8420"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RETRIES = 3
#: answers that mean "try again later", for calls that are safe to repeat
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: problem types the API answers before doing anything of a request
REFUSED_UNDONE = frozenset({"rate-limited", "overloaded"})
BACKOFF_BASE_S = 0.25
BACKOFF_MAX_S = 8.0
USER_AGENT = "memwell-python-sdk/0.1"


def resolve_base_url(base_url: str | None) -> str:
    return (base_url or os.environ.get("MEMWELL_API_URL") or DEFAULT_BASE_URL).rstrip("/")


def default_headers(api_key: str | None) -> dict[str, str]:
    key = api_key or os.environ.get("MEMWELL_API_KEY")
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


#: paths whose absolute URL is kept (ids make the rest of them unbounded)
MAX_KEPT_URLS = 256


class Addressing:
    """Where a call goes and which headers it adds, for one client.

    A client the SDK makes carries the SDK's headers itself, and each call goes to an
    absolute URL built once per path: httpx then merges neither base URL nor headers
    per request (about a fifth of its time per call). A client the caller gives keeps
    its own base URL and headers, which it may change: its calls take relative paths,
    and the SDK's headers are added to each.
    """

    def __init__(
        self, http: httpx.Client | httpx.AsyncClient, headers: dict[str, str], *, owned: bool
    ) -> None:
        self._http = http
        self._owned = owned
        #: what each request adds besides its X-Request-ID
        self.headers = {} if owned else headers
        self._urls: dict[str, httpx.URL] = {}

    def url(self, path: str) -> httpx.URL | str:
        if not self._owned:
            return path
        found = self._urls.get(path)
        if found is None:
            found = self._http.build_request("GET", path).url  # httpx's own merge
            if len(self._urls) < MAX_KEPT_URLS:
                self._urls[path] = found
        return found


def should_retry(
    exc: httpx.TransportError | None, response: httpx.Response | None, *, retryable: bool
) -> bool:
    """A connection that never opened, or a request the server refused before doing
    any of it (over a rate limit, or too busy to admit it), is safe to retry for any
    call; anything else that may have reached the server only for idempotent calls."""
    if exc is not None:
        return retryable or isinstance(exc, httpx.ConnectError)
    if response is None or response.status_code not in RETRY_STATUSES:
        return False
    return retryable or refused_undone(response)


def refused_undone(response: httpx.Response) -> bool:
    """The problem's type says nothing of the request was done (the API refuses over a
    rate limit, and when overloaded, before any work)."""
    if response.status_code not in (429, 503):
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    kind = body.get("type") if isinstance(body, dict) else None
    return isinstance(kind, str) and kind.rsplit("/", 1)[-1] in REFUSED_UNDONE


def backoff_s(attempt: int, response: httpx.Response | None = None) -> float:
    """Retry-After when the server sent one, else exponential backoff with jitter."""
    if response is not None:
        after = response.headers.get("Retry-After")
        if after:
            try:
                return float(min(max(float(after), 0.0), BACKOFF_MAX_S * 4))
            except ValueError:
                pass
    delay: float = min(BACKOFF_BASE_S * float(1 << min(attempt, 16)), BACKOFF_MAX_S)
    return delay * (0.5 + random.random() / 2)


def decode(response: httpx.Response, request_id: str) -> Any:
    """The JSON body of a success; an APIError subclass for anything else."""
    if response.status_code < 400:
        if response.status_code == 204 or not response.content:
            return None
        return response.json()
    body: dict[str, Any] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    raise problem_error(
        response.status_code,
        body,
        title=response.reason_phrase,
        request_id=response.headers.get("X-Request-ID", request_id),
    )


def problem_error(status: int, body: dict[str, Any], *, title: str, request_id: str) -> APIError:
    """The APIError subclass for a problem body (`title` when the body has none)."""
    type_uri = str(body.get("type", ""))
    return error_class(status, type_uri)(
        status,
        title=str(body.get("title", title)),
        detail=body.get("detail"),
        type_uri=type_uri,
        body=body,
        request_id=request_id,
    )


def transport_error(exc: httpx.TransportError, method: str, url: str) -> TransportError:
    return TransportError(f"{method} {url}: {type(exc).__name__}: {exc}")


__all__ = ["APIError"]
