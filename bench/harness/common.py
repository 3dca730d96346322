"""Shared pieces of the benchmarks: real embedded services, table printing, and the
JSON replies of their stand-in model servers."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; samples need not be sorted."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def summarize_us(samples_s: Sequence[float]) -> dict[str, float]:
    us = [s * 1e6 for s in samples_s]
    return {
        "p50": percentile(us, 50),
        "p95": percentile(us, 95),
        "mean": statistics.fmean(us),
    }


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [
        [f"{c:,.1f}" if isinstance(c, float) else str(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))


def send_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    """A JSON reply of known length (the client may keep the connection)."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
