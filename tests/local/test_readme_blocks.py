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


def _live(code: str, *, url: str, key: str, redis_url: str, user: str) -> str:
    """A documented block pointed at the live stack, its key and a test's own user."""
    return (
        code.replace("http://127.0.0.1:8420", url)
        .replace("redis://redis:6379/0", redis_url)
        .replace('api_key="mw_..."', f'api_key="{key}"')
        .replace("api_key=None", f'api_key="{key}"')
        .replace('"u1"', f'"{user}"')
    )


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
                live = _live(code, url=url, key=key, redis_url=stack_env["REDIS_URL"], user=user)
                try:
                    exec(compile(live, f"{where}:{line}", "exec"), {"__name__": "readme"})
                except Exception as exc:  # name the block that broke
                    pytest.fail(f"{where} block at line {line} failed: {exc!r}")
                ran += 1
    assert ran >= 8


def test_the_own_model_loop_quickstart_runs_twice(
    repo_root: Path,
    stack_env: dict[str, str],
    worker: WorkerProcess,
    make_key: Callable[..., dict[str, str]],
    ids: dict[str, str],
) -> None:
    """The block ends by erasing its user, and its first turn carries an event time from
    before that erasure: on the second run that turn is dropped, and waiting for it
    returns (it is `dropped`, because the user was erased) instead of timing out."""
    readme = (repo_root / "README.md").read_text()
    block = next(code for _, code in python_blocks(readme) if '"id": "msg-41"' in code)
    key = make_key("default", ("admin",))["Authorization"].removeprefix("Bearer ")
    with serve_api() as url:
        live = _live(block, url=url, key=key, redis_url=stack_env["REDIS_URL"], user=ids["user"])
        # The block's turn ids are fixed; in the shared tenant they must be this test's.
        live = live.replace('"msg-4', f'"{ids["user"]}-msg-4')
        for _ in range(2):
            exec(compile(live, "README.md quickstart 2", "exec"), {"__name__": "readme"})
        from memwell import MemoryClient

        with MemoryClient(url, api_key=key) as mw:
            first = mw.turn_status(f"{ids['user']}-msg-41")
    assert (first.status, first.reason) == ("dropped", "user erased")
