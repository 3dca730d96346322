"""The setup scripts install what their job needs and nothing else: the main job
(scripts/start.sh) installs Python packages only, never a system package, on a machine
without Chromium too; the test command (scripts/test.sh) adds the Chromium its browser
tests drive, with apt where it can.

Each script runs for real, on a copy of the repo's scripts in a scratch directory whose
.venv holds stand-ins (memwell, python, ruff, ...) that only record how they were called,
with a PATH that has no browser and an `apt-get` that records its calls."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

#: What the scripts run besides the .venv's programs and the fake apt-get.
TOOLS = ("bash", "dirname", "cut", "sha256sum", "cat", "id", "mktemp", "rm")
VENV_PROGRAMS = ("python", "memwell", "ruff", "mypy", "lint-imports", "mkdocs", "pip")


def _recorder(path: Path, log: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "${{0##*/}} $*" >> "{log}"\nexit 0\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def scratch(tmp_path: Path, repo_root: Path) -> Path:
    """A repo copy: its scripts and pyproject.toml, a .venv of recorders whose install
    stamp matches (bootstrap installs nothing), and a bin/ of the tools alone."""
    root = tmp_path / "repo"
    shutil.copytree(repo_root / "scripts", root / "scripts")
    shutil.copy(repo_root / "pyproject.toml", root / "pyproject.toml")
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    for name in VENV_PROGRAMS:
        _recorder(venv / name, tmp_path / "calls.log")
    digest = subprocess.run(
        ["sha256sum", str(root / "pyproject.toml")], capture_output=True, text=True, check=True
    ).stdout[:16]
    (root / ".venv" / ".memwell-installed").write_text(digest + "\n")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (tools / tool).symlink_to(found)
    _recorder(tools / "apt-get", tmp_path / "apt.log")
    return root


def _run(scratch: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    tmp = scratch.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {"PATH": str(scratch.parent / "bin"), "HOME": str(scratch.parent), "TMPDIR": str(tmp)}
    return subprocess.run(
        [shutil.which("bash") or "bash", str(scratch / "scripts" / script), *args],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get is used only as root")
def test_the_main_job_installs_no_system_package(scratch: Path) -> None:
    done = _run(scratch, "start.sh", "--exit-after-demo")
    assert done.returncode == 0, done.stderr
    assert _lines(scratch.parent / "apt.log") == []  # no Chromium, and still no apt
    assert _lines(scratch.parent / "calls.log") == ["memwell up --demo --exit-after-demo"]
    assert "chromium" not in done.stdout + done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get is used only as root")
def test_the_test_command_installs_chromium_where_there_is_none(scratch: Path) -> None:
    done = _run(scratch, "test.sh", "-x")
    assert done.returncode == 0, done.stderr
    assert _lines(scratch.parent / "apt.log") == [
        "apt-get update -qq",
        "apt-get install -y -qq chromium",
    ]
    calls = _lines(scratch.parent / "calls.log")
    assert calls[-1] == "python -m pytest -n 2 -x"  # and then the suite, on two processes
    # The docs' site dir went to the checkout's scratch space, and was removed.
    assert any(c.startswith("mkdocs build --strict --site-dir .pytest-tmp/site") for c in calls)
    assert not (scratch / ".pytest-tmp" / "site").exists()
    assert list((scratch.parent / "tmp").iterdir()) == []


def test_a_browser_already_there_is_used(scratch: Path) -> None:
    chromium = scratch.parent / "bin" / "chromium"
    _recorder(chromium, scratch.parent / "browser.log")
    done = _run(scratch, "browser.sh")
    assert done.returncode == 0, done.stderr
    assert _lines(scratch.parent / "apt.log") == []
    assert done.stdout + done.stderr == ""
