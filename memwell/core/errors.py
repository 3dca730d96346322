"""Domain errors. The API maps each to an HTTP problem response in one place."""

from __future__ import annotations


class MemwellError(Exception):
    """Base of every error Memwell raises on purpose."""

    #: stable machine-readable identifier, used as the problem+json `type` suffix
    code = "internal"


class ConfigurationError(MemwellError):
    """The settings or the environment cannot work; raised at startup."""

    code = "configuration"


class InvalidInput(MemwellError):
    """The caller sent something we refuse; nothing was stored."""

    code = "invalid-input"


class InvalidCursor(InvalidInput):
    """A page cursor that is malformed, or was issued for another list (another user,
    tenant or sort order)."""

    code = "invalid-cursor"


class Conflict(MemwellError):
    """The change would collide with what is stored (for example a second live memory
    with the same content)."""

    code = "conflict"


class NotFound(MemwellError):
    """The named object does not exist for this tenant."""

    code = "not-found"


class ServiceUnavailable(MemwellError):
    """A backing service (Postgres, Redis, model endpoint) cannot be reached right now."""

    code = "unavailable"

    def __init__(self, message: str, *, retry_after_s: int = 5) -> None:
        super().__init__(message)
        #: a restart of Redis or a Postgres failover takes seconds, not minutes
        self.retry_after_s = retry_after_s


class Overloaded(ServiceUnavailable):
    """This API process is serving as many expensive requests as it may at once
    (MEMWELL_API_MAX_INFLIGHT). The request was refused before any of it was done, so
    any call, a chat turn included, may be sent again after Retry-After."""

    code = "overloaded"


class TooLarge(MemwellError):
    """The request is over a configured size limit (message, batch, metadata, body)."""

    code = "too-large"


class Unauthorized(MemwellError):
    """No valid API key was presented."""

    code = "unauthorized"


class Forbidden(MemwellError):
    """The key is valid but lacks the scope this operation needs."""

    code = "forbidden"


class RateLimited(MemwellError):
    """The key has used up its request budget for now."""

    code = "rate-limited"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
