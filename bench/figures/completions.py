"""Time to first streamed byte through the OpenAI-compatible door, against calling the
model directly, and against POST /v1/context for the same requests.

    python -m bench.figures.completions [--rows 1000000] [--users 1000] [--requests 300]

The API (uvicorn, one process) serves a store of `--rows` memories over `--users`
users; its upstream is bench/harness/echo_upstream.py, a model that answers at once, so
what is timed is what sits in front of it. Per request, in the same run and in turn:
the first SSE byte from the upstream directly; the first SSE byte through Memwell; and
POST /v1/context with the same user and message (the memory work the door adds). The
door's added time is paired per request (through Memwell minus direct).

Goal: the added p95 is at most 1.2x the p95 of /v1/context.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from bench.harness.api_server import free_port, serve_api
from bench.harness.chat_stack import API_ENV, admin_headers, chat_bodies, load_store
from bench.harness.common import percentile, print_table
from bench.harness.host import describe_host
from bench.harness.stack import REPO_ROOT, services, stop_group

GOAL_RATIO = 1.2


@contextmanager
def echo_upstream() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.harness.echo_upstream", "--port", str(port)],
        cwd=REPO_ROOT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/models", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the echo upstream did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        stop_group(proc)


def first_byte_ms(client: httpx.Client, url: str, body: dict[str, object], **kw: object) -> float:
    """Milliseconds until the first server-sent event arrives."""
    started = time.perf_counter()
    with client.stream("POST", url, json=body, **kw) as response:  # type: ignore[arg-type]
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:"):
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("the stream ended without an event")


def timed_ms(call: Callable[[], httpx.Response]) -> float:
    started = time.perf_counter()
    call().raise_for_status()
    return (time.perf_counter() - started) * 1000


def run(rows: int, users: int, requests: int) -> None:
    print(f"host: {describe_host()}", file=sys.stderr)
    with services() as stack, echo_upstream() as upstream:
        load_store(stack, rows=rows, users=users)
        headers = admin_headers(stack.database_url)
        env = {**API_ENV, "OPENAI_BASE_URL": upstream, "OPENAI_API_KEY": "bench",
               "MEMWELL_EMBEDDING_PROVIDER": "local", "MEMWELL_PIPELINE_MODE": "local"}  # fmt: skip
        with serve_api(stack, env=env) as api, httpx.Client(timeout=30) as client:
            direct, door, added, context = [], [], [], []
            bodies = chat_bodies(requests + 20, users=users)
            for n, b in enumerate(bodies):
                messages = [{"role": "user", "content": b["message"]}]
                chat = {"model": "bench-echo", "stream": True, "messages": messages}
                d = first_byte_ms(client, f"{upstream}/chat/completions", chat)
                m = first_byte_ms(
                    client, f"{api.url}/v1/chat/completions", {**chat, "user": b["user_id"]},
                    headers={**headers, "X-Memwell-Session": b["session_id"]},
                )  # fmt: skip
                c = timed_ms(lambda b=b: client.post(
                    f"{api.url}/v1/context", headers=headers,
                    json={"user_id": b["user_id"], "session_id": b["session_id"],
                          "query": b["message"]},
                ))  # fmt: skip
                if n < 20:
                    continue  # warm-up: first-use costs are not what a user meets
                direct.append(d), door.append(m), added.append(m - d), context.append(c)
                if n % 50 == 0:
                    print(f"  {n - 20}/{requests} requests", file=sys.stderr)
    rows_out = [
        (name, percentile(v, 50), percentile(v, 95))
        for name, v in (
            ("first byte, upstream directly", direct),
            ("first byte, through Memwell", door),
            ("added by the door (paired)", added),
            ("POST /v1/context (same requests)", context),
        )
    ]
    print(f"\nOpenAI-compatible door, {rows:,} memories over {users:,} users, "
          f"{requests} requests; host: {describe_host()}")  # fmt: skip
    print_table(["measure", "p50 ms", "p95 ms"], rows_out)
    ratio = percentile(added, 95) / percentile(context, 95)
    verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
    print(f"\ngoal: added p95 <= {GOAL_RATIO}x /v1/context p95 -> {ratio:.2f}x ({verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    run(args.rows, args.users, args.requests)


if __name__ == "__main__":
    main()
