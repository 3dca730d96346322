"""Every Python code block of the README and of the documentation pages (docs/) runs as
written, against a live stack.

The blocks name the documented URL, key, broker and user; the test puts the live
stack's URL, an admin key, its broker and a fresh user per page in their place, and
runs each page's blocks in order. A block that cannot run here says so in a first-line
comment `# not run by the tests: <why>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from memwell.local.worker_process import WorkerProcess
from tests.support.live_api import serve_api

SKIP = "# not run by the tests:"


def python_blocks(page: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block."""
    found = []
    for m in re.finditer(r"^```python\n(.*?)^```", page, re.M | re.S):
        found.append((page.count("\n", 0, m.start()) + 1, m.group(1)))
    return found


def pages(repo_root: Path) -> list[Path]:
    """The README, then every page of the documentation site."""
    return [repo_root / "README.md", *sorted((repo_root / "docs").rglob("*.md"))]


def test_readme_and_docs_have_python_blocks_to_run(repo_root: Path) -> None:
    assert len(python_blocks((repo_root / "README.md").read_text())) >= 3
    total = 0
    for page in pages(repo_root):
        for line, code in python_blocks(page.read_text()):
            compile(code, f"{page.name}:{line}", "exec")  # every block is valid Python
            total += 1
    assert total >= 8


def test_python_blocks_run_against_a_live_stack(
    repo_root: Path,
    stack_env: dict[str, str],
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    key = make_key("default", ("admin",))["Authorization"].removeprefix("Bearer ")
    ran = 0
    with serve_api() as url:
        for n, page in enumerate(pages(repo_root)):
            where = page.relative_to(repo_root)
            # A user per page: a page may erase its user at the end.
            user = f"{ids['user']}-{n}"
            for line, code in python_blocks(page.read_text()):
                if code.startswith(SKIP):
                    continue
                live = (
                    code.replace("http://127.0.0.1:8420", url)
                    .replace("redis://redis:6379/0", stack_env["REDIS_URL"])
                    .replace('api_key="mw_..."', f'api_key="{key}"')
                    .replace("api_key=None", f'api_key="{key}"')
                    .replace('"u1"', f'"{user}"')
                )
                try:
                    exec(compile(live, f"{where}:{line}", "exec"), {"__name__": "readme"})
                except Exception as exc:  # name the block that broke
                    pytest.fail(f"{where} block at line {line} failed: {exc!r}")
                ran += 1
    assert ran >= 8
