"""A stand-in for `python -m llama_cpp.server`, for the supervision tests only.

It takes the real server's arguments and answers GET /v1/models with its alias, which
is all `memwell up` waits on; the real server is exercised by the real-model tier
(tests/real_llm/). Its behaviour is steered by the environment:

- FAKE_LLAMA_ARGV: append the arguments, as one JSON line per start, to this file;
- FAKE_LLAMA_FAIL: print this as its last words and exit 1 (a model that fails to load);
- FAKE_LLAMA_SILENT: run without ever listening (a server that hangs while loading).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("--model", "--model_alias", "--host"):
        parser.add_argument(name, required=True)
    for name in ("--port", "--n_ctx", "--n_threads"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--interrupt_requests", choices=("true", "false"), required=True)
    return parser.parse_args(argv)


def _handler(alias: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/v1/models":
                self.send_error(404)
                return
            body = json.dumps(
                {"object": "list", "data": [{"id": alias, "object": "model", "owned_by": "me"}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if record := os.environ.get("FAKE_LLAMA_ARGV"):
        with open(record, "a") as f:
            f.write(json.dumps(argv) + "\n")
    if reason := os.environ.get("FAKE_LLAMA_FAIL"):
        print(f"loading {args.model}", flush=True)
        print(reason, flush=True)
        return 1
    if os.environ.get("FAKE_LLAMA_SILENT"):
        while True:
            time.sleep(1)
    HTTPServer((args.host, args.port), _handler(args.model_alias)).serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
