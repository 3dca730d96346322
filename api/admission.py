"""Admission: who may send a body, and how large and how slow it may be, decided
before a byte of it is read.

A pure ASGI middleware in front of the app. For the REST surface (/v1), it reads
the API key from the headers and verifies it (cached, as the dependencies would),
charges the key's rate limit, and checks the declared Content-Length against the
route's cap; only then does it read the body, whole, within the cap and within
MEMWELL_API_BODY_TIMEOUT_S, and hand it to the app. A client without a valid key
costs a header parse and a Redis round trip, never a body read or a JSON parse; a
client address that keeps failing is answered 429 before its key is looked up
(unless this process has verified that key before: see KeyCache.seen).

Every refusal is the problem+json the app's handlers would give, with
`Connection: close`, so the server drops whatever body the client still sends.
The verified principal travels in the ASGI scope to `api.deps`, which does not
verify it again.

Before all that, the expensive routes (chat, context, search: each embeds a query and
searches) pass an in-flight cap, MEMWELL_API_MAX_INFLIGHT per process. Past it, a
request is answered 503 `overloaded` with Retry-After at once, before its key or body
is read: nothing of it was done (a chat turn is not stored nor enqueued), so a client
may send any call again, and the requests already admitted are not slowed by a queue
that only grows. The connection stays open for the retry. Only these routes count:
/healthz, /metrics and the cheap reads are never refused for load.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from fastapi.security.utils import get_authorization_scheme_param
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.bodylimit import BodyTooLarge, ClientGone, declared_length, read_body, route_cap
from api.errors import problem, problem_for, unavailable
from api.redaction import describe
from api.state import AppState
from memwell.auth.failed_auth import verify_or_charge
from memwell.auth.keys import Principal
from memwell.auth.rate_limit import RateDecision
from memwell.core.errors import Overloaded, RateLimited, TooLarge, Unauthorized
from memwell.core.metrics import API_OVERLOADED_TOTAL
from memwell.core.settings import Settings

log = logging.getLogger(__name__)

#: Where the verified principal waits for `api.deps.get_principal`.
PRINCIPAL_SCOPE_KEY: Final = "memwell.principal"
_GUARDED_PREFIX: Final = "/v1/"
_CLOSE: Final = {"Connection": "close"}
#: The routes that embed a query and search: what one process can serve only so many of.
_CAPPED: Final = frozenset(
    ("POST", path) for path in ("/v1/chat", "/v1/context", "/v1/memories/search",
                                "/v1/chat/completions")
)  # fmt: skip
#: Seconds a refused client waits: the requests in flight finish well within it.
_OVERLOADED_RETRY_S: Final = 1


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.max_inflight = settings.resolved_api_max_inflight
        #: capped requests being served (one event loop per process: no lock)
        self.inflight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.max_inflight or (scope["method"], scope["path"]) not in _CAPPED:
            await self._serve(scope, receive, send)
            return
        if self.inflight >= self.max_inflight:
            await self._overloaded(scope)(scope, receive, send)
            return
        self.inflight += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            self.inflight -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = await self._admit(scope)
        if refusal is None:
            refusal = self._size_refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        cap = route_cap(scope["method"], scope["path"], self.settings)
        try:
            body = await read_body(receive, cap=cap, timeout_s=self.settings.api_body_timeout_s)
        except ClientGone:
            return
        except BodyTooLarge:
            await self._too_large(scope, cap)(scope, receive, send)
            return
        except TimeoutError:
            detail = f"the body did not arrive within {self.settings.api_body_timeout_s:g} s"
            response = problem(408, "request-timeout", "Request timeout", detail,
                               headers=_CLOSE, path=scope["path"])  # fmt: skip
            await response(scope, receive, send)
            return
        await self.app(scope, body.replay(receive), send)

    # --- how busy ---------------------------------------------------------------------

    def _overloaded(self, scope: Scope) -> Response:
        API_OVERLOADED_TOTAL.labels(scope["path"]).inc()
        detail = (f"this API process is serving its {self.max_inflight} requests of this kind "
                  "at once; nothing of this request was done, send it again")  # fmt: skip
        refused = Overloaded(detail, retry_after_s=_OVERLOADED_RETRY_S)
        return problem_for(refused, path=scope["path"], retry_after=_OVERLOADED_RETRY_S,
                           max_inflight=self.max_inflight)  # fmt: skip

    # --- who is calling ---------------------------------------------------------------

    async def _admit(self, scope: Scope) -> Response | None:
        """None when the request may go on (its principal stored in the scope)."""
        if self.settings.auth_disabled or not scope["path"].startswith(_GUARDED_PREFIX):
            return None
        state: AppState = scope["app"].state.memwell
        try:
            return await self._authenticate(scope, state)
        except Exception as exc:
            mapped = unavailable(exc)
            if mapped is None:
                raise
            log.warning("authentication unavailable: %s", describe(exc))
            return problem_for(mapped, path=scope["path"])

    async def _authenticate(self, scope: Scope, state: AppState) -> Response | None:
        key = _bearer_key(scope)
        try:
            principal = await verify_or_charge(
                state.key_cache, state.system_sessions, key,
                address=_client_address(scope), failures=state.failed_auth,
            )  # fmt: skip
        except RateLimited as limited:
            return problem_for(limited, path=scope["path"], headers=_CLOSE)
        if principal is None:
            detail = ("send an API key as `Authorization: Bearer <key>`" if not key
                      else "unknown or revoked API key")  # fmt: skip
            return problem_for(Unauthorized(detail), path=scope["path"], headers=_CLOSE)
        if state.limiter is not None:
            decision = await state.limiter.hit(principal.key_id)
            if not decision.allowed:
                detail = f"rate limit of {state.limiter.rate_per_s:g} requests/s exceeded"
                return _rate_limited(scope, decision, detail)
        scope[PRINCIPAL_SCOPE_KEY] = principal
        return None

    # --- how large --------------------------------------------------------------------

    def _size_refusal(self, scope: Scope) -> Response | None:
        declared = declared_length(scope)
        if declared is None:
            return None
        if declared < 0:
            return problem(400, "bad-request", "Bad Content-Length",
                           "Content-Length must be a non-negative integer", headers=_CLOSE,
                           path=scope["path"])  # fmt: skip
        cap = route_cap(scope["method"], scope["path"], self.settings)
        return self._too_large(scope, cap) if declared > cap else None

    @staticmethod
    def _too_large(scope: Scope, cap: int) -> Response:
        detail = f"the body of {scope['method']} {scope['path']} is limited to {cap} bytes"
        return problem_for(TooLarge(detail), path=scope["path"], headers=_CLOSE, limit_bytes=cap)


def _bearer_key(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, credentials = get_authorization_scheme_param(value.decode("latin-1"))
            if scheme.lower() == "bearer" and credentials:
                return credentials
            return None
    return None


def _client_address(scope: Scope) -> str:
    client: Any = scope.get("client")
    return str(client[0]) if client else "unknown"


def principal_of(scope: Scope) -> Principal | None:
    """The principal admission verified for this request, if it did."""
    found = scope.get(PRINCIPAL_SCOPE_KEY)
    return found if isinstance(found, Principal) else None


def _rate_limited(scope: Scope, decision: RateDecision, detail: str) -> Response:
    limited = RateLimited(detail, retry_after_s=decision.retry_after_s)
    return problem_for(limited, path=scope["path"], headers=_CLOSE)
