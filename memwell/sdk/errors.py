"""SDK exceptions, mapped from the API's problem+json errors.

The API's `type` is a URI ending in a stable code (`.../problems/not-found`); that
suffix picks the exception class, so callers catch meaning, not status numbers:

    try:
        client.get_memory(memory_id)
    except memwell.NotFoundError:
        ...
"""

from __future__ import annotations

from typing import Any


class MemwellClientError(Exception):
    """Base of every error the SDK raises."""


class TransportError(MemwellClientError):
    """The API could not be reached, or did not answer in time (after any retries)."""


class APIError(MemwellClientError):
    """The API answered with an error (a problem+json body when it is Memwell)."""

    code = "http-error"

    def __init__(
        self,
        status: int,
        *,
        title: str = "",
        detail: Any = None,
        type_uri: str = "",
        body: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.type_uri = type_uri
        self.body = body or {}
        self.request_id = request_id
        text = f"{status} {title}".strip()
        if detail:
            text += f": {detail}"
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Field-level validation errors, when the API sent them."""
        value = self.body.get("errors")
        return value if isinstance(value, list) else []


class InvalidInputError(APIError):
    """422: the request was refused as invalid; nothing was stored."""

    code = "invalid-input"


class UnauthorizedError(APIError):
    """401: no API key, or a key the API does not know."""

    code = "unauthorized"


class ForbiddenError(APIError):
    """403: the key lacks the scope this call needs."""

    code = "forbidden"


class NotFoundError(APIError):
    """404: no such object for this tenant."""

    code = "not-found"


class PayloadTooLargeError(APIError):
    """413: a message, batch or metadata over the API's limits; 431: a request line
    and headers over them (a query string too long)."""

    code = "too-large"


class RateLimitedError(APIError):
    """429: over the key's rate limit; `retry_after` says when to come back."""

    code = "rate-limited"

    @property
    def retry_after(self) -> float | None:
        value = self.body.get("retry_after")
        return float(value) if isinstance(value, int | float) else None


class UnavailableError(APIError):
    """503: a backing service (database, broker, model endpoint) is away for now."""

    code = "unavailable"


class ServerError(APIError):
    """5xx: a fault on the server's side."""

    code = "internal"


_BY_CODE: dict[str, type[APIError]] = {
    cls.code: cls
    for cls in (
        InvalidInputError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        PayloadTooLargeError,
        RateLimitedError,
        UnavailableError,
        ServerError,
    )
}
_BY_CODE["headers-too-large"] = PayloadTooLargeError
_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidInputError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    413: PayloadTooLargeError,
    422: InvalidInputError,
    429: RateLimitedError,
    431: PayloadTooLargeError,
    503: UnavailableError,
}


def error_class(status: int, type_uri: str) -> type[APIError]:
    """The exception for a problem `type` (its last path segment), else the status."""
    code = type_uri.rstrip("/").rsplit("/", 1)[-1] if type_uri else ""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else APIError
