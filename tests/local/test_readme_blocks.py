"""Every Python code block of the README runs as written, against a live stack.

The blocks name the documented URL, key and user; the test puts the live stack's URL,
an admin key and a fresh user in their place, and runs the blocks in order. A block
that cannot run here says so in a first-line comment `# not run by the tests: <why>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from memwell.local.worker_process import WorkerProcess
from tests.support.live_api import serve_api

SKIP = "# not run by the tests:"


def python_blocks(readme: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block."""
    found = []
    for m in re.finditer(r"^```python\n(.*?)^```", readme, re.M | re.S):
        found.append((readme.count("\n", 0, m.start()) + 1, m.group(1)))
    return found


def test_readme_has_python_blocks_to_run(repo_root: Path) -> None:
    blocks = python_blocks((repo_root / "README.md").read_text())
    assert len(blocks) >= 3
    for line, code in blocks:
        compile(code, f"README.md:{line}", "exec")  # every block is valid Python


def test_readme_python_blocks_run_against_a_live_stack(
    repo_root: Path,
    stack_env: dict[str, str],
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    key = make_key("default", ("admin",))["Authorization"].removeprefix("Bearer ")
    blocks = python_blocks((repo_root / "README.md").read_text())
    with serve_api() as url:
        for line, code in blocks:
            if code.startswith(SKIP):
                continue
            live = (
                code.replace("http://127.0.0.1:8420", url)
                .replace('api_key="mw_..."', f'api_key="{key}"')
                .replace("api_key=None", f'api_key="{key}"')
                .replace('"u1"', f'"{ids["user"]}"')
            )
            try:
                exec(compile(live, f"README.md:{line}", "exec"), {"__name__": "readme"})
            except Exception as exc:  # name the block that broke
                pytest.fail(f"README.md block at line {line} failed: {exc!r}")
