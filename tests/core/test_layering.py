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
