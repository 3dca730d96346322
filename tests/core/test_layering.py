"""Imports go one way: api and worker may import memwell; memwell imports neither."""

from __future__ import annotations

import ast
from pathlib import Path


def test_memwell_imports_neither_api_nor_worker(repo_root: Path) -> None:
    offenders = []
    for path in (repo_root / "memwell").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in {"api", "worker"}]
    assert offenders == []
