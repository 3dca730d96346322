"""A recorded model behind an OpenAI-compatible endpoint: what a capable model wrote
about a LoCoMo conversation, served to Memwell's own calls.

LoCoMo records, per session and speaker, the observations GPT-3.5-turbo wrote (each
citing the dia_id of its turn) and a summary of each session. This server answers
Memwell's pipeline calls with them, so LLM and hybrid mode run their real path end to
end (windows, parsing, output rules, tidying, attribution, time budget, the hybrid
merge) with a capable writer that cannot be reached from here:

- an analysis window (`<msg id=N from="...">text</msg>` lines) gets the recorded
  observations that cite its messages, each under the number the window gave its
  message, in the answer shape the prompt asks for (brief or full);
- a summary call (`<turn ...>text</turn>` lines) gets the recorded summary of the
  session its turns belong to;
- anything else (a reconcile question) gets an answer the caller refuses, so the local
  rule decides, as it would for a model that could not say.

The server never sees the questions: it finds the messages by their text, the session
by the messages it holds most of. Each answer reports the prompt and completion tokens
a real call would have cost. Nothing in `memwell/` knows it exists.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.harness.common import send_json
from memwell.core.tokens import count_tokens

MODEL_NAME = "recorded-locomo"
_DIA = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)_(?:observation|summary)$")
_MSG = re.compile(r'<msg id=(\d+) from="[^"]*">(.*?)</msg>', re.S)
_TURN = re.compile(r"<turn [^>]*>(.*?)</turn>", re.S)


def _norm(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Place:
    """Where a turn's text was said: conversation, session number, dia_id."""

    sample_id: str
    session: int
    dia_id: str


@dataclass
class RecordedModel:
    """The recorded observations and summaries of a LoCoMo file, and the turns' texts
    to find them by."""

    #: a turn's text as Memwell stores it ("Speaker: text") -> where it was said
    places: dict[str, list[Place]] = field(default_factory=dict)
    #: (sample_id, dia_id) -> the observations citing that turn
    observations: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    #: (sample_id, session number) -> the session's recorded summary
    summaries: dict[tuple[str, int], str] = field(default_factory=dict)
    #: calls answered, by kind (analysis, summary, unknown) and messages not found
    stats: Counter[str] = field(default_factory=Counter)

    @classmethod
    def from_file(cls, path: Path) -> RecordedModel:
        model = cls()
        places: dict[str, list[Place]] = defaultdict(list)
        observations: dict[tuple[str, str], list[str]] = defaultdict(list)
        for sample in json.loads(path.read_text(encoding="utf-8")):
            sid = str(sample["sample_id"])
            for key, turns in sample["conversation"].items():
                if not (key.startswith("session_") and isinstance(turns, list)):
                    continue
                number = int(key.split("_")[1])
                for t in turns:
                    text = _norm(f"{t['speaker']}: {t['text']}")
                    places[text].append(Place(sid, number, str(t["dia_id"])))
            for by_speaker in sample.get("observation", {}).values():
                for facts in by_speaker.values():
                    for fact, cited in facts:
                        # One memory, one turn: an observation citing several is
                        # recorded with its first.
                        if ids := _DIA.findall(json.dumps(cited)):
                            observations[(sid, "D{}:{}".format(*ids[0]))].append(str(fact))
            for key, summary in sample.get("session_summary", {}).items():
                if m := _SESSION.match(key):
                    model.summaries[(sid, int(m.group(1)))] = str(summary)
        model.places, model.observations = dict(places), dict(observations)
        return model

    def locate(self, texts: Sequence[str]) -> list[Place | None]:
        """Where each text was said: all in the session that holds most of them (a
        short line such as "Thanks!" is said in many), in order within it."""
        found = [self.places.get(_norm(t), []) for t in texts]
        sessions: Counter[tuple[str, int]] = Counter()
        for ps in found:
            sessions.update({(p.sample_id, p.session) for p in ps})
        if not sessions:
            return [None] * len(texts)
        best = sessions.most_common(1)[0][0]
        located: list[Place | None] = []
        last = -1
        for ps in found:
            here = sorted(
                (p for p in ps if (p.sample_id, p.session) == best),
                key=lambda p: int(p.dia_id.split(":")[1]),
            )
            after = [p for p in here if int(p.dia_id.split(":")[1]) > last] or here
            pick = after[0] if after else None
            if pick is not None:
                last = int(pick.dia_id.split(":")[1])
            located.append(pick)
        return located

    def analysis(self, system: str, user: str) -> str:
        """The recorded observations of the window's messages, in the prompt's shape."""
        messages = [(int(n), text) for n, text in _MSG.findall(user)]
        places = self.locate([text for _, text in messages])
        full = '"valid_from"' in system
        memories: list[dict[str, Any]] = []
        for (n, _), place in zip(messages, places, strict=True):
            if place is None:
                self.stats["message not found"] += 1
                continue
            for fact in self.observations.get((place.sample_id, place.dia_id), []):
                # No score, kind or entities: the recording has none, and Memwell fills
                # what a model leaves out by its local rules.
                memories.append({"id": n, "content": fact} | ({"valid_from": None} if full else {}))
        return json.dumps({"memories": memories})

    def summary(self, user: str) -> str:
        """The recorded summary of the session the turns belong to."""
        places = [p for p in self.locate(_TURN.findall(user)) if p is not None]
        if not places:
            self.stats["session not found"] += 1
            return json.dumps({"summary": ""})
        sid, number = Counter((p.sample_id, p.session) for p in places).most_common(1)[0][0]
        return json.dumps({"summary": self.summaries.get((sid, number), "")})

    def complete(self, messages: Sequence[dict[str, Any]]) -> str:
        """The answer to one chat completion's messages."""
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        if "<msg id=" in user:
            self.stats["analysis"] += 1
            return self.analysis(system, user)
        if "<turn " in user:
            self.stats["summary"] += 1
            return self.summary(user)
        self.stats["unknown"] += 1
        return "{}"


def completion(model: RecordedModel, body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion answering `body`, with a real call's token counts."""
    messages = body.get("messages") or []
    answer = model.complete(messages)
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in messages)
    return {
        "id": f"chatcmpl-recorded-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or MODEL_NAME),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": count_tokens(answer),
            "total_tokens": prompt + count_tokens(answer),
        },
    }


def _handler(model: RecordedModel) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()  # the stats counter is shared by the server's threads

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            send_json(self, status, body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "the body is not JSON"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            with lock:
                answer = completion(model, body)
            self._send(200, answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # a line per call would bury the bench's progress

    return Handler


@contextmanager
def recorded_server(model: RecordedModel, *, port: int = 0) -> Iterator[str]:
    """The server on a loopback port, in a thread of this process; yields its base URL
    (ending in /v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(model))
    thread = threading.Thread(target=server.serve_forever, name="recorded-model", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
