"""A minimal OpenAI-compatible model for benchmarks: it answers every chat completion at
once with a fixed reply (streamed as SSE chunks when asked), so a benchmark measures
what sits in front of the model, not the model.

    python -m bench.harness.echo_upstream --port 8999

A process of its own: the benchmark's client must not share a GIL with it.
"""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.harness.common import send_json

REPLY = "Noted. " * 20
MODEL = "bench-echo"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def _json(self, status: int, body: object) -> None:
        send_json(self, status, body)

    def do_GET(self) -> None:  # noqa: N802
        self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        base = {"id": "chatcmpl-bench", "created": int(time.time()), "model": MODEL}
        if not body.get("stream"):
            message = {"role": "assistant", "content": REPLY}
            self._json(200, {**base, "object": "chat.completion",
                             "choices": [{"index": 0, "message": message,
                                          "finish_reason": "stop"}]})  # fmt: skip
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        words = REPLY.split(" ")
        for word in words:
            chunk = {**base, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": {"content": word + " "}}]}  # fmt: skip
            self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that reads only the first event and hangs up is the point of a
        # time-to-first-byte benchmark, not an error.
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    _Server(("127.0.0.1", args.port), _Handler).serve_forever()


if __name__ == "__main__":
    main()
