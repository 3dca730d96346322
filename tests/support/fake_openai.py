"""A fake OpenAI-compatible HTTP server for tests.

It is a real HTTP/1.1 server on loopback (``127.0.0.1``, a free port) served from a background
thread, so the real ``openai`` SDK (and anything else speaking HTTP) can talk to it::

    with FakeOpenAI() as fake:
        fake.script_chat([Reply('{"facts": []}'), Status(429, retry_after=1), Malformed("{oops")])
        client = openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
        ...
        assert fake.requests[0].json["model"] == "gpt-4o-mini"

Endpoints
---------
``POST /v1/chat/completions``
    Answers with the next scripted item (:meth:`FakeOpenAI.script_chat`), or with
    :attr:`FakeOpenAI.default_chat` once the script is exhausted. Script items:

    * :class:`Reply` -- a normal ``chat.completion`` whose message content is the given text.
    * :class:`Malformed` -- the same HTTP 200 shape; the *model output* is the given (broken) text.
    * :class:`Status` -- an HTTP error with an OpenAI-style ``{"error": {...}}`` body and, when
      ``retry_after`` is set, a ``Retry-After`` header.
    * :class:`Delay` -- sleeps ``seconds`` (to trigger client timeouts), then answers with ``then``.
    * :class:`Handler` -- the content is ``fn(request_json)``, for routing on the prompt; or,
      when ``fn`` returns a :class:`Raw`, that answer.
    * :class:`Raw` -- an HTTP answer sent as given: a body that is not JSON, or JSON that is
      no completion (``{"choices": []}``), as a broken or hostile endpoint sends.
    * :class:`Drip` -- a 200 whose body arrives one byte every ``interval`` seconds (an
      endpoint that is never silent long enough for a read timeout).
    * :class:`Normal` -- answer with the default responder (a "pass" slot in a script).

    ``"stream": true`` requests get Server-Sent Events: ``chat.completion.chunk`` objects carrying
    the content in word-sized pieces, then ``data: [DONE]`` (plus a usage chunk when
    ``stream_options.include_usage`` is set). Errors are never streamed: a :class:`Status` item
    answers a streaming request with the plain HTTP error, as the real API does.

``POST /v1/embeddings``
    Deterministic vectors of :attr:`FakeOpenAI.embedding_dim` floats (or the request's
    ``dimensions``), see :func:`fake_embedding`. ``input`` may be a string or a list of strings;
    ``encoding_format`` may be ``"float"`` or ``"base64"`` (the SDK's default). Errors and delays
    can be scripted with :meth:`FakeOpenAI.script_embeddings` (``Status``/``Delay``/``Normal``).

``GET /v1/models`` (and ``GET /v1/models/{id}``)
    One model, :attr:`FakeOpenAI.model_id`.

Every request (including rejected ones) is recorded in :attr:`FakeOpenAI.requests` as a
:class:`RecordedRequest` with lower-cased header names. When :attr:`FakeOpenAI.required_api_key`
is set, requests without ``Authorization: Bearer <that key>`` get a 401.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt

__all__ = [
    "ChatItem",
    "Delay",
    "Drip",
    "EmbeddingItem",
    "FakeOpenAI",
    "Handler",
    "Malformed",
    "Normal",
    "Raw",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "Status",
    "cosine",
    "fake_embedding",
    "last_user_message",
]

DEFAULT_EMBEDDING_DIM = 384
DEFAULT_MODEL_ID = "fake-model"


# --------------------------------------------------------------------------------------------
# Script items
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A normal chat completion whose assistant message content is ``content``."""

    content: str


@dataclass(frozen=True)
class Malformed:
    """A valid HTTP 200 chat completion whose content is malformed model output (e.g. bad JSON)."""

    content: str


@dataclass(frozen=True)
class Status:
    """An HTTP error response with an OpenAI-style error body.

    ``retry_after`` (seconds) adds a ``Retry-After`` header. ``body`` replaces the whole default
    ``{"error": {"message", "type", "code"}}`` body.
    """

    code: int
    retry_after: float | None = None
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class Delay:
    """Sleep ``seconds`` before answering with ``then`` (interrupted when the server closes)."""

    seconds: float
    then: ScriptItem


@dataclass(frozen=True)
class Drip:
    """A 200 answer whose ``content`` arrives one byte every ``interval`` seconds."""

    content: str
    interval: float


@dataclass(frozen=True)
class Raw:
    """An HTTP answer sent as given (``body`` need not be JSON, nor a completion)."""

    body: bytes
    code: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Handler:
    """Compute the chat content from the parsed request body (e.g. route on the prompt);
    a :class:`Raw` it returns is sent as the whole answer."""

    fn: Callable[[dict[str, Any]], str | Raw]


@dataclass(frozen=True)
class Normal:
    """Answer as the endpoint does by default (the default chat responder / real embeddings)."""


ScriptItem: TypeAlias = "Reply | Malformed | Status | Delay | Drip | Handler | Normal | Raw"
ChatItem: TypeAlias = ScriptItem
EmbeddingItem: TypeAlias = "Status | Delay | Normal"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake saw it. ``headers`` keys are lower-cased."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    json: Any
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def prompt(self) -> str:
        """The last user message of a chat request ("" when there is none)."""
        return last_user_message(self.json) if isinstance(self.json, dict) else ""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Text of a message ``content``: a string or a list of ``{"type": "text", ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def last_user_message(body: dict[str, Any]) -> str:
    """The text of the last ``role == "user"`` message of a chat request body ("" if none)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _all_message_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    return "\n".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


def _rough_tokens(text: str) -> int:
    """A rough token count: about one token per four characters, at least one per word."""
    if not text:
        return 0
    return max(len(text.split()), (len(text) + 3) // 4)


_WORD_RE = re.compile(r"[a-z0-9]+")
_PIECE_RE = re.compile(r"\S+\s*|\s+")


def _seed(label: str, text: str) -> int:
    digest = hashlib.sha256(f"{label}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


@lru_cache(maxsize=65536)
def _unit_vector(label: str, text: str, dim: int) -> npt.NDArray[np.float64]:
    """A pseudo-random unit vector determined by ``(label, text, dim)``. Do not mutate it."""
    vec = np.random.default_rng(_seed(label, text)).standard_normal(dim)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


def fake_embedding(
    text: str, dim: int = DEFAULT_EMBEDDING_DIM, *, bow_weight: float = 1.0
) -> list[float]:
    """Deterministic unit-length embedding of ``text``.

    The vector is ``normalize(h + bow_weight * b)`` where

    * ``h`` is a unit vector drawn from a NumPy generator seeded with ``sha256(text)``: identical
      texts get identical vectors, and any two different texts get nearly orthogonal ``h``
      (cosine ~ N(0, 1/sqrt(dim)), i.e. about +-0.05 at 384 dims);
    * ``b`` is a small bag-of-words term: the normalized sum of one seeded unit vector per
      lower-cased alphanumeric word (``[a-z0-9]+``), weighted by word count.

    So texts sharing words have a clearly higher cosine than unrelated texts (with the default
    weight, two texts with the same words but different punctuation score about 0.5, texts
    sharing half their words about 0.25, unrelated texts about 0), while nothing about real
    semantics is implied. Set ``bow_weight=0`` for pure hash vectors.
    """
    vec = _unit_vector("text", text, dim).copy()
    words = _WORD_RE.findall(text.lower())
    if words and bow_weight:
        bow = np.zeros(dim)
        for word in words:
            bow += _unit_vector("word", word, dim)
        bow_norm = float(np.linalg.norm(bow))
        if bow_norm > 0:
            vec += bow_weight * (bow / bow_norm)
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return [float(x) for x in vec]


def cosine(a: Iterable[float], b: Iterable[float]) -> float:
    """Cosine similarity of two vectors (0.0 if either is all zeros)."""
    va = np.asarray(list(a), dtype=np.float64)
    vb = np.asarray(list(b), dtype=np.float64)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denom if denom else 0.0


_ERROR_DEFAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Bad request (fake).", "invalid_request_error", None),
    401: ("Incorrect API key provided (fake).", "invalid_request_error", "invalid_api_key"),
    403: ("Forbidden (fake).", "invalid_request_error", None),
    404: ("Not found (fake).", "invalid_request_error", "not_found"),
    408: ("Request timed out (fake).", "timeout", None),
    409: ("Conflict (fake).", "invalid_request_error", None),
    422: ("Unprocessable entity (fake).", "invalid_request_error", None),
    429: ("Rate limit reached (fake).", "requests", "rate_limit_exceeded"),
    500: ("The server had an error processing your request (fake).", "server_error", None),
    502: ("Bad gateway (fake).", "server_error", None),
    503: ("The engine is currently overloaded (fake).", "server_error", "overloaded"),
    504: ("Gateway timeout (fake).", "server_error", None),
}


def _error_body(code: int, message: str | None = None) -> dict[str, Any]:
    default_message, err_type, err_code = _ERROR_DEFAULTS.get(
        code,
        (f"HTTP {code} (fake).", "server_error" if code >= 500 else "invalid_request_error", None),
    )
    return {
        "error": {
            "message": message or default_message,
            "type": err_type,
            "param": None,
            "code": err_code,
        }
    }


def _format_retry_after(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


class _Aborted(Exception):
    """The server is closing while a request was delayed: drop the connection, answer nothing."""


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # We join handler threads ourselves, with a timeout, in FakeOpenAI.close().
    block_on_close = False

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _RequestHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (timeouts, closed pools) are routine here; stay quiet about them.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    sys_version = ""

    @property
    def fake(self) -> FakeOpenAI:
        return cast(_Server, self.server).fake

    # -- connection bookkeeping (so close() can unblock idle keep-alive connections) --

    def setup(self) -> None:
        super().setup()
        self.fake._track_connection(self.connection, threading.current_thread())

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._untrack_connection(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        return

    # -- dispatch --

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        parsed: Any = None
        bad_json = False
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                bad_json = True
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake._record(
            RecordedRequest(
                method=method, path=path, query=query, headers=headers, json=parsed, body=raw
            )
        )
        try:
            if not self.fake._authorized(headers.get("authorization")):
                self._send_error(401)
                return
            if bad_json:
                self._send_error(400, "We could not parse the JSON body of your request (fake).")
                return
            route = path.rstrip("/")
            if method == "POST" and route == "/v1/chat/completions":
                self._chat(parsed)
            elif method == "POST" and route == "/v1/embeddings":
                self._embeddings(parsed)
            elif method == "GET" and route == "/v1/models":
                self._send_json(200, {"object": "list", "data": [self.fake._model_object()]})
            elif method == "GET" and route.startswith("/v1/models/"):
                self._send_json(200, self.fake._model_object(route.removeprefix("/v1/models/")))
            else:
                self._send_error(404, f"Unknown route {method} {path} (fake).")
        except _Aborted:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # The client gave up (e.g. its timeout fired during a Delay).
            self.close_connection = True

    # -- endpoints --

    def _resolve_delays(self, item: ScriptItem) -> ScriptItem:
        while isinstance(item, Delay):
            if self.fake._closing.wait(item.seconds):
                raise _Aborted
            item = item.then
        return item

    def _chat(self, body: Any) -> None:
        if not isinstance(body, dict):
            self._send_error(400, "Expected a JSON object body (fake).")
            return
        shape = (body.get("response_format") or {}).get("type")
        accepted = self.fake.response_formats
        if shape is not None and accepted is not None and shape not in accepted:
            # llama-cpp-python's server answers a shape it does not know with a 500
            # that names the field; others with a 400.
            self._send_error(
                self.fake.response_format_refusal_status,
                f"response_format {shape} is not supported by this server (fake).",
            )
            return
        item = self._resolve_delays(Delay(self.fake.chat_delay, self.fake._next_chat_item()))
        if isinstance(item, Normal):
            item = self._resolve_delays(self.fake.default_chat)
            if isinstance(item, Normal):  # a default of Normal() means the built-in echo
                item = _ECHO
        if isinstance(item, Status):
            self._send_status(item)
            return
        if isinstance(item, Drip):
            self._drip(item)
            return
        answer: str | Raw
        if isinstance(item, Reply | Malformed):
            answer = item.content
        elif isinstance(item, Raw):
            answer = item
        elif isinstance(item, Handler):
            try:
                answer = item.fn(body)
            except Exception as exc:  # surface handler bugs to the test, not just the client
                self.fake._handler_error(exc)
                self._send_error(500, f"fake Handler raised {type(exc).__name__}: {exc}")
                return
        else:  # unreachable: Delay and Normal were resolved above
            self._send_error(500, f"Unexpected script item {item!r} (fake).")
            return
        if isinstance(answer, Raw):
            self._send_raw(answer)
            return
        content = answer
        model = body.get("model") if isinstance(body.get("model"), str) else DEFAULT_MODEL_ID
        prompt_tokens = _rough_tokens(_all_message_text(body))
        completion_tokens = _rough_tokens(content)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        completion_id = f"chatcmpl-fake{self.fake._next_id()}"
        created = int(time.time())
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            self._stream_chat(completion_id, created, str(model), content, usage, include_usage)
            return
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
                "system_fingerprint": "fp_fake",
            },
        )

    def _stream_chat(
        self,
        completion_id: str,
        created: int,
        model: str,
        content: str,
        usage: dict[str, int],
        include_usage: bool,
    ) -> None:
        def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                out["usage"] = None
            return out

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_fake{self.fake._next_id()}")
        self.end_headers()

        events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""}, None)]
        events += [chunk({"content": piece}, None) for piece in _PIECE_RE.findall(content)]
        events.append(chunk({}, "stop"))
        if include_usage:
            final = chunk({}, None)
            final["choices"] = []
            final["usage"] = usage
            events.append(final)
        for event in events:
            self._write_chunk(f"data: {json.dumps(event)}\n\n".encode())
            pause = self.fake.stream_chunk_delay
            if pause and self.fake._closing.wait(pause):
                raise _Aborted
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drip(self, item: Drip) -> None:
        data = json.dumps(
            {"id": "chatcmpl-drip", "object": "chat.completion", "created": int(time.time()),
             "model": DEFAULT_MODEL_ID, "choices": [{"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": item.content}}]}
        ).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            if self.fake._closing.wait(item.interval):
                raise _Aborted

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _embeddings(self, body: Any) -> None:
        if not isinstance(body, dict):
            self._send_error(400, "Expected a JSON object body (fake).")
            return
        item = self._resolve_delays(self.fake._next_embedding_item())
        if isinstance(item, Status):
            self._send_status(item)
            return
        if not isinstance(item, Normal):
            self._send_error(500, f"{type(item).__name__} is not a valid embeddings item (fake).")
            return
        raw_input = body.get("input")
        inputs: list[str]
        if isinstance(raw_input, str):
            inputs = [raw_input]
        elif isinstance(raw_input, list) and all(isinstance(x, str) for x in raw_input):
            inputs = cast(list[str], raw_input)
        else:
            self._send_error(400, "'input' must be a string or a list of strings (fake).")
            return
        if not inputs or any(not x for x in inputs):
            self._send_error(400, "'input' must be non-empty strings (fake).")
            return
        dim = body.get("dimensions")
        if not isinstance(dim, int) or dim <= 0:
            dim = self.fake.embedding_dim
        as_base64 = body.get("encoding_format") == "base64"
        data: list[dict[str, Any]] = []
        for index, text in enumerate(inputs):
            vec = fake_embedding(text, dim, bow_weight=self.fake.bow_weight)
            encoded: Any = (
                base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")
                if as_base64
                else vec
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(_rough_tokens(t) for t in inputs)
        model = body.get("model") if isinstance(body.get("model"), str) else DEFAULT_MODEL_ID
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    # -- responses --

    def _send_status(self, item: Status) -> None:
        headers: dict[str, str] = {}
        if item.retry_after is not None:
            headers["Retry-After"] = _format_retry_after(item.retry_after)
        body = item.body if item.body is not None else _error_body(item.code)
        self._send_json(item.code, body, headers)

    def _send_raw(self, item: Raw) -> None:
        self.send_response(item.code)
        self.send_header("Content-Type", item.content_type)
        self.send_header("Content-Length", str(len(item.body)))
        self.end_headers()
        self.wfile.write(item.body)
        self.wfile.flush()

    def _send_error(self, code: int, message: str | None = None) -> None:
        self._send_json(code, _error_body(code, message))

    def _send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_fake{self.fake._next_id()}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _echo(body: dict[str, Any]) -> str:
    return f"fake reply to: {last_user_message(body)}"


_ECHO = Handler(_echo)


# --------------------------------------------------------------------------------------------
# Public server object
# --------------------------------------------------------------------------------------------


class FakeOpenAI:
    """A fake OpenAI-compatible server on ``127.0.0.1``; see the module docstring.

    Use as a context manager (or call :meth:`start` / :meth:`close`). All public methods and
    properties are thread-safe.

    Attributes you may set at any time:

    * ``default_chat`` -- the chat item used when the script is empty (initially an echo
      ``Handler`` answering ``"fake reply to: <last user message>"``).
    * ``required_api_key`` -- when set, requests must carry ``Authorization: Bearer <key>``.
    * ``embedding_dim`` -- vector length when the request has no ``dimensions`` (default 384).
    * ``bow_weight`` -- weight of the bag-of-words term in :func:`fake_embedding` (default 1.0).
    * ``model_id`` -- the model listed by ``GET /v1/models``.
    * ``stream_chunk_delay`` -- seconds to sleep between SSE chunks (default 0).
    * ``chat_delay`` -- seconds every chat request waits before it is answered, as a slow
      model does (default 0).
    * ``response_formats`` -- the ``response_format`` types accepted (None, the default:
      all); a request with another is answered ``response_format_refusal_status`` (400),
      as an endpoint without that JSON-schema support does.
    """

    def __init__(
        self,
        *,
        embedding_dim: int = DEFAULT_EMBEDDING_DIM,
        required_api_key: str | None = None,
        model_id: str = DEFAULT_MODEL_ID,
        bow_weight: float = 1.0,
    ) -> None:
        self.embedding_dim = embedding_dim
        self.required_api_key = required_api_key
        self.model_id = model_id
        self.bow_weight = bow_weight
        self.stream_chunk_delay = 0.0
        self.chat_delay = 0.0
        self.response_formats: frozenset[str] | None = None
        self.response_format_refusal_status = 400
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._chat_script: deque[ScriptItem] = deque()
        self._embedding_script: deque[EmbeddingItem] = deque()
        self._default_chat: ScriptItem = _ECHO
        self._requests: list[RecordedRequest] = []
        self._handler_errors: list[BaseException] = []
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._handler_threads: list[threading.Thread] = []
        self._counter = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._request_seen = threading.Condition(self._lock)

    # -- lifecycle --

    def start(self) -> FakeOpenAI:
        """Bind a free loopback port and start serving in a daemon thread. Idempotent."""
        if self._server is not None:
            return self
        self._closing.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, drop open connections and join threads (each join bounded by timeout)."""
        server = self._server
        if server is None:
            return
        self._closing.set()  # wakes Delay sleeps
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
            threads = list(self._handler_threads)
        for conn in connections:  # unblocks handlers waiting on idle keep-alive connections
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses --

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for ``openai.OpenAI(base_url=...)``."""
        return f"{self.url}/v1"

    # -- scripting --

    def script_chat(self, items: Iterable[ScriptItem]) -> None:
        """Append items to the chat script; each chat request consumes one, in order."""
        with self._lock:
            self._chat_script.extend(items)

    def script_embeddings(self, items: Iterable[EmbeddingItem]) -> None:
        """Append ``Status``/``Delay``/``Normal`` items that embeddings requests consume first."""
        with self._lock:
            self._embedding_script.extend(items)

    @property
    def pending_chat(self) -> int:
        """How many scripted chat items have not been consumed yet."""
        with self._lock:
            return len(self._chat_script)

    @property
    def pending_embeddings(self) -> int:
        with self._lock:
            return len(self._embedding_script)

    @property
    def default_chat(self) -> ScriptItem:
        with self._lock:
            return self._default_chat

    @default_chat.setter
    def default_chat(self, item: ScriptItem) -> None:
        with self._lock:
            self._default_chat = item

    def reset(self) -> None:
        """Clear scripts, recorded requests and handler errors; restore the echo default."""
        with self._lock:
            self._chat_script.clear()
            self._embedding_script.clear()
            self.chat_delay = 0.0
            self.response_formats = None
            self.response_format_refusal_status = 400
            self._requests.clear()
            self._handler_errors.clear()
            self._default_chat = _ECHO

    # -- inspection --

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot (copy) of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Recorded requests whose path is ``path`` (e.g. ``"/v1/chat/completions"``)."""
        return [r for r in self.requests if r.path.rstrip("/") == path.rstrip("/")]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/chat/completions")

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/embeddings")

    @property
    def handler_errors(self) -> list[BaseException]:
        """Exceptions raised by ``Handler`` functions (each also answered with a 500)."""
        with self._lock:
            return list(self._handler_errors)

    def wait_for_requests(
        self, count: int, *, path: str | None = None, timeout: float = 5.0
    ) -> list[RecordedRequest]:
        """Block until at least ``count`` requests (to ``path``, if given) were recorded.

        Returns the matching requests; raises ``TimeoutError`` if they do not arrive in time.
        """

        def matching() -> list[RecordedRequest]:
            if path is None:
                return list(self._requests)
            return [r for r in self._requests if r.path.rstrip("/") == path.rstrip("/")]

        deadline = time.monotonic() + timeout
        with self._request_seen:
            while len(found := matching()) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"expected {count} requests{f' to {path}' if path else ''}, "
                        f"got {len(found)}"
                    )
                self._request_seen.wait(remaining)
            return found

    # -- internals used by the request handler --

    def _record(self, request: RecordedRequest) -> None:
        with self._request_seen:
            self._requests.append(request)
            self._request_seen.notify_all()

    def _authorized(self, header: str | None) -> bool:
        with self._lock:
            key = self.required_api_key
        return key is None or header == f"Bearer {key}"

    def _next_chat_item(self) -> ScriptItem:
        with self._lock:
            return self._chat_script.popleft() if self._chat_script else Normal()

    def _next_embedding_item(self) -> EmbeddingItem:
        with self._lock:
            return self._embedding_script.popleft() if self._embedding_script else Normal()

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _handler_error(self, exc: BaseException) -> None:
        with self._lock:
            self._handler_errors.append(exc)

    def _model_object(self, model_id: str | None = None) -> dict[str, Any]:
        return {
            "id": model_id or self.model_id,
            "object": "model",
            "created": 1700000000,
            "owned_by": "memwell-fake",
        }

    def _track_connection(self, conn: socket.socket, thread: threading.Thread) -> None:
        with self._lock:
            self._connections[conn] = thread
            self._handler_threads = [t for t in self._handler_threads if t.is_alive()]
            self._handler_threads.append(thread)

    def _untrack_connection(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.pop(conn, None)
