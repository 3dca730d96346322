"""Python code blocks of a Markdown page, and running them against a live API.

A page's blocks name the documented URL, key and user; `run_blocks` puts the live
stack's URL, a key and a fresh user in their place and runs the blocks in order, in
one namespace. A block that cannot run here says so in a first-line comment
`# not run by the tests: <why>`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SKIP = "# not run by the tests:"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block."""
    found = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return found


def run_blocks(page: Path, *, url: str, key: str, user: str) -> int:
    """Run the page's blocks in order; returns how many ran. Fails naming the block."""
    ran = 0
    namespace: dict[str, object] = {"__name__": "docs"}
    for line, code in python_blocks(page.read_text()):
        if code.startswith(SKIP):
            continue
        live = (
            code.replace("http://127.0.0.1:8420", url)
            .replace('api_key="mw_..."', f'api_key="{key}"')
            .replace('"u1"', f'"{user}"')
        )
        try:
            exec(compile(live, f"{page.name}:{line}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            pytest.fail(f"{page.name} block at line {line} failed: {exc!r}")
        ran += 1
    return ran
