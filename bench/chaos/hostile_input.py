"""The long runs of the hostile-input checks, beyond the bounded default suite:

- the tenant-isolation property (Hypothesis) at 10,000 generated cases;
- schemathesis against the running app, many examples per operation and mode, at the
  suite's fixed seed (`python -m bench.chaos.fuzz`: rounds of random seeds).

- hostile clients against a real API process (bench/chaos/hostile_clients.py):
  unauthenticated 8 MiB bodies, and slow-header and slow-body connections, with
  the API's memory and an authenticated probe's latency.

Each check runs its pytest module on real services (embedded Postgres, Valkey, a
Celery worker) with a larger budget, streams pytest's progress, and the script prints
a table: cases run, wall time, verdict. The default-suite budgets (200 cases, 25
examples) run in the same invocation first as the baseline.

    python -m bench.chaos.hostile_input [--cases 10000] [--fuzz-examples 300] [--skip-baseline]
                                        [--only checks|clients] [--attack-seconds 20]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.chaos.hostile_clients import run_attacks

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    name: str
    budget: str
    counted: str
    seconds: float
    passed: bool


def run_pytest(module: str, env: dict[str, str]) -> tuple[bool, str]:
    """Run one pytest module in a subprocess, streaming its lines; (passed, its output)."""
    # --timeout 0: the suite's per-test limit (300 s) is for the bounded budgets.
    cmd = [sys.executable, "-m", "pytest", module, "-q", "-s", "-p", "no:cacheprovider",
           "--timeout", "0"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # progress as it happens
        if not line.startswith("You can reproduce"):
            print("   ", line.rstrip()[:200], flush=True)
        lines.append(line)
    return proc.wait() == 0, "".join(lines)


def _run(name: str, module: str, var: str, pattern: str, budget: int) -> Run:
    env = {**os.environ, var: str(budget), "HF_HUB_OFFLINE": "1"}
    print(f"== {name}: {var}={budget}", flush=True)
    started = time.monotonic()
    ok, out = run_pytest(module, env)
    found = re.search(pattern, out)
    return Run(name, str(budget), found.group(1) if found else "?", time.monotonic() - started, ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--fuzz-examples", type=int, default=300)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--only", choices=("checks", "clients"), default=None)
    parser.add_argument("--attack-seconds", type=float, default=20.0)
    args = parser.parse_args()
    passed = True
    if args.only != "clients":
        passed = _checks(args.cases, args.fuzz_examples, skip_baseline=args.skip_baseline)
    if args.only != "checks":
        print("\n== hostile clients against a real API process", flush=True)
        _, met = run_attacks(args.attack_seconds)
        passed = passed and met
    raise SystemExit(0 if passed else 1)


def _checks(cases: int, fuzz_examples: int, *, skip_baseline: bool) -> bool:
    prop = ("tenant isolation property", "tests/api/test_tenant_property.py",
            "MEMWELL_PROPERTY_EXAMPLES", r"property: (\d+) generated cases")  # fmt: skip
    fuzz = ("schemathesis", "tests/api/test_schemathesis.py", "MEMWELL_FUZZ_EXAMPLES",
            r"schemathesis: seed \d+, (\d+) examples")  # fmt: skip
    plan = [] if skip_baseline else [(*prop, 200), (*fuzz, 25)]
    plan += [(*prop, cases), (*fuzz, fuzz_examples)]
    runs = [_run(*item) for item in plan]
    print(f"\n{'check':<28}{'budget':>8}{'run':>8}{'seconds':>10}  verdict")
    for r in runs:
        verdict = "pass" if r.passed else "FAIL"
        print(f"{r.name:<28}{r.budget:>8}{r.counted:>8}{r.seconds:>10.1f}  {verdict}")
    return all(r.passed for r in runs)


if __name__ == "__main__":
    main()
