"""The benchmarks' progress (bench/harness/progress.py): into a file or a pipe, at most one
line every few seconds and one at the end, never a line per update; on a terminal, a
live bar. No benchmark draws its own `\\r` lines any more."""

from __future__ import annotations

import io
import re
from pathlib import Path

from bench.harness.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_into_a_file_a_line_every_interval_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress("settled turns", 10_000, every_s=30.0, stream=out, clock=clock) as bar:
        assert not bar.live
        for done in range(1, 10_001):
            clock.now = done * 0.01  # 100 s in all, an update every 10 ms
            bar.update(done)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines == [
        "  settled turns: 3,000/10,000 (30 s)",
        "  settled turns: 6,000/10,000 (60 s)",
        "  settled turns: 9,000/10,000 (90 s)",
        "  settled turns: 10,000/10,000 (100 s)",
    ]


def test_a_short_step_writes_only_its_last_line_with_its_note() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("GET /healthz x50 clients", 400, stream=out, clock=clock)
    for done in range(400):
        bar.update(done + 1)
    clock.now = 2.0
    bar.close("400 ok, 0 refused (503), 0 errors, 2.0 s")
    bar.close("closed twice")  # once only
    assert out.getvalue() == (
        "  GET /healthz x50 clients: 400/400 400 ok, 0 refused (503), 0 errors, 2.0 s (2 s)\n"
    )


def test_without_a_total_the_count_alone() -> None:
    out = io.StringIO()
    with Progress("walked", stream=out) as bar:
        bar.advance(5)
        bar.advance(7, "rebuilt")
    assert out.getvalue() == "  walked: 12 rebuilt (0 s)\n"


def test_no_benchmark_draws_carriage_returns(repo_root: Path) -> None:
    drawn = [
        f"{path.relative_to(repo_root)}:{n}"
        for path in (repo_root / "bench").rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"""print\(.*(\\r(?!\\n)|end="\\r")""", line)
    ]
    assert drawn == []
