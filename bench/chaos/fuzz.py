"""Long randomized schemathesis runs against the running app, to run by hand.

The test suite runs `tests/api/test_schemathesis.py` bounded and at a fixed seed, so a
CI run sends nearly the same requests each time. This runs the same module (a real API
on a real port, embedded Postgres and Valkey, a Celery worker) round after round, each
round with a fresh random seed (or the seeds given) and more examples per operation and
mode. It streams pytest's progress, then prints a table: round, seed, examples, answers
by status class, the operations that failed, seconds, verdict; and, for a failed round,
the command that replays it in the test.

    python -m bench.chaos.fuzz [--rounds 3] [--examples 100] [--seed S ...] [--only TEXT]

`--only "DELETE /v1/turns"` fuzzes the operations whose label contains the text. A
round over every operation at the suite's 25 examples took 5 minutes on a busy 2-core
host; the time grows about linearly with `--examples`.
Exits 1 when a round failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.chaos.hostile_input import run_pytest

MODULE = "tests/api/test_schemathesis.py"
SUMMARY = "schemathesis-summary: "


@dataclass
class Round:
    seed: int
    seconds: float
    passed: bool
    examples: int = 0
    by_class: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def _summary(output: str) -> dict[str, object]:
    for line in output.splitlines():
        if line.startswith(SUMMARY):
            found: dict[str, object] = json.loads(line.removeprefix(SUMMARY))
            return found
    return {}


def run_round(seed: int, examples: int, only: str) -> Round:
    env = {**os.environ, "MEMWELL_FUZZ_SEED": str(seed), "MEMWELL_FUZZ_EXAMPLES": str(examples),
           "MEMWELL_FUZZ_ONLY": only, "HF_HUB_OFFLINE": "1"}  # fmt: skip
    started = time.monotonic()
    passed, output = run_pytest(MODULE, env)
    found = _summary(output)
    statuses = found.get("statuses", {})
    by_class: Counter[str] = Counter()
    for status, n in statuses.items() if isinstance(statuses, dict) else ():
        by_class[f"{str(status)[0]}xx"] += int(n)
    failures = found.get("failures", [])
    return Round(
        seed=seed,
        seconds=time.monotonic() - started,
        passed=passed,
        examples=int(str(found.get("examples", 0))),
        by_class=by_class,
        failures=[str(f) for f in failures] if isinstance(failures, list) else [],
    )


def replay(seed: int, examples: int, only: str) -> str:
    env = f"MEMWELL_FUZZ_SEED={seed} MEMWELL_FUZZ_EXAMPLES={examples}"
    if only:
        env += f" MEMWELL_FUZZ_ONLY={shlex.quote(only)}"
    return f"{env} .venv/bin/python -m pytest {MODULE} -q -s"


def print_table(rounds: list[Round], examples: int, only: str) -> None:
    print(f"\n{'round':>5}{'seed':>12}{'examples':>10}{'2xx':>8}{'4xx':>8}{'5xx':>6}"
          f"{'seconds':>9}  verdict")  # fmt: skip
    for n, r in enumerate(rounds, 1):
        verdict = "pass" if r.passed else "FAIL " + "; ".join(r.failures or ["(see output)"])
        c = r.by_class
        print(f"{n:>5}{r.seed:>12}{r.examples:>10}{c['2xx']:>8}{c['4xx']:>8}{c['5xx']:>6}"
              f"{r.seconds:>9.0f}  {verdict}")  # fmt: skip
    total = sum(r.examples for r in rounds)
    failed = [r for r in rounds if not r.passed]
    print(f"\n{len(rounds)} rounds, {total} examples, {len(failed)} failed")
    for r in failed:
        print(f"replay round seed {r.seed}: {replay(r.seed, examples, only)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of fresh random seeds")
    parser.add_argument("--examples", type=int, default=100, help="per operation and mode")
    parser.add_argument("--seed", type=int, action="append", default=[],
                        help="run these seeds instead of random ones (repeatable)")  # fmt: skip
    parser.add_argument("--only", default="", help="only operations whose label has this")
    args = parser.parse_args()
    seeds = args.seed or [random.SystemRandom().randrange(2**32) for _ in range(args.rounds)]
    rounds = []
    for n, seed in enumerate(seeds, 1):
        only = f", only {args.only!r}" if args.only else ""
        print(f"== round {n}/{len(seeds)}: seed {seed}, {args.examples} examples per "
              f"operation and mode{only}", flush=True)  # fmt: skip
        rounds.append(run_round(seed, args.examples, args.only))
    print_table(rounds, args.examples, args.only)
    return 0 if all(r.passed for r in rounds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
