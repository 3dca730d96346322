"""POST /v1/chat/completions and GET /v1/models: OpenAI's Chat Completions wire format,
with memory. An app changes its client's `base_url` (and key) and keeps its code.

Who is speaking: the request's `user` field, or the `X-Memwell-User` header (or
`metadata.memwell_user`); which session: the `X-Memwell-Session` header (or
`metadata.memwell_session`), else "default". `Idempotency-Key` makes a retried request
harmless. Errors here come in OpenAI's shape (`{"error": {...}}`), which this door's
clients parse (api/errors.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from api.deps import ReadTenantDep, StateDep, WriteTenantDep
from api.sse import EventStream
from memwell.auth.size_limits import check_message
from memwell.chat.completions import Caller, complete, last_user_message, open_stream, text_of
from memwell.core.errors import InvalidInput
from memwell.intake.turns import Content, Identifier, check_text, first_reason

router = APIRouter(prefix="/v1", tags=["openai-compatible"])
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_STORED: TypeAdapter[str] = TypeAdapter(Content)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None

    @field_validator("content")
    @classmethod
    def _text_is_text(
        cls, value: str | list[dict[str, Any]] | None
    ) -> str | list[dict[str, Any]] | None:
        # Every message is forwarded, so each must be text the model endpoint can take,
        # by the same rules as stored text (blank parts aside: an app may send them).
        text = text_of(value)
        if text.strip():
            check_text(text, "a message's text")
        return value


class ChatCompletionRequest(BaseModel):
    """What apps send; every field Memwell does not read is forwarded as it came."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"model": "gpt-4o-mini", "user": "u1", "stream": False,
                 "messages": [{"role": "system", "content": "You are a travel agent."},
                              {"role": "user", "content": "Book me a window seat to Porto."}]}
            ]
        },
    )  # fmt: skip

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=2000)
    # OpenAI takes null for every optional field; null `stream` means not streamed.
    stream: bool | None = Field(default=False, strict=True)
    user: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None

    @field_validator("stream")
    @classmethod
    def _null_is_not_streamed(cls, value: bool | None) -> bool:
        # False, not None, goes upstream: not every OpenAI-compatible server takes null.
        return bool(value)

    @model_validator(mode="after")
    def _stored_message_is_content(self) -> ChatCompletionRequest:
        # The user's last message is the part remembered: it meets the turn contract's
        # rules here, before any retrieval, model call or write.
        try:
            _STORED.validate_python(self.stored_message)
        except ValidationError as exc:
            raise ValueError(f"the last user message: {first_reason(exc)}") from None
        return self

    @property
    def stored_message(self) -> str:
        """The text remembered of this request: the user's last message."""
        raw = [m.model_dump(include={"role", "content"}) for m in self.messages]
        try:
            return last_user_message(raw)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None


def _identifier(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(f"{what} is not a valid id: {exc.errors()[0]['msg']}") from exc


def _caller(
    tenant: str,
    body: ChatCompletionRequest,
    user_header: str | None,
    session_header: str | None,
    idempotency_key: str | None,
) -> Caller:
    metadata = body.metadata or {}
    user = _identifier(body.user or user_header or metadata.get("memwell_user"), "the user")
    if user is None:
        raise InvalidInput(
            "say whose memory this is: the `user` field or the X-Memwell-User header"
        )
    session = _identifier(session_header or metadata.get("memwell_session"), "the session")
    return Caller(
        tenant=tenant, user_id=user, session_id=session or "default",
        idempotency_key=idempotency_key,
    )  # fmt: skip


COMPLETION_RESPONSE = {
    "description": "A `chat.completion` object; with `stream: true`, Server-Sent Events of "
    "`chat.completion.chunk` objects ending with `data: [DONE]`, as OpenAI streams them.",
    "content": {
        "application/json": {"schema": {"type": "object"}},
        "text/event-stream": {"itemSchema": {"type": "object"}},
    },
}


@router.post(
    "/chat/completions",
    summary="OpenAI-compatible chat completion, with memory",
    responses={200: COMPLETION_RESPONSE},
)
async def chat_completions(
    body: ChatCompletionRequest,
    state: StateDep,
    tenant: WriteTenantDep,
    x_memwell_user: Annotated[str | None, Header(max_length=200)] = None,
    x_memwell_session: Annotated[str | None, Header(max_length=200)] = None,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Any:
    """The app's request, forwarded to the configured model with the user's memories
    injected as quoted data; streamed when `stream` is true."""
    check_message(body.stored_message, state.settings)
    caller = _caller(tenant, body, x_memwell_user, x_memwell_session, idempotency_key)
    raw = body.model_dump(mode="json", exclude_unset=True)
    # Memwell's own keys stay here; the upstream gets the app's metadata only.
    metadata = {k: v for k, v in (body.metadata or {}).items() if not k.startswith("memwell_")}
    if metadata:
        raw["metadata"] = metadata
    else:
        raw.pop("metadata", None)
    if body.stream:
        # EventStream closes the relay as soon as the client hangs up, so the partial
        # reply is remembered then, not whenever the generator is collected.
        return EventStream(await open_stream(state.completions, caller, raw))
    return JSONResponse(await complete(state.completions, caller, raw))


@router.get("/models", summary="The models this door answers with")
async def models(state: StateDep, tenant: ReadTenantDep) -> Any:
    return JSONResponse(await state.completions.upstream.models())
