"""One client for the pipeline's structured (JSON) calls to any OpenAI-compatible
endpoint: OpenAI, vLLM, Ollama, LM Studio, llama.cpp's server.

- The request asks for the answer's JSON schema (unless the operator's setting says
  not to), which these servers turn into constrained decoding: OpenAI's
  `response_format` json_schema first; an endpoint that refuses it (HTTP 400/422, or
  an error that names response_format: llama-cpp-python's server answers 500) is
  asked again with `json_object` plus the schema (the shape llama-cpp-python takes),
  then with none, and this client remembers the shape that worked.
- The answer is parsed and validated by a pydantic model whose fields follow
  memwell/llm/output_rules.py: a model's answer is data, never a crash. A value that
  breaks a rule is mended or its item dropped (each counted, `invalid_value`); an
  answer that is no JSON, too deep, or of the wrong shape gets one retry, with where
  and why shown to the model; a second failure is a fallback: the caller runs local
  mode for those items. So is a 200 whose body is no completion (not JSON, no
  choices). Never lose the turn.
- Logs say the stage, the reason, counts and sizes, never the text of a prompt, an
  answer or an endpoint's error body (which may echo the prompt).
- HTTP 408, 409, 429 and 5xx, and a connection that fails, are retried here (Retry-After
  honoured) while the call's time allows; a failure after that is a fallback too.
- A call has a total time: the operator's MEMWELL_LLM_TIMEOUT_S, or less when a
  `deadline` (time.monotonic()) comes first. Every connect, read and write of the call,
  and its retries, fit inside it (memwell/llm/call_deadline.py), so an endpoint that
  drips its answer byte by byte cannot hold a task past it either. A rate limit still
  spent after its wait raises RateLimited: the caller stops and retries later, it does
  not fall back.
- A call that ran out of time is a fallback, or, when the caller asks for it
  (`on_timeout="defer"`), an answer still to come: the caller sends those items again
  later, when a slow model has the time (memwell/pipeline/llm_analysis.py).
- Every fallback and every deferral is counted by stage (and a fallback by reason): in
  /metrics (memwell_llm_fallbacks_total, memwell_llm_deferrals_total) and in
  llm_usage, next to the tokens.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from memwell.core.metrics import LLM_DEFERRALS_TOTAL, LLM_FALLBACKS_TOTAL, record_llm_call
from memwell.core.text_rules import is_utf8_text
from memwell.llm.call_deadline import bounded_http_client, call_deadline
from memwell.llm.output_rules import (
    INVALID_OUTPUT,
    INVALID_VALUE,
    InvalidAnswer,
    OutputCheck,
    answer_problem,
    answer_reason,
    brackets,
    check_shape,
)
from memwell.llm.provider_rate_limit import RedisRateLimiter

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
UsageSink = Callable[..., None]
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)
#: A call never gets less time than this, even past its deadline: the first window of
#: a task always makes progress (by the model, or by its local fallback).
MIN_CALL_S: Final = 5.0
#: Status codes by which an endpoint says it does not take `response_format`.
_SCHEMA_REFUSED: Final = frozenset({400, 422})
#: The shapes of `response_format` tried in turn, most standard first; then none.
FORMATS: Final = ("json_schema", "json_object")
#: Statuses an endpoint answers when trying again later may succeed.
_RETRIED_STATUSES: Final = frozenset({408, 409, 429})
#: The first wait between tries, doubled each time up to the cap (with jitter).
RETRY_FIRST_S: Final = 0.5
RETRY_CAP_S: Final = 8.0
TIMEOUT: Final = "timeout"


def parse_json_answer(content: str, schema: type[T], check: OutputCheck | None = None) -> T:
    """The model's answer as `schema`, validated with `check` as the context (what was
    mended and dropped is noted there); tolerates code fences and prose around it, an
    answer whose closing brackets are missing (a small model often stops after the
    last array), and one cut short by its token limit."""
    text = _FENCE.sub("", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidAnswer("no JSON object in the answer")
    check_shape(text[start:])
    # As written; with its open brackets closed; cut after its last whole object and
    # closed (an answer that ran out of tokens keeps what it finished).
    readings = (text[start : end + 1], close_brackets(text[start:]),
                close_brackets(text[start : end + 1]))  # fmt: skip
    first_error: json.JSONDecodeError | None = None
    for reading in readings:
        try:
            data = json.loads(reading)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        return schema.model_validate(data, context=check)
    assert first_error is not None
    raise first_error


def close_brackets(text: str) -> str:
    """`text` with the brackets it leaves open closed, in order (strings respected)."""
    open_: list[str] = []
    for ch in brackets(text):
        if ch in "{[":
            open_.append("}" if ch == "{" else "]")
        elif open_ and open_[-1] == ch:
            open_.pop()
    return text.rstrip() + "".join(reversed(open_))


def response_format(schema: type[BaseModel], kind: str = "json_schema") -> dict[str, Any]:
    """The `response_format` asking for `schema`, in OpenAI's shape (json_schema, also
    vLLM's and llama.cpp's own server's) or llama-cpp-python's (json_object with a
    schema). Not strict: OpenAI's strict mode refuses optional fields and defaults;
    the local servers constrain decoding to the schema either way."""
    if kind == "json_object":
        return {"type": "json_object", "schema": schema.model_json_schema()}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": schema.model_json_schema(),
            "strict": False,
        },
    }


def first_format(setting: str) -> int:
    """Where the ladder starts for a `response_format` setting: auto and json_schema at
    the top, none past its end. A server whose grammar-constrained sampling is slow
    (llama-cpp-python's, on a CPU) answers faster with none, and the parse, retry and
    fallback path still holds the answer to the schema."""
    if setting == "none":
        return len(FORMATS)
    return FORMATS.index(setting) if setting in FORMATS else 0


def refuses_format(exc: openai.APIStatusError) -> bool:
    """Whether an error says the endpoint does not take this `response_format`."""
    return exc.status_code in _SCHEMA_REFUSED or "response_format" in str(exc)


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A validated answer, or why there is none: the caller falls back to local, or,
    when `deferred` (a call out of time, with on_timeout="defer"), asks again later."""

    value: T | None
    fallback: str | None = None
    deferred: bool = False
    #: items of the answer dropped for a value that broke a rule, as the model wrote them
    dropped: tuple[Any, ...] = ()


class _NoAnswer(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_completion(response: object) -> tuple[str | None, int, int]:
    """(the message's text, prompt tokens, completion tokens) of a completion, whatever
    the endpoint sent: the SDK reads a 200 without validating it, so `choices` may be
    empty or missing, and a body that is not JSON comes back as a plain string. None:
    no message at all."""
    usage = getattr(response, "usage", None)
    tokens = [getattr(usage, name, 0) for name in ("prompt_tokens", "completion_tokens")]
    prompt, completion = (
        t if isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 10**9 else 0
        for t in tokens
    )
    choices = getattr(response, "choices", None)
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = getattr(choice, "message", None)
    if message is None:
        return None, prompt, completion
    content = getattr(message, "content", None)
    return (content if isinstance(content, str) else ""), prompt, completion


def failure(exc: openai.APIError) -> str:
    """An endpoint's failure for a log line: its status and the size of its body, never
    the body (an endpoint that echoes the prompt would put users' text in the log)."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}, a body of {len(exc.response.content)} bytes"
    return type(exc).__name__


#: How much of a refused answer is shown back to the model with the retry.
MAX_ECHO_CHARS: Final = 8000


def _echo(content: str) -> str:
    """A refused answer as it is shown back to the model: as written, but encodable, and
    no longer than an honest answer."""
    if not is_utf8_text(content):
        content = content.encode("utf-8", "replace").decode()
    return content[:MAX_ECHO_CHARS]


def _reason(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return TIMEOUT
    if isinstance(exc, openai.APIConnectionError):
        return "unreachable"
    return "endpoint_error"


def retry_wait(exc: openai.APIError, attempt: int) -> float | None:
    """Seconds to wait before trying `exc`'s call again (attempt 0 is the first retry);
    None when another try cannot help: a timeout has spent the call's time, and a
    4xx other than 408/409/429 would answer the same."""
    if isinstance(exc, openai.APITimeoutError):
        return None
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code not in _RETRIED_STATUSES and exc.status_code < 500:
            return None
        asked = _retry_after_s(exc.response.headers)
        if asked is not None:
            return asked
    elif not isinstance(exc, openai.APIConnectionError):
        return None  # an error inside an answer: asking again repeats it
    return min(RETRY_CAP_S, RETRY_FIRST_S * 2.0**attempt) * (1 - 0.25 * random.random())


def _retry_after_s(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        try:
            value = float(raw) * scale if raw is not None else None
        except ValueError:
            continue  # an HTTP date: the backoff decides
        if value is not None and 0 <= value <= 3600:
            return value
    return None


class StructuredLLM:
    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int = 2,
        limiter: RedisRateLimiter | None = None,
        usage: UsageSink | None = None,
        response_format: str = "auto",
    ) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        # Retries are this client's own, inside the call's total time: the SDK's would
        # sleep a Retry-After past it.
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=0,
            http_client=bounded_http_client(timeout=timeout_s),
        )
        self._limiter = limiter
        self._usage = usage
        #: the index in FORMATS of the shape the endpoint takes; len(FORMATS): none
        self.format_index = first_format(response_format)

    @property
    def schema_supported(self) -> bool:
        """Whether the endpoint still gets a `response_format` of some shape."""
        return self.format_index < len(FORMATS)

    def call(
        self,
        *,
        stage: str,
        tenant: str,
        system: str,
        user: str,
        schema: type[T],
        deadline: float | None = None,
        items: int = 1,
        max_tokens: int | None = None,
        on_timeout: Literal["fallback", "defer"] = "fallback",
    ) -> Answer[T]:
        """The validated answer, or the reason to fall back for its `items` items. With
        on_timeout="defer", a call out of time is neither counted nor a fallback: the
        answer says `deferred`, and the caller counts what it does instead (`deferral`
        or `fallback`)."""
        messages: list[dict[str, str]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        reason = INVALID_OUTPUT
        try:
            for attempt in range(2):
                content = self._complete(stage, tenant, messages, schema, deadline, max_tokens)
                check = OutputCheck()
                try:
                    value = parse_json_answer(content, schema, check)
                except (ValueError, ValidationError, RecursionError) as exc:
                    reason, problem = answer_reason(exc), answer_problem(exc)
                    log.info(
                        "%s: answer refused (attempt %d, %d characters): %s",
                        stage, attempt + 1, len(content), problem,
                    )  # fmt: skip
                    messages += [
                        {"role": "assistant", "content": _echo(content)},
                        {
                            "role": "user",
                            "content": f"That answer was not valid: {problem[:500]}. "
                            "Reply again with only the JSON object, in the requested shape.",
                        },
                    ]
                    if deadline is not None and time.monotonic() >= deadline:
                        reason = "over_budget"  # no time left to ask again
                        break
                    continue
                if check.problems:
                    log.info(
                        "%s: %d values of the answer mended, %d items dropped",
                        stage, check.mended, len(check.dropped),
                    )  # fmt: skip
                    self.fallback(tenant, stage, INVALID_VALUE, items=check.problems, failed=False)
                return Answer(value, dropped=tuple(check.dropped))
        except _NoAnswer as exc:
            reason = exc.reason
            if reason == TIMEOUT and on_timeout == "defer":
                return Answer(None, reason, deferred=True)
        self.fallback(tenant, stage, reason, items=items)
        return Answer(None, reason)

    def fallback(
        self, tenant: str, stage: str, reason: str, *, items: int = 1, failed: bool = True
    ) -> None:
        """Count `items` items of `stage` handed to local mode (or values of an answer
        mended or dropped: `failed` False, the call itself answered), and why."""
        LLM_FALLBACKS_TOTAL.labels(stage, reason).inc(items)
        self._record(
            tenant, stage, calls=0, failures=int(failed), fallbacks=items, fallback_reason=reason
        )

    def deferral(self, tenant: str, stage: str, *, items: int = 1) -> None:
        """Count `items` items of `stage` left for a later call: the model was too slow
        for this one."""
        LLM_DEFERRALS_TOTAL.labels(stage).inc(items)
        self._record(tenant, stage, calls=0, failures=1, deferrals=items)

    def _complete(
        self,
        stage: str,
        tenant: str,
        messages: list[dict[str, str]],
        schema: type[BaseModel],
        deadline: float | None,
        max_tokens: int | None,
    ) -> str:
        budget = self.timeout_s
        if deadline is not None:
            budget = min(budget, max(MIN_CALL_S, deadline - time.monotonic()))
        if self._limiter is not None:
            # RateLimited goes up: the caller stops for now (the turns stay pending), it
            # does not fall back, or a busy endpoint would turn LLM mode into local mode.
            self._limiter.acquire(max_wait_s=None if deadline is None else budget)
        ends = time.monotonic() + budget
        for attempt in range(self.max_retries + 1):
            client = self._client.with_options(timeout=max(0.001, ends - time.monotonic()))
            try:
                with call_deadline(ends):
                    response = self._create(client, messages, schema, max_tokens)
                break
            except openai.APIError as exc:
                wait = retry_wait(exc, attempt)
                if wait is None or attempt == self.max_retries or time.monotonic() + wait >= ends:
                    log.warning("%s: model call failed (%s), falling back", stage, failure(exc))
                    record_llm_call(
                        stage=stage, tenant=tenant, prompt_tokens=0, completion_tokens=0, ok=False
                    )
                    raise _NoAnswer(_reason(exc)) from None
                time.sleep(wait)
            except ValueError:  # a 200 whose body claims to be JSON and is not
                log.warning("%s: the model endpoint's answer is not JSON", stage)
                record_llm_call(
                    stage=stage, tenant=tenant, prompt_tokens=0, completion_tokens=0, ok=False
                )
                raise _NoAnswer(INVALID_OUTPUT) from None
        content, prompt_tokens, completion_tokens = read_completion(response)
        record_llm_call(
            stage=stage,
            tenant=tenant,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            ok=content is not None,
        )
        self._record(
            tenant, stage, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        if content is None:
            log.warning("%s: the model endpoint's answer holds no message", stage)
            raise _NoAnswer(INVALID_OUTPUT)
        return content

    def _create(
        self,
        client: openai.OpenAI,
        messages: list[dict[str, str]],
        schema: type[BaseModel],
        max_tokens: int | None,
    ) -> Any:
        """One completion, in the first `response_format` shape the endpoint takes."""
        payload: Any = messages
        while True:
            extra: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
            if self.schema_supported:
                extra["response_format"] = response_format(schema, FORMATS[self.format_index])
            try:
                return client.chat.completions.create(
                    model=self.model, messages=payload, temperature=0, **extra
                )
            except openai.APIStatusError as exc:
                if "response_format" not in extra or not refuses_format(exc):
                    raise
                self.format_index += 1
                log.warning(
                    "the model endpoint refuses response_format %s; trying %s",
                    extra["response_format"]["type"],
                    FORMATS[self.format_index] if self.schema_supported else "none",
                )

    def _record(self, tenant: str, stage: str, **fields: Any) -> None:
        if self._usage is None:
            return
        try:
            self._usage(tenant=tenant, stage=stage, model=self.model, **fields)
        except Exception:  # accounting must never fail the pipeline
            log.exception("could not record LLM usage")

    def close(self) -> None:
        self._client.close()
