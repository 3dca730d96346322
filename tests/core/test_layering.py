"""The house rules the code cannot break silently: no module in the memwell root, and
the import contracts of pyproject.toml (`lint-imports`) hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_memwell_root_holds_only_the_public_names(repo_root: Path) -> None:
    modules = sorted(p.name for p in (repo_root / "memwell").glob("*.py"))
    assert modules == ["__init__.py", "__main__.py"]


def test_import_contracts_hold(repo_root: Path) -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=repo_root, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_bench_never_imports_the_tests(repo_root: Path) -> None:
    import ast

    offenders = []
    for path in (repo_root / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert offenders == []
